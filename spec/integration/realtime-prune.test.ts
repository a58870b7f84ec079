import { realtimeTableStatements } from '../../lib/db/realtime/realtime-schema.js';
import { CLIENTS_TABLE, FILE_SWEEP_LOCK_KEY, OUTBOX_PRUNE_LOCK_KEY, OUTBOX_TABLE } from '../../lib/db/shared-names.js';
import { StatementRunner } from '../../lib/db/statements/statement-runner.js';
import { ClientRegistry } from '../../lib/realtime/client-registry.js';
import { openTestDatabase, testEngines, type TestDatabase } from '../support/test-database.js';

/**
 * The outbox prune removes old rows in batches of 1,000, each its own transaction, and keeps recent
 * ones; while no client of any instance subscribes to anything, it keeps only the short idle
 * retention (issue 29 finding 13).
 */
describe.each(testEngines())('outbox prune on %s', (engine) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase(engine);
    for (const statement of realtimeTableStatements()) await database.db.raw(statement);
  });
  afterAll(async () => {
    await database?.destroy();
  });
  beforeEach(async () => {
    await database.db.raw(`DELETE FROM "${OUTBOX_TABLE}"`);
    await database.db.raw(`DELETE FROM "${CLIENTS_TABLE}"`);
  });

  /** Outbox rows `ago` old, named prefix1..prefixN. */
  async function addRows(prefix: string, count: number, ago: string): Promise<void> {
    await database.db.raw(
      `INSERT INTO "${OUTBOX_TABLE}" ("collection", "record_id", "action", "row", "created_at")
        SELECT 'posts', ? || g, 'create', '{}'::jsonb, now() - ?::interval FROM generate_series(1, ?::int) AS g`,
      [prefix, ago, count],
    );
  }
  const left = async () => ((await database.db.raw(`SELECT "record_id" FROM "${OUTBOX_TABLE}" ORDER BY "seq"`)) as { rows: { record_id: string }[] }).rows.map((r) => r.record_id);
  const registry = () => new ClientRegistry(new StatementRunner(database.db), 'prunetest');

  test('2,500 old rows go in 3 deleting statements (one per 1,000), the recent rows stay', async () => {
    await addRows('old', 2500, '1 hour');
    await addRows('new', 3, '0 seconds');
    const deletes: string[] = [];
    const seen = (query: { sql: string }) => void (/DELETE FROM/.test(query.sql) && deletes.push(query.sql));
    database.db.on('query', seen);
    let removed: number;
    try {
      removed = await registry().pruneOutbox({ retentionMs: 60_000, idleRetentionMs: 30_000 });
    } finally {
      database.db.off('query', seen);
    }
    expect(removed).toBe(2500);
    expect(deletes).toHaveLength(3);
    expect(await left()).toEqual(['new1', 'new2', 'new3']);
  });

  test('with no subscriber anywhere, rows older than the idle retention go at the next prune; with one, they stay for the full retention', async () => {
    await addRows('minute', 3, '1 minute');
    await addRows('now', 2, '0 seconds');
    // A client with an empty subscription list (a stream that never posted) is no subscriber.
    await registry().addClient('idleclient');
    expect(await registry().pruneOutbox({ retentionMs: 600_000, idleRetentionMs: 30_000 })).toBe(3);
    expect(await left()).toEqual(['now1', 'now2']);

    await addRows('minute', 3, '1 minute');
    await registry().addClient('subscriber');
    await registry().setSubscriptions('subscriber', null, ['posts/*'], { watched: ['posts'], readsOtherTables: false });
    expect(await registry().pruneOutbox({ retentionMs: 600_000, idleRetentionMs: 30_000 })).toBe(0);
    expect(await left()).toEqual(['now1', 'now2', 'minute1', 'minute2', 'minute3']);
  });

  if (engine === 'postgres') {
    // Only on Postgres: PGlite has one connection, so no other session can hold a lock while the
    // prune runs (and advisory locks are re-entrant within one session).
    test('another session sweeping files (holding the sweep lock) does not stop the prune; another pruning does (issue 30 bug 1)', async () => {
      await addRows('old', 3, '1 hour');
      const holdWhilePruning = async (key: number): Promise<number> => {
        const other = await database.db.transaction();
        try {
          await other.raw('SELECT pg_advisory_xact_lock(?::bigint)', [key]);
          return await registry().pruneOutbox({ retentionMs: 60_000, idleRetentionMs: 30_000 });
        } finally {
          await other.commit();
        }
      };
      expect(await holdWhilePruning(OUTBOX_PRUNE_LOCK_KEY)).toBe(0);
      expect(await left()).toEqual(['old1', 'old2', 'old3']);
      expect(await holdWhilePruning(FILE_SWEEP_LOCK_KEY)).toBe(3);
      expect(await left()).toEqual([]);
    });
  }
});
