import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRecordsRouter } from '../../lib/index.js';
import type { CollectionDefinition } from '../../lib/schema/definitions.js';
import { ensureBuilt } from '../support/built-package.js';
import { runNode } from '../support/node-process.js';
import { createMemoryLogger } from '../support/test-app.js';
import { openTestDatabase, testEngines, type TestDatabase } from '../support/test-database.js';

/**
 * `recordbase backup` (issue 45): the archive records.backup() writes, made from the command line
 * with the config's database, storage and backups folder, which `recordbase restore` brings back:
 * on the embedded engine the records and their files, on Postgres the files (the records are
 * pg_dump's). Through the built executable, as a user runs it.
 */

const collections: CollectionDefinition[] = [
  { name: 'notes', fields: [{ name: 'title', type: 'text' }, { name: 'doc', type: 'file' }], rules: { list: '', view: '', create: '', update: '', delete: '' } },
];

const scratch = mkdtempSync(path.join(os.tmpdir(), 'rb-backup-cli-'));
const tempDir = (prefix: string) => mkdtempSync(path.join(scratch, prefix));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

let root: string;
let cli: string;
beforeAll(async () => {
  root = await ensureBuilt();
  cli = path.join(root, 'dist/lib/cli/main.js');
}, 120_000);

const runCli = (args: string[], cwd: string) => runNode([cli, ...args], { cwd });

/** Every file under `dir` with its bytes, by path relative to it. */
function filesUnder(dir: string): Record<string, string> {
  const found: Record<string, string> = {};
  if (!existsSync(dir)) return found;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) found[path.relative(dir, path.join(entry.parentPath, entry.name))] = readFileSync(path.join(entry.parentPath, entry.name), 'base64');
  }
  return found;
}

/**
 * A config module for the executable: the collections and dataDir, and on Postgres a Knex on the
 * test's schema (knex resolved from this repository, since the config lives in a scratch folder).
 */
function writeConfig(dir: string, dataDir: string, database?: TestDatabase): string {
  const file = path.join(dir, 'recordbase.config.mjs');
  const knex = database
    ? `import { createRequire } from 'node:module';
const knex = createRequire(${JSON.stringify(path.join(root, 'package.json'))})('knex');
const database = knex({ client: 'pg', connection: ${JSON.stringify(database.url)}, searchPath: [${JSON.stringify(database.schema)}], pool: { min: 0, max: 2 } });
`
    : 'const database = undefined;\n';
  writeFileSync(file, `${knex}export default { database, dataDir: ${JSON.stringify(dataDir)}, collections: ${JSON.stringify(collections)}, realtime: false, fileSweep: false };\n`);
  return file;
}

