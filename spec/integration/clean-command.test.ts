import { afterEach, beforeAll, beforeEach, describe, expect, test } from '@jest/globals';
import { execFile } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { embeddedDatabaseDir, openEmbeddedDatabase } from '../../lib/db/engine/open-embedded-database.js';
import { RecordStore } from '../../lib/db/record-store.js';
import { syncDatabaseSchema } from '../../lib/db/schema/sync-database-schema.js';
import { FILE_SWEEP_LOCK_KEY } from '../../lib/db/shared-names.js';
import { buildSchemaRegistry, type CollectionSchema } from '../../lib/schema/collection-schema.js';
import type { CollectionDefinition } from '../../lib/schema/definitions.js';
import { ensureBuilt } from '../support/built-package.js';
import { openTestDatabase, testEngines } from '../support/test-database.js';

const run = promisify(execFile);
const DAY = 24 * 60 * 60 * 1000;

const COLLECTIONS: CollectionDefinition[] = [
  {
    name: 'docs',
    fields: [
      { name: 'cover', type: 'file' },
      { name: 'attachments', type: 'file', maxSelect: 3 },
    ],
  },
];
const registry = buildSchemaRegistry(COLLECTIONS);
const docs = registry.get('docs') as CollectionSchema;
const C = docs.id;
const A = 'aaaaaaaaaaaaaaa';
const GONE = 'zzzzzzzzzzzzzzz';

/** The storage objects of every test: what `clean --days 0.5` must keep and remove. */
const FILES = {
  referenced: { key: `${C}/${A}/cover_aaaaaaaaaa.png`, bytes: 700, age: 3 * DAY },
  referencedThumb: { key: `${C}/${A}/thumbs_cover_aaaaaaaaaa.png/100x100_cover_aaaaaaaaaa.png`, bytes: 70, age: 3 * DAY },
  attachment: { key: `${C}/${A}/notes_bbbbbbbbbb.txt`, bytes: 10, age: 3 * DAY },
  stale: { key: `${C}/${A}/stale_cccccccccc.png`, bytes: 1500, age: 3 * DAY },
  ofDeletedRecord: { key: `${C}/${GONE}/gone_dddddddddd.txt`, bytes: 2500, age: 3 * DAY },
  young: { key: `${C}/${A}/young_eeeeeeeeee.txt`, bytes: 5, age: 60 * 60 * 1000 },
  unknownCollection: { key: `pbc_elsewhere/${GONE}/gone_dddddddddd.txt`, bytes: 9, age: 3 * DAY },
};
const REMOVED = [FILES.stale.key, FILES.ofDeletedRecord.key];

