import { realtimeSchema } from '../../lib/db/realtime/realtime-schema.js';
import { syncDatabaseSchema } from '../../lib/db/schema/sync-database-schema.js';
import { CLIENTS_TABLE } from '../../lib/db/shared-names.js';
import { StatementRunner } from '../../lib/db/statements/statement-runner.js';
import { checkRecords, type CheckTarget, type Conditions } from '../../lib/realtime/check-records.js';
import { buildSchemaRegistry } from '../../lib/schema/collection-schema.js';
import { openTestDatabase, testEngines, type TestDatabase } from '../support/test-database.js';

/** Realtime's batched check against a real database: current rows, deleted rows, dedupe, statements per check. */
describe.each(testEngines())('checkRecords on %s', (engine) => {
  let database: TestDatabase;
  const registry = buildSchemaRegistry([{ name: 'items', fields: [{ name: 'owner', type: 'text' }, { name: 'n', type: 'number' }] }]);
  const items = registry.get('items')!;
  const context = { statementTimeoutMs: 5_000, acquireTimeoutMs: 3_000 };
  const current = (recordId: string): CheckTarget => ({ kind: 'current', recordId });
  const owner = (id: string): Conditions => [{ sql: '"r"."owner" = ?::text', bindings: [id] }];
  /** Where the checks' statements go, bounded by `context`. */
  let runner: StatementRunner;
  beforeAll(async () => {
    database = await openTestDatabase(engine);
    runner = new StatementRunner(database.db, context);
    await syncDatabaseSchema(database.db, registry.collections, { additions: [realtimeSchema(true)] });
    // Capture runs while a realtime instance is live and a client asks for it (docs/realtime.md): this test stands in for the instance; the staleness test below adds the client.
    await database.db.raw(`INSERT INTO "_recordbase_realtime_instances" ("instance_id", "expires_at") VALUES ('test-instance', now() + interval '1 hour')`);
    await database.db.raw(`INSERT INTO "items" ("id", "owner", "n") VALUES ('item00000000001', 'alice', 3), ('item00000000002', 'bob', 7)`);
  });
  afterAll(async () => {
    await database?.destroy();
  });

  /** Counts the statements `work` sends. */
  async function counting<T>(work: () => Promise<T>): Promise<{ result: T; statements: number }> {
    let statements = 0;
    const count = () => void statements++;
    database.db.on('query', count);
    try {
      return { result: await work(), statements };
    } finally {
      database.db.off('query', count);
    }
  }

  test('current rows are read with the conditions: 200 owner conditions on two records, some identical, cost one statement per SQL text', async () => {
    const conditions: Conditions[] = [...Array.from({ length: 200 }, (_, i) => owner(i % 50 === 0 ? 'alice' : i % 50 === 1 ? 'bob' : `user${i}`)), [], 'denied'];
    const { result, statements } = await counting(() =>
      checkRecords({ runner, collection: items, targets: [current('item00000000001'), current('item00000000002'), current('missing00000000')], conditions, staleness: false }),
    );
    // One statement reads the rows; the 200 owner conditions share one text, so they go over arrays in a second.
    expect(statements).toBe(2);
    expect(result.rows.map((r) => r?.n)).toEqual([3, 7, undefined]);
    const holding = (target: number) => conditions.flatMap((_, m) => (result.holds(m, target) ? [m] : []));
    expect(holding(0)).toEqual([0, 50, 100, 150, 200]);
    expect(holding(1)).toEqual([1, 51, 101, 151, 200]);
    // A record that is gone matches nothing, not even `[]`.
    expect(holding(2)).toEqual([]);
  });

  test('distinct SQL texts are columns of one statement; the row read is the current one', async () => {
    await database.db.raw(`UPDATE "items" SET "n" = 4 WHERE "id" = 'item00000000001'`);
    const conditions: Conditions[] = [[{ sql: '"r"."n" > ?::double precision', bindings: [3] }], [{ sql: '"r"."n" < ?::double precision', bindings: [3] }], owner('alice')];
    const { result, statements } = await counting(() => checkRecords({ runner, collection: items, targets: [current('item00000000001')], conditions, staleness: false }));
    expect(statements).toBe(1);
    expect(result.rows[0]?.n).toBe(4);
    expect(conditions.map((_, m) => result.holds(m, 0))).toEqual([true, false, true]);
  });

  test('a deleted record is checked on the row as it went, and is stale when a later change is not in its snapshot', async () => {
    const gone = { id: 'item00000000009', owner: 'carol', n: 9, created: '2026-01-01T00:00:00+00:00', updated: '2026-01-01T00:00:00+00:00' };
    const { rows } = await database.db.raw(`SELECT pg_current_xact_id()::text AS tx, pg_current_snapshot()::text AS snapshot`);
    const before = rows[0] as { tx: string; snapshot: string };
    const deleted = (snapshot?: string): CheckTarget => ({ kind: 'written', row: gone, seq: '999999999', tx: before.tx, snapshot });
    const conditions: Conditions[] = [owner('carol'), owner('alice')];
    const fresh = await checkRecords({ runner, collection: items, targets: [deleted(before.snapshot)], conditions, staleness: true });
    expect(fresh.rows[0]).toEqual(gone);
    expect(fresh.stale).toEqual([false]);
    expect([fresh.holds(0, 0), fresh.holds(1, 0)]).toEqual([true, false]);
    // A write committed after that snapshot (captured by the outbox trigger, as every change is while a
    // subscriber's rules read other tables: only then is staleness asked for): the delete's check is no
    // longer on a consistent state.
    await database.db(CLIENTS_TABLE).insert({ client_id: 'reads-other-tables', instance_id: 'elsewhere', subscriptions: '[]', reads_other_tables: true });
    await database.db.raw(`UPDATE "items" SET "n" = 5 WHERE "id" = 'item00000000002'`);
    const later = await checkRecords({ runner, collection: items, targets: [deleted(before.snapshot)], conditions, staleness: true });
    expect(later.stale).toEqual([true]);
    const unknown = await checkRecords({ runner, collection: items, targets: [deleted(undefined)], conditions, staleness: true });
    expect(unknown.stale).toEqual([true]);
  });

  test('a condition that fails at run time fails the check (the caller decides whom it costs)', async () => {
    const divideByZero: Conditions = [{ sql: '(1 / ("r"."n"::int - "r"."n"::int)) = 1', bindings: [] }];
    await expect(checkRecords({ runner, collection: items, targets: [current('item00000000001')], conditions: [owner('alice'), divideByZero], staleness: false })).rejects.toThrow();
  });
});
