import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import knexFactory, { type Knex } from 'knex';
import { createRecordsRouter, type CollectionDefinition, type Migration } from '../../lib/index.js';
import { MIGRATIONS_TABLE } from '../../lib/db/shared-names.js';
import { createMemoryLogger, TEST_FILE_TOKEN_SECRET } from '../support/test-app.js';
import { openTestDatabase, testEngines, testKnexLog, type TestDatabase } from '../support/test-database.js';

/**
 * Migrations and several instances (issue 32 item 2): instances starting at once apply each
 * migration exactly once; and a folder of `.ts` and `.mjs` migrations loads without a build step.
 */

const COLLECTIONS: CollectionDefinition[] = [{ name: 'notes', fields: [{ name: 'title', type: 'text' }] }];

/** A migration that counts its runs in a table of its own, slowly, so that concurrent starts overlap while it runs. */
const countRun: Migration = {
  name: '001_count',
  async up(m) {
    await m.sql('CREATE TABLE IF NOT EXISTS "migration_runs" ("at" timestamptz NOT NULL DEFAULT now())');
    await m.sql('SELECT pg_sleep(0.3)');
    await m.sql('INSERT INTO "migration_runs" DEFAULT VALUES');
  },
};

describe('three instances starting at once on one Postgres', () => {
  const engines = testEngines().filter((engine) => engine === 'postgres');
  const maybe = engines.length > 0 ? test : test.skip;
  let db: TestDatabase | undefined;
  const pools: Knex[] = [];
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'rb-migrations-concurrent-'));

  afterAll(async () => {
    for (const pool of pools) await pool.destroy();
    await db?.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  });

  maybe('apply one pending migration exactly once, and all three start', async () => {
    db = await openTestDatabase('postgres');
    const schema = ((await db.db.raw('SELECT current_schema() AS s')) as { rows: { s: string }[] }).rows[0]!.s;
    for (let i = 0; i < 3; i++) pools.push(knexFactory({ client: 'pg', connection: process.env.RB_TEST_POSTGRES!, searchPath: [schema], pool: { min: 0, max: 3 }, log: testKnexLog }));
    const routers = pools.map((database) =>
      createRecordsRouter({ collections: COLLECTIONS, migrations: [countRun], database, dataDir, logger: createMemoryLogger(), fileSweep: false, fileTokenSecret: TEST_FILE_TOKEN_SECRET, thumbnailWorkers: 1 }),
    );
    try {
      await Promise.all(routers.map((router) => router.ready));
      const runs: { n: string }[] = await db.db('migration_runs').count({ n: '*' });
      expect(Number(runs[0]!.n)).toBe(1);
      expect(await db.db.select('name').from(MIGRATIONS_TABLE)).toEqual([{ name: '001_count' }]);
    } finally {
      await Promise.all(routers.map((router) => router.close()));
    }
  }, 60_000);
});

describe.each(testEngines())('a migrations folder on %s', (engine) => {
  let db: TestDatabase;
  let dir: string;

  beforeEach(async () => {
    db = await openTestDatabase(engine);
    dir = mkdtempSync(path.join(os.tmpdir(), 'rb-migrations-folder-'));
    mkdirSync(path.join(dir, 'migrations'));
  });
  afterEach(async () => {
    await db.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  function startWith(folder: string) {
    return createRecordsRouter({ collections: COLLECTIONS, migrations: folder, database: db.db, dataDir: path.join(dir, 'data'), logger: createMemoryLogger(), fileSweep: false, fileTokenSecret: TEST_FILE_TOKEN_SECRET, thumbnailWorkers: 1 });
  }

  test('loads .ts and .mjs files in name order (TypeScript with types, no build step), skips .d.ts and other files', async () => {
    const folder = path.join(dir, 'migrations');
    writeFileSync(
      path.join(folder, '002_second.ts'),
      `import type { MigrationContext } from 'recordbase';\ninterface Row { title: string }\nconst row: Row = { title: 'from ts' };\nexport default { async up(m: MigrationContext): Promise<void> { await m.records('notes').create(row); } };\n`,
    );
    writeFileSync(path.join(folder, '001_first.mjs'), `export default { async up(m) { await m.records('notes').create({ title: 'from mjs' }); } };\n`);
    writeFileSync(path.join(folder, 'types.d.ts'), 'export {};\n');
    writeFileSync(path.join(folder, 'README.md'), 'not a migration\n');
    const router = startWith(folder);
    try {
      await router.ready;
      const applied: { name: string }[] = await db.db.select('name').from(MIGRATIONS_TABLE).orderBy('applied_at');
      expect(applied.map((row) => row.name)).toEqual(['001_first', '002_second']);
      const titles = (await router.api.collection('notes').getFullList({ as: 'superuser', sort: 'title' })).map((r) => r.title);
      expect(titles).toEqual(['from mjs', 'from ts']);
    } finally {
      await router.close();
    }
  }, 60_000);

  test('a file without an up, a file that does not load, or a missing folder rejects ready naming it; nothing is applied', async () => {
    const folder = path.join(dir, 'migrations');
    writeFileSync(path.join(folder, '001_ok.mjs'), `export default { async up(m) { await m.sql('CREATE TABLE "made" ("x" int)'); } };\n`);
    writeFileSync(path.join(folder, '002_no_up.mjs'), `export default { down() {} };\n`);
    let router = startWith(folder);
    await expect(router.ready).rejects.toThrow(`the default export of ${path.join(folder, '002_no_up.mjs')} must have an up(m) function`);
    await router.close();
    // Another file name: Node keeps a module it imported once, whatever the file holds now.
    rmSync(path.join(folder, '002_no_up.mjs'));
    // A module that throws as it loads (a syntax error is the CLI test's: jest reports one itself).
    writeFileSync(path.join(folder, '002_broken.mjs'), `throw new Error('boom while loading');\n`);
    router = startWith(folder);
    await expect(router.ready).rejects.toThrow(`migration "002_broken" (${path.join(folder, '002_broken.mjs')}) could not be loaded: boom while loading`);
    await router.close();
    router = startWith(path.join(dir, 'nowhere'));
    await expect(router.ready).rejects.toThrow(`migrations: cannot read the folder ${path.join(dir, 'nowhere')} (ENOENT)`);
    await router.close();
    const made: { rows: { found: boolean }[] } = await db.db.raw(`SELECT to_regclass(format('%I.%I', current_schema(), 'made')) IS NOT NULL AS "found"`);
    expect(made.rows[0]!.found).toBe(false);
  }, 60_000);
});
