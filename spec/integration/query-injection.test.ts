import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';
import { ROOT, createRows, expectBadRequest, listRecords, queryCollections, sorted } from '../support/query-fixtures.js';

/** Hostile text used as values inside filters; each one is also stored (framed) in a record. */
const HOSTILE_VALUES: [label: string, value: string][] = [
  ['single quote', "it's"],
  ['double quote', 'say "hi"'],
  ['both quotes', `'"'"`],
  ['classic injection', "'; DROP TABLE hostile; --"],
  ['double-quoted injection', '"; DROP TABLE hostile; --'],
  ['or-true', "' OR '1'='1"],
  ['comment', '/* comment */'],
  ['line comment', 'x -- y'],
  ['semicolons', 'a;b;;c'],
  ['backslash', 'back\\slash'],
  ['trailing backslash', 'ends with \\'],
  ['escaped quote', "\\'"],
  ['RTL override', 'abc\u202Edef'],
  ['emoji', 'fire 🔥 and 👩‍👩‍👧'],
  ['CJK', '漢字テスト'],
  ['question mark', 'why?'],
  ['double question mark', 'a ?? b'],
  ['jsonb operators', '?| ?& @> <@'],
  ['positional parameter', '$1 and $2'],
  ['named parameter', ':name and :1'],
  ['dollar quoting', '$$ $tag$'],
  ['format specifier', '%s %d'.replace(/%/g, '#')],
  ['template', '${process.exit()}'],
  ['underscore', 'snake_case'],
  ['newline and tab', 'line1\nline2\tcol'],
  ['unicode separator', 'a\u2028b'],
  ['very long', 'long-' + 'y'.repeat(2500)],
  ['sql keywords', 'SELECT * FROM pg_user UNION SELECT 1'],
  ['cast', "x'::text"],
];

/** Hostile text that no record can hold (Postgres text cannot store NUL): must match nothing. */
const UNSTORABLE_VALUES: [label: string, value: string][] = [
  ['NUL', '\u0000'],
  ['NUL inside', 'a\u0000b'],
];

