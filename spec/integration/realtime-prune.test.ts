import { ClientRegistry } from '../../lib/realtime/client-registry.js';
import { OUTBOX_TABLE, realtimeTableStatements } from '../../lib/realtime/outbox-schema.js';
import { openTestDatabase, testEngines, type TestDatabase } from '../support/test-database.js';

/** The outbox prune removes old rows in batches of 1,000, each its own transaction, and keeps recent ones. */
describe.each(testEngines())('outbox prune on %s', (engine) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase(engine);
    for (const statement of realtimeTableStatements()) await database.db.raw(statement);
  });
  afterAll(async () => {
    await database?.destroy();
  });

  test('2,500 old rows go in 3 deleting statements (one per 1,000), the recent rows stay', async () => {
    await database.db.raw(
      `INSERT INTO "${OUTBOX_TABLE}" ("collection", "record_id", "action", "row", "created_at")
        SELECT 'posts', 'r' || g, 'create', '{}'::jsonb, now() - interval '1 hour' FROM generate_series(1, 2500) AS g`,
    );
    await database.db.raw(`INSERT INTO "${OUTBOX_TABLE}" ("collection", "record_id", "action", "row") SELECT 'posts', 'new' || g, 'create', '{}'::jsonb FROM generate_series(1, 3) AS g`);
    const deletes: string[] = [];
    const seen = (query: { sql: string }) => void (/DELETE FROM/.test(query.sql) && deletes.push(query.sql));
    database.db.on('query', seen);
    let removed: number;
    try {
      removed = await new ClientRegistry(database.db, 'prunetest').pruneOutbox(60_000);
    } finally {
      database.db.off('query', seen);
    }
    expect(removed).toBe(2500);
    expect(deletes).toHaveLength(3);
    const left: { rows: { record_id: string }[] } = await database.db.raw(`SELECT "record_id" FROM "${OUTBOX_TABLE}" ORDER BY "seq"`);
    expect(left.rows.map((r) => r.record_id)).toEqual(['new1', 'new2', 'new3']);
  });
});