describe.each(testEngines())('recordbase backup on %s', (engine) => {
  let database: TestDatabase | undefined;
  let sourceDir: string;
  let config: string;
  let bytes: Buffer[];

  beforeAll(async () => {
    if (engine === 'postgres') database = await openTestDatabase(engine);
    sourceDir = tempDir('rb-source-');
    const router = createRecordsRouter({ collections, dataDir: sourceDir, database: database?.db, logger: createMemoryLogger(), realtime: false, fileSweep: false });
    await router.ready;
    bytes = [randomBytes(200_000), randomBytes(1_000)];
    for (const [i, data] of bytes.entries()) await router.api.collection('notes').create({ title: `n${i}`, doc: { name: `f${i}.bin`, data } }, { as: 'superuser' });
    await router.close();
    config = writeConfig(tempDir('rb-config-'), sourceDir, database);
  }, 120_000);
  afterAll(async () => {
    await database?.destroy();
  });

  test('writes a backup into dataDir/backups that `recordbase restore` brings back, the files byte for byte (and, embedded, the records)', async () => {
    const written = await runCli(['backup', '--config', config, '--name', `cli_${engine}.tar.gz`], scratch);
    expect(written).toMatchObject({ code: 0, stderr: '' });
    const archive = path.join(sourceDir, 'backups', `cli_${engine}.tar.gz`);
    expect(written.stdout).toContain(`backup written: ${archive}`);
    expect(written.stdout).toMatch(/ {2}storage: 2 files, 201000 bytes/);
    expect(written.stdout).toMatch(engine === 'pglite' ? / {2}database: \d+ files, \d+ bytes/ : / {2}database: not included \(.*pg_dump/);

    const target = path.join(tempDir('rb-target-'), 'data');
    const restored = await runCli(['restore', archive, '--data-dir', target], scratch);
    expect(restored).toMatchObject({ code: 0, stderr: '' });
    expect(filesUnder(path.join(target, 'storage'))).toEqual(filesUnder(path.join(sourceDir, 'storage')));
    expect(Object.values(filesUnder(path.join(target, 'storage'))).map((b64) => Buffer.from(b64, 'base64').length).sort((a, b) => a - b)).toEqual([1_000, 200_000]);
    if (engine === 'pglite') {
      const router = createRecordsRouter({ collections, dataDir: target, logger: createMemoryLogger(), realtime: false, fileSweep: false });
      await router.ready;
      try {
        const notes = await router.api.collection('notes').getFullList({ as: 'superuser', sort: 'title' });
        expect(notes.map((note) => note.title)).toEqual(['n0', 'n1']);
      } finally {
        await router.close();
      }
    } else {
      expect(existsSync(path.join(target, 'db'))).toBe(false);
    }
  }, 180_000);

  test('a name that is not a backup key (../, a slash, no .tar.gz) is refused and nothing is written', async () => {
    for (const name of ['../evil.tar.gz', 'a/b.tar.gz', 'plain', '/tmp/abs.tar.gz']) {
      const before = readdirSync(path.join(sourceDir, 'backups'));
      const result = await runCli(['backup', '--config', config, '--name', name], scratch);
      expect(result).toMatchObject({ code: 1, stderr: expect.stringContaining('Invalid backup key') });
      expect(readdirSync(path.join(sourceDir, 'backups'))).toEqual(before);
    }
    expect(existsSync(path.join(sourceDir, 'evil.tar.gz'))).toBe(false);
    expect(existsSync('/tmp/abs.tar.gz')).toBe(false);
  }, 120_000);

  test('an unknown option or an argument is a usage error (exit code 2, the usage printed)', async () => {
    for (const args of [['backup', '--config', config, '--nmae', 'x.tar.gz'], ['backup', 'extra', '--config', config]]) {
      const result = await runCli(args, scratch);
      expect(result).toMatchObject({ code: 2, stderr: expect.stringContaining('Usage: recordbase backup [--config file] [--name key]') });
    }
  });
});

describe('recordbase backup on the embedded engine refuses what it cannot back up', () => {
  test('is listed by --help, and `backup --help` prints its options on stdout with exit code 0', async () => {
    const top = await runCli(['--help'], scratch);
    expect(top).toMatchObject({ code: 0, stdout: expect.stringContaining('  backup ') });
    const help = await runCli(['backup', '--help'], scratch);
    expect(help).toMatchObject({ code: 0, stderr: '', stdout: expect.stringContaining('Usage: recordbase backup [--config file] [--name key]') });
    expect(help.stdout).toContain('--name key');
  });

  test('no database in the dataDir yet: says so and creates none', async () => {
    const dataDir = path.join(tempDir('rb-empty-'), 'data');
    const config = writeConfig(tempDir('rb-config-'), dataDir);
    const result = await runCli(['backup', '--config', config], scratch);
    expect(result).toMatchObject({ code: 1, stderr: expect.stringContaining(`there is no embedded database in ${path.join(dataDir, 'db')} to back up`) });
    expect(existsSync(dataDir)).toBe(false);
  });

  test('while an app holds the dataDir: names the holder and says how to back up a running app', async () => {
    const dataDir = tempDir('rb-held-');
    const holder = createRecordsRouter({ collections, dataDir, logger: createMemoryLogger(), realtime: false, fileSweep: false });
    await holder.ready;
    try {
      const result = await runCli(['backup', '--config', writeConfig(tempDir('rb-config-'), dataDir)], scratch);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`is in use by process ${process.pid}`);
      expect(result.stderr).toContain('records.backup() or POST /api/backups');
      expect(existsSync(path.join(dataDir, 'backups'))).toBe(false);
    } finally {
      await holder.close();
    }
  }, 60_000);
});
