import { syncDatabaseSchema } from '../../lib/db/sync-database-schema.js';
import { matchConditions } from '../../lib/realtime/match-subscribers.js';
import { buildSchemaRegistry } from '../../lib/schema/collection-schema.js';
import { openTestDatabase, testEngines, type TestDatabase } from '../support/test-database.js';

/** The batched rule check against a real database: dedupe, one statement, bad conditions isolated. */
describe.each(testEngines())('matchConditions on %s', (engine) => {
  let database: TestDatabase;
  const registry = buildSchemaRegistry([{ name: 'items', fields: [{ name: 'owner', type: 'text' }, { name: 'n', type: 'number' }] }]);
  const items = registry.get('items')!;
  const row = { id: 'item00000000001', owner: 'alice', n: 3, created: '2026-01-01T00:00:00.000+00:00', updated: '2026-01-01T00:00:00.000+00:00' };
  beforeAll(async () => {
    database = await openTestDatabase(engine);
    await syncDatabaseSchema(database.db, registry.collections);
  });
  afterAll(async () => {
    await database?.destroy();
  });
  const owner = (id: string) => [{ sql: '"r"."owner" = ?::text', bindings: [id] }];

  test('200 owner conditions, some identical, in one statement; "" passes and denied fails without a query', async () => {
    let statements = 0;
    const count = () => void statements++;
    database.db.on('query', count);
    try {
      const conditions = [...Array.from({ length: 200 }, (_, i) => owner(i % 50 === 0 ? 'alice' : `user${i}`)), [], 'denied' as const];
      const { holds, failed } = await matchConditions(database.db, items, row, conditions);
      expect(statements).toBe(1);
      expect(holds.flatMap((h, i) => (h ? [i] : []))).toEqual([0, 50, 100, 150, 200]);
      expect(failed.some(Boolean)).toBe(false);
    } finally {
      database.db.off('query', count);
    }
  });

  test('1,000 owner conditions (same SQL, different identities) and 200 with two bindings cost one statement per SQL text', async () => {
    let statements = 0;
    const count = () => void statements++;
    database.db.on('query', count);
    try {
      const ownerAndN = (id: string, n: number) => [{ sql: '"r"."owner" = ?::text AND "r"."n" >= ?::double precision', bindings: [id, n] }];
      const conditions = [
        ...Array.from({ length: 1000 }, (_, i) => owner(i === 700 ? 'alice' : `user'"${i}`)),
        ...Array.from({ length: 200 }, (_, i) => ownerAndN(i % 2 === 0 ? 'alice' : 'bob', i)),
      ];
      const { holds, failed } = await matchConditions(database.db, items, row, conditions);
      expect(statements).toBe(2);
      expect(holds.flatMap((h, i) => (h ? [i] : []))).toEqual([700, 1000, 1002]);
      expect(failed.some(Boolean)).toBe(false);
    } finally {
      database.db.off('query', count);
    }
  });

  test('a group evaluated over arrays that fails falls back to one by one: the failing condition fails alone', async () => {
    const divideBy = (k: number) => [{ sql: '(1 / ("r"."n"::int - ?::int)) = 1', bindings: [k] }];
    const conditions = [divideBy(2), divideBy(3), divideBy(4), owner('alice')];
    const { holds, failed } = await matchConditions(database.db, items, row, conditions);
    expect(holds).toEqual([true, false, false, true]);
    expect(failed).toEqual([false, true, false, false]);
  });

  test('a condition that fails at run time fails alone; the others are decided', async () => {
    const divideByZero = [{ sql: '(1 / ("r"."n"::int - 3)) = 1', bindings: [] }];
    const conditions = [owner('alice'), divideByZero, owner('bob'), [{ sql: '"r"."n" > ?::double precision', bindings: [2] }]];
    const { holds, failed } = await matchConditions(database.db, items, row, conditions);
    expect(holds).toEqual([true, false, false, true]);
    expect(failed).toEqual([false, true, false, false]);
  });

  test('when the database itself fails, the error is thrown so the change is read again', async () => {
    const broken = await openTestDatabase(engine);
    await syncDatabaseSchema(broken.db, registry.collections);
    await broken.destroy();
    await expect(matchConditions(broken.db, items, row, [owner('alice')])).rejects.toThrow();
  });
});