describe('recordbase clean', () => {
  let root: string;
  let cli: string;
  let dir: string;
  let dataDir: string;

  /** Writes a file straight into the disk storage layout and back-dates it. */
  async function putFile(file: { key: string; bytes: number; age: number }): Promise<void> {
    const target = join(dataDir, 'storage', ...file.key.split('/'));
    await fs.mkdir(join(target, '..'), { recursive: true });
    await fs.writeFile(target, Buffer.alloc(file.bytes, 0x62));
    const when = new Date(Date.now() - file.age);
    await fs.utimes(target, when, when);
  }

  const exists = (key: string) => existsSync(join(dataDir, 'storage', ...key.split('/')));

  beforeAll(async () => {
    root = await ensureBuilt();
    cli = join(root, 'dist/lib/cli/main.js');
  }, 180_000);

  beforeEach(async () => {
    dir = await fs.mkdtemp(join(tmpdir(), 'rb-clean-'));
    dataDir = join(dir, 'data');
    for (const file of Object.values(FILES)) await putFile(file);
  });

  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  /** A config on the embedded database under dataDir, its schema made by `recordbase migrate` and one record seeded. */
  async function prepareEmbedded(): Promise<void> {
    await fs.writeFile(join(dir, 'recordbase.config.js'), `export default ${JSON.stringify({ dataDir, collections: COLLECTIONS })};\n`);
    await run(process.execPath, [cli, 'migrate'], { cwd: dir });
    // PGlite opens a data directory in one process at a time: seed, then close before the CLI runs.
    const db = openEmbeddedDatabase(embeddedDatabaseDir(dataDir));
    try {
      await new RecordStore(db).insert(docs, { id: A, cover: 'cover_aaaaaaaaaa.png', attachments: ['notes_bbbbbbbbbb.txt'] });
    } finally {
      await db.destroy();
    }
  }

  test('--dry-run reports what would go and removes nothing; the real run removes it and prints the summary', async () => {
    await prepareEmbedded();
    const dry = await run(process.execPath, [cli, 'clean', '--days', '0.5', '--dry-run'], { cwd: dir });
    expect(dry.stdout.trim()).toBe('Scanned 7 files, would remove 2 (4.0 kB would be freed), skipped 1.');
    for (const file of Object.values(FILES)) expect(exists(file.key)).toBe(true);

    const real = await run(process.execPath, [cli, 'clean', '--config', join(dir, 'recordbase.config.js'), '--days', '0.5'], { cwd: tmpdir() });
    expect(real.stdout.trim()).toBe('Scanned 7 files, removed 2 (4.0 kB freed), skipped 1.');
    for (const file of Object.values(FILES)) expect(exists(file.key)).toBe(!REMOVED.includes(file.key));

    // --days 0 still honours references; the young unreferenced file goes now.
    const all = await run(process.execPath, [cli, 'clean', '--days', '0'], { cwd: dir });
    expect(all.stdout.trim()).toBe('Scanned 5 files, removed 1 (5 B freed), skipped 1.');
    expect(exists(FILES.young.key)).toBe(false);
    expect(exists(FILES.referenced.key)).toBe(true);
    expect(exists(FILES.referencedThumb.key)).toBe(true);
  }, 120_000);

  test('prints a progress line on stderr every 1000 files when stderr is not a terminal', async () => {
    await prepareEmbedded();
    for (let i = 0; i < 1000; i++) {
      await putFile({ key: `pbc_elsewhere/${GONE}/f_${String(i).padStart(10, '0')}.txt`, bytes: 1, age: 3 * DAY });
    }
    const result = await run(process.execPath, [cli, 'clean', '--days', '1'], { cwd: dir });
    expect(result.stdout.trim()).toBe('Scanned 1007 files, removed 2 (4.0 kB freed), skipped 1001.');
    const progressLines = result.stderr.split('\n').filter((line) => line.startsWith('Scanning:'));
    expect(progressLines).toHaveLength(1);
    expect(progressLines[0]).toMatch(/^Scanning: 1000 files, \d+ removed$/);
  }, 120_000);

  test('a missing, negative or malformed --days, or an unknown option, is a usage error (exit 2) that touches nothing', async () => {
    await fs.writeFile(join(dir, 'recordbase.config.js'), `export default ${JSON.stringify({ dataDir, collections: COLLECTIONS })};\n`);
    for (const args of [[], ['--days'], ['--days', '-1'], ['--days', 'abc'], ['--days', ''], ['--days', '1e3'], ['--days', '1', '--force']]) {
      const failure = await run(process.execPath, [cli, 'clean', ...args], { cwd: dir }).then(
        () => undefined,
        (error: { code: number; stderr: string }) => error,
      );
      expect(failure).toMatchObject({ code: 2 });
      expect(failure!.stderr).toContain('Usage');
      expect(failure!.stderr).toContain('Usage: recordbase clean --days N');
    }
    for (const file of Object.values(FILES)) expect(exists(file.key)).toBe(true);
    expect(existsSync(join(dataDir, 'db'))).toBe(false); // no database was even opened
  }, 60_000);

  test('a failure (here: a config without a database schema) exits 1 with the message', async () => {
    await fs.writeFile(join(dir, 'recordbase.config.js'), `export default ${JSON.stringify({ dataDir, collections: COLLECTIONS })};\n`);
    await expect(run(process.execPath, [cli, 'clean', '--days', '1'], { cwd: dir })).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining('recordbase: the database schema is not up to date with the config; run `recordbase migrate`'),
    });
    for (const file of Object.values(FILES)) expect(exists(file.key)).toBe(true);
  }, 60_000);

  if (testEngines().includes('postgres')) {
    test('on Postgres, while another instance sweeps (holds the lock) it says so, exits 0 and removes nothing', async () => {
      const database = await openTestDatabase('postgres');
      try {
        await syncDatabaseSchema(database.db, registry.collections);
        await new RecordStore(database.db).insert(docs, { id: A, cover: 'cover_aaaaaaaaaa.png', attachments: ['notes_bbbbbbbbbb.txt'] });
        const schema = ((await database.db.raw('SELECT current_schema() AS s')) as { rows: { s: string }[] }).rows[0]!.s;
        // The config lives in a temp folder, so it imports knex from this repository by path.
        const knexUrl = pathToFileURL(join(root, 'node_modules/knex/knex.js')).href;
        await fs.writeFile(
          join(dir, 'recordbase.config.js'),
          `import knex from ${JSON.stringify(knexUrl)};\n` +
            `export default { dataDir: ${JSON.stringify(dataDir)}, collections: ${JSON.stringify(COLLECTIONS)},\n` +
            `  database: knex({ client: 'pg', connection: ${JSON.stringify(process.env.RB_TEST_POSTGRES)}, searchPath: [${JSON.stringify(schema)}] }) };\n`,
        );
        const trx = await database.db.transaction();
        try {
          await trx.raw('SELECT pg_advisory_xact_lock(?::bigint)', [FILE_SWEEP_LOCK_KEY]);
          const held = await run(process.execPath, [cli, 'clean', '--days', '1'], { cwd: dir });
          expect(held.stdout).toContain('Another recordbase instance is sweeping files right now; nothing was done.');
          for (const file of Object.values(FILES)) expect(exists(file.key)).toBe(true);
        } finally {
          await trx.commit();
        }
        const free = await run(process.execPath, [cli, 'clean', '--days', '1'], { cwd: dir });
        expect(free.stdout.trim()).toBe('Scanned 7 files, removed 2 (4.0 kB freed), skipped 1.');
        for (const file of Object.values(FILES)) expect(exists(file.key)).toBe(!REMOVED.includes(file.key));
      } finally {
        await database.destroy();
      }
    }, 60_000);
  }
});