/** Quotes like pb.filter() does (JSON). */
const jsonQuote = (value: string) => JSON.stringify(value);
/** Quotes with single quotes, escaping the backslash and the quote. */
const singleQuote = (value: string) => `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

const HOSTILE_IDENTIFIERS = [
  'title"; DROP TABLE hostile; --',
  'text; DROP TABLE hostile',
  'text--',
  'text/**/',
  'hostile.text',
  'text::text',
  'text:lower:lower',
  'text:drop table',
  'pg_sleep(1)',
  'text)',
  '(text',
  '$1',
  '?',
  '??',
  'text?',
  '@collection.hostile"; --.text',
  '@request.auth.id"',
  '@request.query',
  '@"x"',
  'ti tle',
  'text\u0000',
  '\u0000',
  '\u202Etext',
  'téxt',
  'text🔥',
  'x'.repeat(300),
  'a.'.repeat(40) + 'b',
  'text.text.text',
  'n.n',
  'id.id',
  '_',
  'pg_catalog.pg_user.usename',
  'information_schema',
  'COLLATE',
  'SELECT',
  'text:lengthh',
];

const HOSTILE_PARAMS = [
  "title; DROP TABLE hostile; --",
  '-"text"',
  'text desc',
  'text)',
  'random()',
  '@random;',
  '?',
  '??',
  '$1',
  'text\u0000',
  '\u0000',
  '-',
  '+',
  ',,,',
  '-,+,-',
  'text,-,n',
  'expand.*',
  '*',
  'n:excerpt(10)',
  'text:excerpt(x)',
  'text:excerpt(99999999999999999999)',
  '..',
  'a'.repeat(5000),
  Array.from({ length: 300 }, (_, i) => `f${i}`).join(','),
  'text.'.repeat(100),
  '🔥',
  '\u202E',
  '%00',
  "' OR 1=1 --",
];

describe.each(testEngines())('hostile input on %s', (engine) => {
  let app: TestApp;
  /** id -> stored text */
  const stored = new Map<string, string>();
  let total = 0;
  /** Row counts of the other tables after setup: an injected statement would change or drop them. */
  const seededCounts: Record<string, number> = {};

  beforeAll(async () => {
    app = await startTestApp(engine, { collections: queryCollections() });
    const rows: { id: string; text: string; n: number }[] = [];
    HOSTILE_VALUES.forEach(([, value], i) => {
      const id = `hos${String(i + 1).padStart(12, '0')}`;
      rows.push({ id, text: `<${value}>`, n: i });
    });
    rows.push({ id: 'hos900000000001', text: 'plain text', n: 900 });
    rows.push({ id: 'hos900000000002', text: 'ITS', n: 901 });
    rows.push({ id: 'hos900000000003', text: 'drop table', n: 902 });
    await createRows(app, 'hostile', rows);
    for (const row of rows) stored.set(row.id, row.text);
    total = rows.length;
    for (const table of ['people', 'articles', 'remarks', 'events']) {
      seededCounts[table] = Number((await app.database.db(table).count({ n: '*' }).first())!.n);
    }
  });
  afterAll(async () => {
    await app?.close();
  });

  /** Records whose text literally contains `value` (case-insensitive, as `~` is). */
  const containing = (value: string) =>
    sorted(...[...stored].filter(([, text]) => text.toLowerCase().includes(value.toLowerCase())).map(([id]) => id));
  const equalTo = (value: string) => sorted(...[...stored].filter(([, text]) => text === value).map(([id]) => id));

  async function expectTablesIntact() {
    const count = await app.database.db('hostile').count({ n: '*' }).first();
    expect(Number(count!.n)).toBe(total);
    // The seeded tables still exist and still hold what was seeded: no injected DROP or DELETE ran.
    for (const [table, rows] of Object.entries(seededCounts)) {
      expect({ table, rows: Number((await app.database.db(table).count({ n: '*' }).first())!.n) }).toEqual({ table, rows });
    }
  }

  async function idsFor(query: Record<string, string>): Promise<string[]> {
    const res = await listRecords(app, 'hostile', query);
    expect({ status: res.status, body: res.status === 200 ? 'ok' : res.body }).toEqual({ status: 200, body: 'ok' });
    return [...res.ids].sort();
  }

  describe('values are inert: they match exactly the records that contain them', () => {
    test.each(HOSTILE_VALUES)('%s (JSON-quoted, as pb.filter writes)', async (_label, value) => {
      const expected = containing(value);
      expect(expected.length).toBeGreaterThan(0);
      expect(await idsFor({ filter: `text ~ ${jsonQuote(value)}` })).toEqual(expected);
      expect(await idsFor({ filter: `text = ${jsonQuote(`<${value}>`)}` })).toEqual(equalTo(`<${value}>`));
      expect(await idsFor({ filter: `text != ${jsonQuote(`<${value}>`)}` })).toHaveLength(total - equalTo(`<${value}>`).length);
    });

    test.each(HOSTILE_VALUES)('%s (single-quoted)', async (_label, value) => {
      expect(await idsFor({ filter: `text ~ ${singleQuote(value)}` })).toEqual(containing(value));
      expect(await idsFor({ filter: `text = ${singleQuote(`<${value}>`)} && n >= 0` })).toEqual(equalTo(`<${value}>`));
    });

    test.each(HOSTILE_VALUES)('%s (through @request.query)', async (_label, value) => {
      expect(await idsFor({ filter: 'text ~ @request.query.v', v: value })).toEqual(containing(value));
      expect(await idsFor({ filter: 'text = @request.query.v', v: `<${value}>` })).toEqual(equalTo(`<${value}>`));
    });

    /** NUL cannot match a stored text: the answer is 200 with no match, or a 400; never a 500. */
    function expectNoMatchOrBadRequest(res: { status: number; ids: string[]; body: unknown }, context: string, expected: string[]) {
      expect({ context, status: res.status === 400 ? 200 : res.status }).toEqual({ context, status: 200 });
      if (res.status === 400) expect(res.body).toEqual({ status: 400, message: expect.any(String), data: {} });
      else expect(res.ids).toEqual(expected);
    }

    test.each(UNSTORABLE_VALUES)('%s in a filter literal: 200 matching nothing (or 400), never a 500', async (_label, value) => {
      for (const filter of [`text ~ ${jsonQuote(value)}`, `text = ${jsonQuote(value)}`, `text != ${jsonQuote(value)} && n = 900`]) {
        const res = await listRecords(app, 'hostile', { filter });
        expectNoMatchOrBadRequest(res, filter, filter.includes('!=') ? ['hos900000000001'] : []);
      }
      await expectTablesIntact();
    });

    test.each(UNSTORABLE_VALUES)('%s through @request.query: 200 matching nothing (or 400), never a 500', async (_label, value) => {
      for (const filter of ['text = @request.query.v', 'text ~ @request.query.v']) {
        const res = await listRecords(app, 'hostile', { filter, v: value });
        expectNoMatchOrBadRequest(res, filter, []);
      }
    });

    test('a hostile value in a number comparison is a 400, not a 500', async () => {
      for (const value of ["1; DROP TABLE hostile", "1' OR '1'='1", '$1', '?', '1e999999']) {
        const res = await app.http.get('/backend/api/collections/hostile/records').query({ filter: `n > ${jsonQuote(value)}` });
        expectBadRequest(res, /^Invalid filter: /);
      }
      await expectTablesIntact();
    });

    test('the tables are all still there', async () => {
      await expectTablesIntact();
    });
  });

  describe('hostile identifiers are a 400, never a 500', () => {
    test.each(HOSTILE_IDENTIFIERS.map((name) => [JSON.stringify(name).slice(0, 60), name]))('%s', async (_label, name) => {
      for (const filter of [`${name} = 1`, `n = 1 && ${name} ~ 'x'`, `'x' = ${name}`]) {
        const res = await app.http.get('/backend/api/collections/hostile/records').query({ filter });
        expectBadRequest(res, /^Invalid filter: /);
      }
      const asRoot = await app.http.get('/backend/api/collections/hostile/records').query({ filter: `${name} = 1` }).set(ROOT);
      expectBadRequest(asRoot, /^Invalid filter: /);
    });

    test('the tables are all still there', async () => {
      await expectTablesIntact();
    });
  });

  describe('sort, fields, expand and paging parameters with hostile input', () => {
    test.each(HOSTILE_PARAMS.map((value) => [JSON.stringify(value).slice(0, 60), value]))('%s', async (_label, value) => {
      for (const param of ['sort', 'fields', 'expand']) {
        for (const headers of [{}, ROOT]) {
          const res = await app.http.get('/backend/api/collections/hostile/records').query({ [param]: value }).set(headers);
          expect({ param, status: res.status }).toEqual({ param, status: res.status === 200 ? 200 : 400 });
          if (res.status === 400) expect(res.body).toEqual({ status: 400, message: expect.any(String), data: {} });
          else expect(res.body).toMatchObject({ page: 1, totalItems: total });
        }
      }
      for (const param of ['page', 'perPage']) {
        const res = await app.http.get('/backend/api/collections/hostile/records').query({ [param]: value });
        expectBadRequest(res);
      }
      for (const param of ['fields', 'expand']) {
        const view = await app.http.get('/backend/api/collections/hostile/records/hos900000000001').query({ [param]: value });
        expect({ param, status: view.status }).toEqual({ param, status: view.status === 200 ? 200 : 400 });
      }
    });

    test('parameters sent as arrays or objects are never a 500', async () => {
      for (const qs of ['filter[]=x', 'filter[$ne]=1', 'filter=views%3D1&filter=nope%3D1', 'sort[]=-id', 'sort[a][b]=c', 'fields[]=id', 'expand[x]=y', 'page[]=1', 'perPage[a]=2']) {
        const res = await app.http.get(`/backend/api/collections/hostile/records?${qs}`);
        expect({ qs, status: res.status }).toEqual({ qs, status: res.status === 400 ? 400 : 200 });
        expect(res.body).toEqual(res.status === 400 ? { status: 400, message: expect.any(String), data: {} } : expect.objectContaining({ items: expect.any(Array) }));
      }
      const bulk = await app.http.delete('/backend/api/collections/hostile/records?filter[]=x').set(ROOT);
      expectBadRequest(bulk);
      await expectTablesIntact();
    });

    test('hostile sort names are refused with 400', async () => {
      for (const sort of ["title; DROP TABLE hostile; --", '-"text"', 'text desc', 'text)', 'random()', '?', '$1', 'text\u0000', 'a'.repeat(5000)]) {
        const res = await app.http.get('/backend/api/collections/hostile/records').query({ sort });
        expectBadRequest(res, /^Invalid sort: /);
      }
    });

    test('hostile collection names and record ids are 404s', async () => {
      for (const name of ['hostile;DROP TABLE hostile', "hostile'", 'hostile"', '..%2fhostile', 'pg_user', '%00']) {
        const res = await app.http.get(`/backend/api/collections/${encodeURIComponent(name)}/records`);
        expect({ name, status: res.status }).toEqual({ name, status: 404 });
        expect(res.body).toEqual({ status: 404, message: expect.any(String), data: {} });
      }
      for (const id of ["x' OR '1'='1", 'hos900000000001;', '%', '_______________', 'a b']) {
        const res = await app.http.get(`/backend/api/collections/hostile/records/${encodeURIComponent(id)}`);
        expect({ id, status: res.status }).toEqual({ id, status: 404 });
      }
    });

    test('a NUL in a record id is a 404, never a 500', async () => {
      for (const id of ['\u0000', 'hos90000000000\u0000']) {
        for (const method of ['get', 'patch', 'delete'] as const) {
          const req = app.http[method](`/backend/api/collections/hostile/records/${encodeURIComponent(id)}`).set(ROOT);
          const res = method === 'patch' ? await req.send({ text: 'x' }) : await req;
          expect({ id: JSON.stringify(id), method, status: res.status }).toEqual({ id: JSON.stringify(id), method, status: 404 });
        }
      }
      await expectTablesIntact();
    });

    test('the tables are all still there', async () => {
      await expectTablesIntact();
    });
  });
});
