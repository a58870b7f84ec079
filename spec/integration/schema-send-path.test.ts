import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Knex } from 'knex';
import { openSharedSetting } from '../../lib/db/schema/settings-store.js';
import { realtimeSchema } from '../../lib/db/realtime/realtime-schema.js';
import { planDatabaseSync, previewViewCollections, syncDatabaseSchema } from '../../lib/db/schema/sync-database-schema.js';
import { diskStorage } from '../../lib/files/disk-storage.js';
import type { CollectionDefinition, Migration } from '../../lib/index.js';
import { loadMigrations } from '../../lib/migrations/load-migrations.js';
import { applyPendingMigrations, describeMigrations, revertLastMigration } from '../../lib/migrations/run-migrations.js';
import type { MigrationServices } from '../../lib/migrations/transaction-records.js';
import { compileCollections } from '../../lib/records/compile-collections.js';
import { createMemoryLogger } from '../support/test-app.js';
import { openTestDatabase, testEngines, type TestDatabase } from '../support/test-database.js';

/**
 * Issue 42, step 3: the schema sync's, the shared settings' and the migrations' statements go
 * through recordbase's own send path, so of the host's Knex they use only the pool (its client).
 * The Knex they are given records every other member read (its query builder, `raw`,
 * `transaction`, `fn`, ...) and every call of it as a function.
 */

/** `db` as a Knex that notes each use of it other than reading its client. */
function watched(db: Knex): { knex: Knex; uses: string[] } {
  const uses: string[] = [];
  const knex = new Proxy(db, {
    get(target, key, receiver) {
      // Knex's `client` getter reads its context: read on the Knex itself, that is not a use.
      if (key === 'client') return Reflect.get(target, key, target);
      uses.push(String(key));
      return Reflect.get(target, key, receiver);
    },
    apply(target, self, args) {
      uses.push('(call)');
      return Reflect.apply(target, self, args);
    },
  });
  return { knex, uses };
}

const OPEN = { list: '', view: '', create: '', update: '', delete: '' };

const before: CollectionDefinition[] = [{ name: 'notes', fields: [{ name: 'body', type: 'text' }, { name: 'size', type: 'text' }], rules: OPEN }];
const after: CollectionDefinition[] = [
  { name: 'notes', fields: [{ name: 'content', type: 'text' }, { name: 'size', type: 'number' }, { name: 'meta', type: 'json' }], rules: OPEN },
  { name: 'sizes', type: 'view', viewQuery: 'SELECT "id", "size" FROM "notes"', rules: { list: '', view: '' } },
];

const reshape: Migration = {
  name: '001_reshape',
  async up(m) {
    await m.renameField('notes', 'body', 'content');
    await m.changeFieldType('notes', 'size');
    await m.sql('UPDATE "notes" SET "size" = "size" * ?', [2]);
    await m.records('notes').create({ content: 'made in the migration', size: 3, meta: { from: 'migration' } });
  },
  // The up's inverse, as `migrate down` asks since issue 45 (it refuses a down the release before could not start on).
  async down(m) {
    await m.sql('DELETE FROM "notes" WHERE "content" = ?', ['made in the migration']);
    // The view reads "size"; the release before has no view.
    await m.dropCollection('sizes');
    await m.changeFieldType('notes', 'size', { to: 'text' });
    await m.renameField('notes', 'content', 'body');
  },
};

describe.each(testEngines())("the schema sync's and the migrations' statements on %s", (engine) => {
  let database: TestDatabase;
  let dataDir: string;
  beforeEach(async () => {
    database = await openTestDatabase(engine);
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'rb-send-path-'));
  });
  afterEach(async () => {
    await database?.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test("use the host's Knex only as the pool: the sync, the plan, the preview, a shared setting, migrations up, status and down", async () => {
    const { knex, uses } = watched(database.db);
    const compiledBefore = compileCollections(before);
    await syncDatabaseSchema(knex, compiledBefore.registry.collections, { additions: [realtimeSchema(true)] });
    await database.db('notes').insert([{ id: 'aaaaaaaaaaaaaa1', body: 'one', size: '4' }]);

    const setting = openSharedSetting(knex, 'send-path-test');
    expect(await setting.read()).toBeUndefined();
    expect(await setting.claim('first')).toBe('first');
    expect(await setting.claim('second')).toBe('first');
    await setting.remove();
    expect(await setting.read()).toBeUndefined();

    const compiledAfter = compileCollections(after);
    const services: MigrationServices = {
      compiled: compiledAfter,
      storage: diskStorage({ root: path.join(dataDir, 'storage'), fsync: false }),
      logger: createMemoryLogger(),
      limits: { maxPerPage: 500, maxFileSize: 5 << 20, maxExpandRecords: 1000, maxExpandBytes: 1 << 20, maxAggregateGroups: 1000 },
      tempDir: dataDir,
    };
    const migrations = await loadMigrations([reshape]);
    expect(await applyPendingMigrations(knex, { migrations, services })).toEqual(['001_reshape']);
    // The migration's first m.records() call added what the declarations add: the plan has nothing left (views are the sync's).
    expect((await planDatabaseSync(knex, compiledAfter.registry.collections)).statements).toEqual([]);
    expect([...(await previewViewCollections(knex, compiledAfter.registry.collections)).keys()]).toEqual(['sizes']);
    const synced = await syncDatabaseSchema(knex, compiledAfter.registry.collections, { additions: [realtimeSchema(true)] });
    expect([...synced.views.keys()]).toEqual(['sizes']);

    const rows: { content: string; size: number; meta: unknown }[] = await database.db('notes').select('content', 'size', 'meta').orderBy('size');
    expect(rows).toEqual([
      { content: 'made in the migration', size: 3, meta: { from: 'migration' } },
      { content: 'one', size: 8, meta: null },
    ]);
    const status = await describeMigrations(knex, migrations);
    expect(status).toEqual([{ name: '001_reshape', appliedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/), changed: false, missing: false }]);
    expect(Math.abs(Date.parse(status[0]!.appliedAt!) - Date.now())).toBeLessThan(60_000);
    expect(await revertLastMigration(knex, { migrations, services })).toBe('001_reshape');
    expect(await database.db('notes').select('body', 'size')).toEqual([{ body: 'one', size: '8' }]);
    expect(await describeMigrations(knex, migrations)).toEqual([{ name: '001_reshape', changed: false, missing: false }]);

    expect(uses).toEqual([]);
  }, 60_000);
});
