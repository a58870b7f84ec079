/**
 * Issue 10: a bulk delete selects more records than Postgres's protocol has parameters (65,535).
 * Every id list goes to the database as one array parameter, so 100,000 records delete in one
 * request, references to them included, on both engines.
 */
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

const ROWS = 100_000;

const collections = [
  { name: 'items', fields: [{ name: 'n', type: 'number' as const }], rules: { list: '', view: '', delete: '' } },
  {
    name: 'refs',
    fields: [
      { name: 'one', type: 'relation' as const, collection: 'items' },
      { name: 'many', type: 'relation' as const, collection: 'items', maxSelect: 5 },
    ],
    rules: { list: '', view: '' },
  },
];

describe.each(testEngines())('a large bulk delete on %s', (engine) => {
  let app: TestApp;
  beforeAll(async () => {
    // One statement deletes them all: give it time on a busy machine (the default is 5 s).
    app = await startTestApp(engine, { collections, limits: { statementTimeoutMs: 60_000 } });
    const db = app.database.db;
    await db.raw(`INSERT INTO items (id, n, created, updated) SELECT lpad(i::text, 15, '0'), i, now(), now() FROM generate_series(1, ?::int) AS i`, [ROWS]);
    // records pointing at some of them, through a single and a multiple relation: the delete unlinks them
    await db.raw(
      `INSERT INTO refs (id, one, many, created, updated)
       SELECT 'ref' || lpad(i::text, 12, '0'), lpad((i * 9000)::text, 15, '0'), jsonb_build_array(lpad((i * 9000 + 1)::text, 15, '0'), lpad((i * 9000 + 2)::text, 15, '0')), now(), now()
       FROM generate_series(1, 10) AS i`,
    );
  }, 120_000);
  afterAll(async () => {
    await app?.close();
  }, 60_000);

  test(`deletes ${ROWS.toLocaleString('en')} records in one request and unlinks what referenced them`, async () => {
    const res = await app.http.delete('/backend/api/collections/items/records').query({ filter: 'n > 0' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ deleted: ROWS });
    expect((await app.database.db.raw('SELECT count(*)::int AS n FROM items')).rows[0].n).toBe(0);
    const refs = await app.http.get('/backend/api/collections/refs/records?perPage=20');
    expect(refs.body.items).toHaveLength(10);
    for (const ref of refs.body.items) expect(ref).toMatchObject({ one: '', many: [] });
  }, 120_000);
});
