import fc from 'fast-check';
import { ALICE, ROOT, queryCollections, seedQueryData } from '../support/query-fixtures.js';
import { createMemoryLogger, startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/** Runs per property and engine; each request must answer within REQUEST_LIMIT_MS. */
const NUM_RUNS = 150;
const REQUEST_LIMIT_MS = 2000;
/** Planted in every client value: if it ever shows up in SQL text, a value escaped its bound parameter. */
const MARKER = 'zqxmarker';

const NUMBERS = ['1', '2', '0', '-1', '30', '1000', '1001', '99999999999999999999', '1.5', '1e3', '', ' ', 'abc', 'NaN', 'Infinity', '0x10', '%00'];
const NAMES = ['id', 'title', 'views', 'author', 'editors', 'tags', 'meta', 'secret', 'author.name', 'editors.next', 'remarks_via_article', '*', 'expand', 'nope'];
const SHAPES = [',', '.', '-', ':excerpt(10,true)', ':excerpt(0)', ':excerpt(99999999999)', ':excerpt(', '..', ' ', '"', "'", ';', '--', '/*'];

/** A value of `fields` or `expand`: known names, paths, modifiers, garbage and the marker. */
const listValue = fc
  .array(
    fc.oneof(
      { weight: 4, arbitrary: fc.constantFrom(...NAMES) },
      { weight: 2, arbitrary: fc.constantFrom(...SHAPES) },
      { weight: 1, arbitrary: fc.constant(`${MARKER}'); drop table articles; --`) },
      { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
    ),
    { maxLength: 10 },
  )
  .map((parts) => parts.join(''));

/** Filters whose literals carry the marker, in every quoting the grammar knows. */
const markedFilter = fc
  .tuple(fc.constantFrom('title', 'author.name', 'tags', 'meta', '@request.query.q', 'id'), fc.constantFrom('=', '!=', '~', '?=', '>'), fc.constantFrom(`'${MARKER}'`, `"${MARKER}\\"x"`, `'${MARKER}\\' or 1=1 --'`, `'%${MARKER}%'`))
  .map(([name, op, literal]) => `${name} ${op} ${literal}`);

const query = fc.record(
  {
    page: fc.constantFrom(...NUMBERS),
    perPage: fc.constantFrom(...NUMBERS),
    skipTotal: fc.constantFrom('1', 'true', '0', 'false', '', 'yes', MARKER),
    fields: listValue,
    expand: listValue,
    sort: fc.constantFrom('-created', 'title,-views', `${MARKER}`, `-${MARKER}`, '@random', ''),
    filter: markedFilter,
    q: fc.constant(`${MARKER}'--`),
  },
  { requiredKeys: [] },
);

describe.each(testEngines())('list parameters fuzz on %s', (engine) => {
  let app: TestApp;
  const statements: string[] = [];

  beforeAll(async () => {
    app = await startTestApp(engine, { collections: queryCollections(), logger: createMemoryLogger() });
    await seedQueryData(app);
    app.database.db.on('query', (q: { sql: string }) => statements.push(q.sql));
  });
  afterAll(async () => {
    await app?.close();
  });

  test('any combination of page, perPage, skipTotal, fields, expand, sort and filter: 200 or 400, in time, and no client value in SQL text', async () => {
    const seen = { 200: 0, 400: 0 };
    let statementsSeen = 0;
    await fc.assert(
      fc.asyncProperty(query, fc.constantFrom<Record<string, string>>({}, ALICE, ROOT), async (params, headers) => {
        statements.length = 0;
        const started = Date.now();
        const res = await app.http
          .get('/backend/api/collections/articles/records')
          .query(params)
          .set(headers)
          .timeout({ response: REQUEST_LIMIT_MS, deadline: REQUEST_LIMIT_MS });
        expect(Date.now() - started).toBeLessThan(REQUEST_LIMIT_MS);
        expect([200, 400]).toContain(res.status);
        seen[res.status as 200 | 400]++;
        if (res.status === 400) expect(res.body).toEqual({ status: 400, message: expect.any(String), data: {} });
        else {
          expect(res.body).toMatchObject({ page: expect.any(Number), perPage: expect.any(Number), items: expect.any(Array) });
          expect(res.body.perPage).toBeLessThanOrEqual(1000);
          expect(res.body.items.length).toBeLessThanOrEqual(res.body.perPage);
        }
        statementsSeen += statements.length;
        for (const sql of statements) expect(sql.toLowerCase()).not.toContain(MARKER);
      }),
      { numRuns: NUM_RUNS },
    );
    // the property reached the database on both sides, not only the parser
    expect(seen[200]).toBeGreaterThan(NUM_RUNS / 10);
    expect(seen[400]).toBeGreaterThan(NUM_RUNS / 10);
    // and the SQL check saw the statements it guards
    expect(statementsSeen).toBeGreaterThanOrEqual(seen[200]);
  }, 120_000);
});
