import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';
import {
  A,
  ALICE,
  ALL_ARTICLES,
  BOB,
  P,
  ROOT,
  createRows,
  expectBadRequest,
  filterIds,
  listRecords,
  queryCollections,
  seedQueryData,
  sorted,
} from '../support/query-fixtures.js';

const { a1, a2, a3, a4, a5, a6 } = A;
const ALL = sorted(...ALL_ARTICLES);
const except = (...ids: string[]) => ALL.filter((id) => !ids.includes(id));

type Case = [filter: string, expected: string[]];

/** Filters on `articles` and the exact ids they select (see ARTICLES in query-fixtures). */
const TEXT_CASES: Case[] = [
  ["title = 'Learning Rust'", [a1]],
  ["title = 'learning rust'", []],
  ['title = "Go Basics"', [a3]],
  ["title != 'Learning Rust'", except(a1)],
  ["title > 'Go' && title < 'Learning Rust'", [a3]],
  ["title >= 'Go Basics' && title <= 'Go Basics'", [a3]],
  ["title ~ 'rust'", [a1, a2]],
  ["title ~ 'RUST'", [a1, a2]],
  ["title !~ 'rust'", except(a1, a2)],
  ["title ~ 'rust%'", [a2]],
  ["title ~ '%rust'", [a1]],
  ["title ~ 'l%t'", [a1]],
  ["title ~ '%'", ALL],
  ["title ~ '100%'", [a4]],
  ["title ~ 'r_st'", []],
  ["title ~ 'under_'", [a5]],
  ["body ~ 'a_b'", [a3]],
  ["body ~ 'C:\\dir'", [a5]],
  ["body ~ 'C:\\\\dir'", [a5]],
  ["title ~ 'mixed case'", [a6]],
  ["title:lower = 'mixed case'", [a6]],
  ["title:lower ~ 'MIXED'", [a6]],
  ["body = ''", [a2]],
  ['body = null', [a2]],
  ['body != null', except(a2)],
  ["'Learning Rust' = title", [a1]],
  ['title ~ 1', [a4]],
  ["title ~ '0'", [a4]],
  ['title ~ author.name', [a3]],
  ['title ~ null', []],
  ["title ~ ''", ALL],
  ["title !~ ''", []],
  ["title ?= 'Learning Rust'", [a1]],
  ["title ?~ 'rust'", [a1, a2]],
  ["title ?!~ 'rust'", except(a1, a2)],
  ["title ?!= 'rust tips'", except(a2)],
  ["id = 'art000000000001'", [a1]],
  ["id != 'art000000000001' && id ~ 'art'", except(a1)],
];

const NUMBER_CASES: Case[] = [
  ['views = 10', [a1]],
  ['views != 10', except(a1)],
  ['views > 10', [a2, a6]],
  ['views >= 10', [a1, a2, a6]],
  ['views < 10', [a3, a5]],
  ['views <= 5', [a3, a5]],
  ['views = 0', [a3]],
  ['views = null', [a4]],
  ['views != null', except(a4)],
  ["views > '12'", [a2, a6]],
  ["views = '10'", [a1]],
  ['views >= 1e1', [a1, a2, a6]],
  ['rating = 2.5', [a5]],
  ['rating < .5', []],
  ['rating >= -3', [a1, a3, a4, a5]],
  ['views > rating', [a1, a5]],
  ["views ~ '1'", [a1, a6]],
  ['10 = views', [a1]],
  ['views ?> 10', [a2, a6]],
  ['views ?= 0', [a3]],
  ['views ?!= 0', except(a3)],
  ['views ?>= 15', [a2, a6]],
  ['views ?< 5', [a3]],
  ['views ?<= 5', [a3, a5]],
];

const BOOL_CASES: Case[] = [
  ['published = true', [a1, a3, a5]],
  ['published = false', [a2, a4, a6]],
  ['published != true', [a2, a4, a6]],
  ["published = 'true'", [a1, a3, a5]],
  ["published = '0'", [a2, a4, a6]],
  ['published = 1', [a1, a3, a5]],
  ['published = null', []],
  ['published != null', ALL],
  ['published ?= true', [a1, a3, a5]],
  ['published ?!= true', [a2, a4, a6]],
];

const DATE_CASES: Case[] = [
  ["publishedAt = '2024-05-01 10:00:00.000Z'", [a1]],
  ["publishedAt = '2024-05-01T12:00:00+02:00'", [a1]],
  ["publishedAt = '2024-05-01T10:00:00Z'", [a1]],
  ["publishedAt != '2024-05-01 10:00:00.000Z'", except(a1)],
  ["publishedAt >= '2024-05' && publishedAt < '2024-06'", [a1, a2, a6]],
  ["publishedAt < '2024'", [a5]],
  ["publishedAt >= '2024-06-01'", [a3]],
  ["publishedAt = '2024-06-01'", [a3]],
  ["publishedAt = '2024-06'", [a3]],
  ["publishedAt > '2024-05-31 23:59:59.998Z'", [a2, a3]],
  ["publishedAt <= '2024-05-15 12'", [a1, a5, a6]],
  ["publishedAt > '2024-05-15 12:00'", [a2, a3]],
  ['publishedAt = null', [a4]],
  ['publishedAt != null', except(a4)],
  ["publishedAt ~ '2024-05'", [a1, a2, a6]],
  ["publishedAt ~ '23:59:59.999Z'", [a2]],
  ["publishedAt ?> '2024-05-31'", [a2, a3]],
  ["publishedAt ?<= '2024-01'", [a5]],
  ["created >= '2024-01-03' && created < '2024-01-05'", [a3, a4]],
  ["created = '2024-01-01 00:00:00.000Z'", [a1]],
  ["created ~ '2024-01-02'", [a2]],
  ['publishedAt > created', [a1, a2, a3, a6]],
];

const SELECT_CASES: Case[] = [
  ["category = 'news'", [a1, a4, a6]],
  ["category != 'news'", [a2, a3, a5]],
  ['category = null', [a3]],
  ["category = ''", [a3]],
  ["category ~ 'HOW'", [a2, a5]],
  ["category !~ 'how'", [a1, a3, a4, a6]],
  // multi-valued select: tags a1 [a,b] a2 [a] a3 [] a4 [b,c] a5 [c,a_b] a6 [a,b,c]
  ["tags ~ 'a'", [a1, a2, a6]],
  ["tags !~ 'a'", [a3, a4, a5]],
  ["tags ~ 'a%'", [a1, a2, a5, a6]],
  ["tags ~ 'a_%'", [a5]],
  ["tags ?= 'b'", [a1, a4, a6]],
  ["tags = 'a'", [a2]],
  ["tags != 'a'", [a3, a4, a5]],
  ["tags ?!= 'a'", [a1, a3, a4, a5, a6]],
  ["tags ?~ 'a'", [a1, a2, a5, a6]],
  ["tags ?~ 'B'", [a1, a4, a5, a6]],
  ["tags ?!~ 'a'", [a1, a3, a4, a5, a6]],
  ["tags ?> 'b'", [a4, a5, a6]],
  ["tags ?>= 'c'", [a4, a5, a6]],
  ["tags ?< 'b'", [a1, a2, a3, a5, a6]],
  ["tags ?<= 'a'", [a1, a2, a3, a6]],
  ['tags = null', [a3]],
  ['tags != null', except(a3)],
  ['tags:length > 1', [a1, a4, a5, a6]],
  ['tags:length = 0', [a3]],
  ['tags:length = 3', [a6]],
  ["tags:each ~ 'a'", [a2]],
  ["tags:each != 'c'", [a1, a2, a3]],
  ["tags:each ?= 'a'", [a2]],
  ["tags:lower ~ 'A'", []],
  ["tags:lower ?= 'a'", [a1, a2, a6]],
];

const JSON_CASES: Case[] = [
  // meta: a1 {"k":1} a2 "x" a3 null a4 [] a5 {"k":2} a6 true
  ['meta = null', [a3, a4]],
  ['meta != null', [a1, a2, a5, a6]],
  ["meta = 'x'", [a2]],
  ['meta = true', [a6]],
  ["meta ~ 'k'", [a1, a5]],
  ["meta ~ '\"k\": 2'", [a5]],
  ["meta !~ 'k'", [a2, a3, a4, a6]],
  ["meta ?= 'x'", [a2]],
  ["meta ?~ 'k'", [a1, a5]],
  ['meta ?!= true', except(a6)],
];

const RELATION_CASES: Case[] = [
  // author: a1 alice a2 bob a3 '' a4 carol a5 alice a6 dave
  [`author = '${P.alice}'`, [a1, a5]],
  [`author != '${P.alice}'`, except(a1, a5)],
  ['author = null', [a3]],
  ["author.name = 'Bob'", [a2]],
  ["author.name ?= 'Bob'", [a2]],
  ["author.name ?!= 'Bob'", except(a2)],
  ["author.name ?~ 'LI'", [a1, a5]],
  ['author.age ?>= 30', [a1, a4, a5]],
  ["author.name ~ 'a'", [a1, a4, a5, a6]],
  ["author.name = ''", [a3]],
  ['author.age > 28', [a1, a4, a5]],
  ['author.age = null', [a3, a6]],
  ["author.role = 'editor'", [a1, a4, a5]],
  ["author.next.name = 'Carol'", [a2]],
  ["author.next.next.next.next.next.name = 'Frank'", [a1, a5]],
  ["author.next.next.next.next.next.name = 'Grace'", [a2]],
  ["author.name:lower = 'alice'", [a1, a5]],
  ['author.name = author.name', ALL],
  ["author.next = ''", [a3]],
  // editors: a1 [alice,bob] a2 [bob] a3 [] a4 [carol,alice] a5 [alice] a6 [dave,bob]
  [`editors ~ '${P.alice}'`, [a1, a4, a5]],
  [`editors !~ '${P.alice}'`, [a2, a3, a6]],
  [`editors ?= '${P.bob}'`, [a1, a2, a6]],
  [`editors = '${P.bob}'`, [a2]],
  ["editors.name = 'Alice'", [a5]],
  ["editors.name ?= 'Alice'", [a1, a4, a5]],
  ["editors.name != 'Bob'", [a3, a4, a5]],
  ["editors.name ?!= 'Bob'", [a1, a3, a4, a5, a6]],
  ['editors.age > 20', [a1, a2, a4, a5]],
  ['editors.age ?> 35', [a4]],
  ["editors.name ~ 'o'", [a2]],
  ["editors.name ?~ 'O'", [a1, a2, a4, a6]],
  ["editors.next.name ?= 'Carol'", [a1, a2, a6]],
  ['editors:length = 2', [a1, a4, a6]],
  ['editors = null', [a3]],
  ['editors.name ?= author.name', ALL],
  ['editors.name = author.name', [a2, a3, a5]],
  // back-relation remarks: a1 [Great post 5, xyz spam 50] a2 [nice 20, Nice too 30] a6 [meh 1]
  ["remarks_via_article.text ?~ 'spam'", [a1]],
  ["remarks_via_article.text ~ 'nice'", [a2]],
  ['remarks_via_article.likes > 10', [a2]],
  ['remarks_via_article.likes ?> 10', [a1, a2]],
  ['remarks_via_article.likes ?< 10', [a1, a6]],
  ['remarks_via_article:length = 0', [a3, a4, a5]],
  ['remarks_via_article:length >= 2', [a1, a2]],
  ["remarks_via_article.text != 'nice'", [a1, a3, a4, a5, a6]],
  ["remarks_via_article.text ?= 'nice'", [a2]],
  ["remarks_via_article.text = ''", [a3, a4, a5]],
  ["remarks_via_article.article.author.name ?= 'Bob'", [a2]],
];

const LOGIC_CASES: Case[] = [
  ["published = true || views = 20 && category = 'howto'", [a1, a2, a3, a5]],
  ["(published = true || views = 20) && category = 'howto'", [a2, a5]],
  ["views = 20 && category = 'howto' || published = true", [a1, a2, a3, a5]],
  ["views = 20 && (category = 'howto' || published = true)", [a2]],
  ['((views > 0) && ((published = true)))', [a1, a5]],
  ['views = 10 || views = 20 || views = 0', [a1, a2, a3]],
  ['views >= 5 && views <= 15 && published = false', [a6]],
  ["(title ~ 'rust' || title ~ 'go') && (views > 10 || views = 0)", [a2, a3]],
  ['  views\t=\n10  ', [a1]],
  ['views=10', [a1]],
  ['true = true', ALL],
  ['1 = 2', []],
  ["'a' != 'a' || views = 5", [a5]],
];

describe.each(testEngines())('query filters on %s', (engine) => {
  let app: TestApp;

  beforeAll(async () => {
    app = await startTestApp(engine, { collections: queryCollections() });
    await seedQueryData(app);
  });
  afterAll(async () => {
    await app?.close();
  });

  const articles = (filter: string, options?: Parameters<typeof filterIds>[3]) => filterIds(app, 'articles', filter, options);

  describe.each([
    ['text', TEXT_CASES],
    ['number', NUMBER_CASES],
    ['bool', BOOL_CASES],
    ['date', DATE_CASES],
    ['select', SELECT_CASES],
    ['json', JSON_CASES],
    ['relation', RELATION_CASES],
    ['logic', LOGIC_CASES],
  ] as const)('%s', (_name, cases) => {
    test.each(cases as Case[])('%s', async (filter, expected) => {
      expect(await articles(filter)).toEqual(sorted(...expected));
    });
  });

  test('an empty filter matches everything (one of only whitespace is a 400: empty-filter-parity.test.ts)', async () => {
    expect(await articles('')).toEqual(ALL);
  });

  test('totals count only the filtered records', async () => {
    const res = await listRecords(app, 'articles', { filter: "category = 'news'", perPage: '2' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ page: 1, perPage: 2, totalItems: 3, totalPages: 2 });
    expect(res.ids).toEqual([a1, a4]);
  });

  describe('case-insensitivity beyond ASCII', () => {
    beforeAll(async () => {
      await createRows(app, 'hostile', [
        { id: 'uni000000000001', text: 'Café Crème' },
        { id: 'uni000000000002', text: 'ΣΟΦΙΑ' },
        { id: 'uni000000000003', text: 'plain ascii' },
      ]);
    });

    test.each([
      ["text ~ 'CAFÉ'", ['uni000000000001']],
      ["text ~ 'crème'", ['uni000000000001']],
      ["text ~ 'σοφια'", ['uni000000000002']],
      ["text:lower = 'café crème'", ['uni000000000001']],
      ["text ~ 'ASCII'", ['uni000000000003']],
    ])('%s', async (filter, expected) => {
      expect(await filterIds(app, 'hostile', filter)).toEqual(expected);
    });
  });

  describe('relation paths and limits', () => {
    test('six hops resolve, seven are a 400 naming the path', async () => {
      expect(await filterIds(app, 'people', "next.next.next.next.next.next.name = 'Grace'")).toEqual([P.alice]);
      const res = await app.http.get('/backend/api/collections/people/records').query({ filter: "next.next.next.next.next.next.next.name = 'x'" });
      expectBadRequest(res, 'Invalid filter: "next.next.next.next.next.next.next.name" has more than 6 relation hops at position 0.');
    });

    test('back-relations start paths from the target side too', async () => {
      expect(await filterIds(app, 'people', "articles_via_author.title ?~ 'rust'")).toEqual(sorted(P.alice, P.bob));
      expect(await filterIds(app, 'people', 'articles_via_editors:length >= 3')).toEqual(sorted(P.alice, P.bob));
      expect(await filterIds(app, 'people', 'articles_via_author:length = 0')).toEqual(sorted(P.eve, P.frank, P.grace));
    });

    test.each([
      ["remarks_via_nope.text = 'x'", 'Invalid filter: unknown field "remarks_via_nope.text" at position 0.'],
      ["author.nope = 'x'", 'Invalid filter: unknown field "author.nope" at position 0.'],
      ["title.name = 'x'", 'Invalid filter: "title" in "title.name" is not a relation field at position 0.'],
      ["views = 1 && author.nope = 'x'", 'Invalid filter: unknown field "author.nope" at position 13.'],
    ])('%s -> 400', async (filter, message) => {
      expectBadRequest(await app.http.get('/backend/api/collections/articles/records').query({ filter }), message);
    });
  });

  describe('@request values', () => {
    test('@request.auth.id: a guest reads "" but never matches a record field, a user their id', async () => {
      // a3 has an empty author: a guest's empty id must not match it (docs/query-language.md).
      expect(await articles('author = @request.auth.id')).toEqual([]);
      expect(await articles("author = ''")).toEqual([a3]);
      expect(await articles('@request.auth.id = ""')).toEqual(ALL);
      expect(await articles('author = @request.auth.id', { headers: ALICE })).toEqual([a1, a5]);
      expect(await articles('author = @request.auth.id', { headers: BOB })).toEqual([a2]);
      expect(await articles('@request.auth.id != ""')).toEqual([]);
      expect(await articles('@request.auth.id != ""', { headers: ALICE })).toEqual(ALL);
    });

    test('@request.auth.<field> reads the identity', async () => {
      expect(await articles('author.role = @request.auth.role', { headers: ALICE })).toEqual([a1, a4, a5]);
      expect(await articles('author.role = @request.auth.role', { headers: BOB })).toEqual([a2]);
      // a guest's empty role never matches a record's (even an empty one)
      expect(await articles('author.role = @request.auth.role')).toEqual([]);
      expect(await articles("@request.auth.name = 'Alice'", { headers: ALICE })).toEqual(ALL);
      expect(await articles("@request.auth.name = 'Alice'", { headers: BOB })).toEqual([]);
      expect(await articles(`editors ~ @request.auth.id`, { headers: BOB })).toEqual([a1, a2, a6]);
      expect(await articles(`editors.id ?= @request.auth.id`, { headers: ALICE })).toEqual([a1, a4, a5]);
    });

    test('@request.query values are text, coerced per field; unusable values never match', async () => {
      expect(await articles('views > @request.query.n', { query: { n: '12' } })).toEqual([a2, a6]);
      expect(await articles('views > @request.query.n', { query: { n: 'abc' } })).toEqual([]);
      expect(await articles('views > @request.query.n')).toEqual([]);
      expect(await articles('title ~ @request.query.q', { query: { q: 'RUST' } })).toEqual([a1, a2]);
      expect(await articles('category = @request.query.c')).toEqual([a3]);
      expect(await articles('published = @request.query.p', { query: { p: 'true' } })).toEqual([a1, a3, a5]);
      expect(await articles('title:lower = @request.query.q:lower', { query: { q: 'MIXED Case' } })).toEqual([a6]);
    });

    test(':isset on @request.query', async () => {
      expect(await articles('@request.query.flag:isset = true', { query: { flag: '' } })).toEqual(ALL);
      expect(await articles('@request.query.flag:isset = true')).toEqual([]);
      expect(await articles('@request.query.flag:isset = false && views = 10')).toEqual([a1]);
    });

    test('@request.method is GET on a list', async () => {
      expect(await articles("@request.method = 'GET' && views = 10")).toEqual([a1]);
      expect(await articles("@request.method = 'POST'")).toEqual([]);
    });
  });

  describe('@request.auth arrays and non-text fields', () => {
    let custom: TestApp;
    beforeAll(async () => {
      custom = await startTestApp(engine, {
        collections: queryCollections(),
        auth: (token) => (token === 'token-rich' ? { id: P.carol, roles: ['admin', 'editor'], active: true, n: 12 } : null),
      });
      await seedQueryData(custom);
    });
    afterAll(async () => {
      await custom?.close();
    });
    const rich = { Authorization: 'token-rich' };

    test.each([
      ["@request.auth.roles ?= 'admin'", ALL],
      ["@request.auth.roles ?= 'nobody'", []],
      ["@request.auth.roles = 'admin'", []],
      ['@request.auth.roles:length = 2', ALL],
      ["@request.auth.roles:each ~ 'i'", ALL],
      ["@request.auth.roles:each ~ 'min'", []],
      ['@request.auth.active = true && views = 10', [a1]],
      ['views > @request.auth.n', [a2, a6]],
      ['author = @request.auth.id', [a4]],
      ['editors ?= @request.auth.id', [a4]],
      ["author.role ?= @request.auth.roles", [a1, a4, a5]],
    ])('%s', async (filter, expected) => {
      expect(await filterIds(custom, 'articles', filter, { headers: rich })).toEqual(sorted(...expected));
    });

    test('for a guest the same filters read empty values', async () => {
      expect(await filterIds(custom, 'articles', "@request.auth.roles ?= 'admin'")).toEqual([]);
      expect(await filterIds(custom, 'articles', 'views > @request.auth.n')).toEqual([]);
    });
  });

  describe('hidden fields and @collection', () => {
    test.each([
      ["secret = 'alpha'", 'Invalid filter: unknown field "secret" at position 0.'],
      ["secret ~ 'a' || views = 1", 'Invalid filter: unknown field "secret" at position 0.'],
      ["views = 1 || author.secret = 'pa'", 'Invalid filter: unknown field "author.secret" at position 13.'],
    ])('a user filtering on a hidden field (%s) gets 400 unknown field', async (filter, message) => {
      for (const headers of [{}, ALICE]) {
        const res = await app.http.get('/backend/api/collections/articles/records').query({ filter }).set(headers);
        expectBadRequest(res, message);
      }
    });

    test('a superuser may filter on hidden fields', async () => {
      expect(await articles("secret = 'alpha'", { headers: ROOT })).toEqual([a1]);
      expect(await articles("secret ~ 'alpha'", { headers: ROOT })).toEqual([a1, a5]);
      expect(await articles("author.secret = 'pa'", { headers: ROOT })).toEqual([a1, a5]);
      expect(await articles('secret = null', { headers: ROOT })).toEqual([a2, a4, a6]);
    });

    test('@collection in a user filter is a 400; a superuser may use it', async () => {
      for (const headers of [{}, ALICE]) {
        const res = await app.http.get('/backend/api/collections/articles/records').query({ filter: "@collection.people.name = 'Alice'" }).set(headers);
        expectBadRequest(res, 'Invalid filter: @collection is only allowed in rules at position 0.');
      }
      expect(await articles('@collection.people.name = author.name && @collection.people.age > 35', { headers: ROOT })).toEqual([a4]);
      expect(await articles("@collection.people.name = 'Nobody' || views = 10", { headers: ROOT })).toEqual([a1]);
      const unknown = await app.http.get('/backend/api/collections/articles/records').query({ filter: '@collection.nope.id = 1' }).set(ROOT);
      expectBadRequest(unknown, 'Invalid filter: unknown collection "nope" at position 0.');
    });
  });

  describe('macros', () => {
    const DAY = 86_400_000;
    const HOUR = 3_600_000;
    const MINUTE = 60_000;

    /** Macro values computed the way the docs define them, from one instant. */
    function macrosAt(now: Date) {
      const y = now.getUTCFullYear();
      const m = now.getUTCMonth();
      const todayStart = Date.UTC(y, m, now.getUTCDate());
      return {
        now: now.getTime(),
        todayStart,
        todayEnd: todayStart + DAY - 1,
        monthStart: Date.UTC(y, m, 1),
        monthEnd: Date.UTC(y, m + 1, 1) - 1,
        yearStart: Date.UTC(y, 0, 1),
        yearEnd: Date.UTC(y + 1, 0, 1) - 1,
        yesterday: now.getTime() - DAY,
        tomorrow: now.getTime() + DAY,
      };
    }

    let events: Map<string, number>;

    beforeAll(async () => {
      const m = macrosAt(new Date());
      const instants: Record<string, number> = {
        longAgo: m.now - 400 * DAY,
        beforeYear: m.yearStart - 1,
        yearStart: m.yearStart,
        beforeMonth: m.monthStart - 1,
        monthStart: m.monthStart,
        beforeToday: m.todayStart - 1,
        todayStart: m.todayStart,
        minusDayMore: m.now - DAY - HOUR,
        minusDayLess: m.now - DAY + HOUR,
        minusMinute: m.now - 10 * MINUTE,
        plusMinute: m.now + 10 * MINUTE,
        todayEnd: m.todayEnd,
        afterToday: m.todayEnd + 1,
        plusDayLess: m.now + DAY - HOUR,
        plusDayMore: m.now + DAY + HOUR,
        monthEnd: m.monthEnd,
        afterMonth: m.monthEnd + 1,
        yearEnd: m.yearEnd,
        afterYear: m.yearEnd + 1,
        farAhead: m.now + 400 * DAY,
      };
      events = new Map();
      let n = 0;
      const rows = Object.entries(instants).map(([label, at]) => {
        const id = `evt${String(++n).padStart(12, '0')}`;
        events.set(id, at);
        return { id, label, at: new Date(at).toISOString() };
      });
      await createRows(app, 'events', rows);
    });

    /**
     * Runs the filter and compares with the events whose instant satisfies `predicate`, computed
     * from the time of the request. A request that straddles a UTC day boundary is repeated.
     */
    async function expectMacroFilter(filter: string, predicate: (at: number, m: ReturnType<typeof macrosAt>) => boolean) {
      for (let attempt = 0; attempt < 3; attempt++) {
        const before = macrosAt(new Date());
        const got = await filterIds(app, 'events', filter);
        const after = macrosAt(new Date());
        if (before.todayStart !== after.todayStart) continue;
        const expected = [...events].filter(([, at]) => predicate(at, before)).map(([id]) => id).sort();
        expect(expected.length).toBeGreaterThan(0);
        expect(expected.length).toBeLessThan(events.size);
        expect(got).toEqual(expected);
        return;
      }
      throw new Error('the UTC day changed during every attempt');
    }

    test.each([
      ['at < @now', (at: number, m: ReturnType<typeof macrosAt>) => at < m.now],
      ['at > @now', (at: number, m: ReturnType<typeof macrosAt>) => at > m.now],
      ['at >= @todayStart && at <= @todayEnd', (at: number, m: ReturnType<typeof macrosAt>) => at >= m.todayStart && at <= m.todayEnd],
      ['at < @todayStart', (at: number, m: ReturnType<typeof macrosAt>) => at < m.todayStart],
      ['at > @todayEnd', (at: number, m: ReturnType<typeof macrosAt>) => at > m.todayEnd],
      ['at >= @monthStart && at <= @monthEnd', (at: number, m: ReturnType<typeof macrosAt>) => at >= m.monthStart && at <= m.monthEnd],
      ['at >= @yearStart && at <= @yearEnd', (at: number, m: ReturnType<typeof macrosAt>) => at >= m.yearStart && at <= m.yearEnd],
      ['at > @yesterday && at < @tomorrow', (at: number, m: ReturnType<typeof macrosAt>) => at > m.yesterday && at < m.tomorrow],
      ['at < @yesterday', (at: number, m: ReturnType<typeof macrosAt>) => at < m.yesterday],
      ['at > @tomorrow', (at: number, m: ReturnType<typeof macrosAt>) => at > m.tomorrow],
      ['at = @todayStart || at = @monthStart || at = @yearStart', (at: number, m: ReturnType<typeof macrosAt>) => at === m.todayStart || at === m.monthStart || at === m.yearStart],
      ['at = @todayEnd || at = @monthEnd || at = @yearEnd', (at: number, m: ReturnType<typeof macrosAt>) => at === m.todayEnd || at === m.monthEnd || at === m.yearEnd],
    ])('%s', async (filter, predicate) => {
      await expectMacroFilter(filter, predicate);
    });

    test('number macros compare as numbers', async () => {
      for (let attempt = 0; attempt < 3; attempt++) {
        const now = new Date();
        const year = now.getUTCFullYear();
        const month = now.getUTCMonth() + 1;
        const got = await filterIds(app, 'events', `@year = ${year} && @month = ${month} && @weekday >= 0 && @weekday <= 6 && label = 'longAgo'`);
        if (new Date().getUTCMonth() + 1 !== month) continue;
        expect(got).toHaveLength(1);
        return;
      }
      throw new Error('the UTC month changed during every attempt');
    });

    test('an unknown macro is a 400', async () => {
      const res = await app.http.get('/backend/api/collections/events/records').query({ filter: 'at > @lastWeek' });
      expectBadRequest(res, 'Invalid filter: unknown identifier "@lastWeek" at position 5.');
    });
  });

  describe('sort', () => {
    const order = async (sort: string, headers: Record<string, string> = {}) => {
      const res = await listRecords(app, 'articles', { sort }, headers);
      if (res.status !== 200) throw new Error(`sort ${sort} answered ${res.status}: ${JSON.stringify(res.body)}`);
      return res.ids;
    };

    test.each([
      ['', [a1, a2, a3, a4, a5, a6]],
      ['views', [a3, a5, a1, a6, a2, a4]],
      ['+views', [a3, a5, a1, a6, a2, a4]],
      ['-views', [a4, a2, a6, a1, a5, a3]],
      ['category,-views', [a3, a2, a5, a4, a6, a1]],
      [' category , -views ', [a3, a2, a5, a4, a6, a1]],
      ['published', [a2, a4, a6, a1, a3, a5]],
      ['-published', [a5, a3, a1, a6, a4, a2]],
      ['-published,id', [a1, a3, a5, a2, a4, a6]],
      ['-published,-id', [a5, a3, a1, a6, a4, a2]],
      ['-created', [a6, a5, a4, a3, a2, a1]],
      ['publishedAt', [a5, a1, a6, a2, a3, a4]],
      ['author.name', [a3, a1, a5, a2, a4, a6]],
      ['-author.name', [a6, a4, a2, a5, a1, a3]],
      ['author.next.name,views', [a3, a5, a1, a2, a4, a6]],
      ['views,views,views,views,views,views,views,-id', [a3, a5, a1, a6, a2, a4]],
    ])('sort=%s', async (sort, expected) => {
      expect(await order(sort)).toEqual(expected);
    });

    test('@random returns every record once, alone or with other keys', async () => {
      for (const sort of ['@random', '-@random', 'published,@random']) {
        const ids = await order(sort);
        expect([...ids].sort()).toEqual(ALL);
      }
      const withKey = await order('published,@random');
      expect(withKey.slice(0, 3).sort()).toEqual([a2, a4, a6]);
    });

    test('a hidden field is a 400 for users and fine for a superuser', async () => {
      for (const headers of [{}, ALICE]) {
        const res = await app.http.get('/backend/api/collections/articles/records').query({ sort: '-secret' }).set(headers);
        expectBadRequest(res, 'Invalid sort: unknown field "secret".');
      }
      expect(await order('secret,id', ROOT)).toEqual([a2, a4, a6, a1, a5, a3]);
    });

    test.each([
      ['views,views,views,views,views,views,views,views,views', 'Invalid sort: at most 8 fields.'],
      ['nope', 'Invalid sort: unknown field "nope".'],
      ['tags', 'Invalid sort: "tags" is multi-valued.'],
      ['editors.name', 'Invalid sort: "editors.name" goes through the multi-valued relation "editors".'],
      ['remarks_via_article.likes', undefined],
      ['title:lower', undefined],
      ['author.nope', undefined],
      ['views desc', undefined],
    ])('sort=%s -> 400', async (sort, message) => {
      const res = await app.http.get('/backend/api/collections/articles/records').query({ sort });
      expectBadRequest(res, message ?? /^Invalid sort: /);
    });
  });

  describe('limits and errors', () => {
    test('3,500 characters pass, 3,501 are a 400', async () => {
      const pad = (length: number) => `title = '${'x'.repeat(length - 10)}'`;
      expect(pad(3500)).toHaveLength(3500);
      expect(await articles(pad(3500))).toEqual([]);
      const res = await app.http.get('/backend/api/collections/articles/records').query({ filter: pad(3501) });
      expectBadRequest(res, 'Invalid filter: too long (3501 characters; at most 3500).');
    });

    test('200 comparisons pass, 201 are a 400', async () => {
      const chain = (n: number) => Array.from({ length: n }, (_, i) => `views = ${i}`).join(' || ');
      expect(await articles(chain(200))).toEqual([a1, a3, a5, a6, a2].sort());
      const res = await app.http.get('/backend/api/collections/articles/records').query({ filter: chain(201) });
      expectBadRequest(res, /^Invalid filter: too many comparisons \(at most 200\) at position \d+\.$/);
    });

    test('parentheses nest up to 50 levels', async () => {
      const nest = (n: number) => '('.repeat(n) + 'views = 10' + ')'.repeat(n);
      expect(await articles(nest(50))).toEqual([a1]);
      const res = await app.http.get('/backend/api/collections/articles/records').query({ filter: nest(51) });
      expectBadRequest(res, 'Invalid filter: parentheses nested deeper than 50 levels at position 50.');
    });

    test.each([
      ["title = 'x' && nope = 1", 'Invalid filter: unknown field "nope" at position 15.'],
      ['title = ', 'Invalid filter: unexpected end of filter at position 8.'],
      ["title = 'abc", 'Invalid filter: unterminated string at position 8.'],
      ["views > 'abc'", 'Invalid filter: "abc" is not a valid number to compare with "views" at position 8.'],
      ["published = 'yes'", 'Invalid filter: "yes" is not a valid boolean to compare with "published" at position 12.'],
      ["publishedAt = '2024-02-30'", 'Invalid filter: "2024-02-30" is not a valid date to compare with "publishedAt" at position 14.'],
      ["publishedAt > 'soon'", 'Invalid filter: "soon" is not a valid date to compare with "publishedAt" at position 14.'],
      ['title:length > 1', 'Invalid filter: ":length" needs a multi-valued field, not "title" at position 0.'],
      ["title:each = 'x'", 'Invalid filter: ":each" needs a multi-valued field, not "title" at position 0.'],
      ['title:isset = true', 'Invalid filter: ":isset" is only for @request.* values, not "title" at position 0.'],
      ["title:upper = 'x'", 'Invalid filter: unknown modifier ":upper" at position 0.'],
      ['(views = 1', 'Invalid filter: expected ")" but found end of filter at position 10.'],
      ['()', 'Invalid filter: empty parentheses at position 0.'],
      ["views = 1; DROP TABLE articles", 'Invalid filter: unexpected character ";" at position 9.'],
      ['views = 12abc', 'Invalid filter: invalid number "12a" at position 8.'],
      ['a..b = 1', 'Invalid filter: invalid name "a..b" at position 0.'],
      ['title "a"', 'Invalid filter: expected an operator after "title" but found "\\"a\\"" at position 6.'],
      ['views == 1', 'Invalid filter: unexpected "=" at position 7.'],
      ['&& views = 1', 'Invalid filter: unexpected "&&" at position 0.'],
      ['@request.headers.x.y = 1', 'Invalid filter: unknown identifier "@request.headers.x.y" at position 0.'],
    ])('%s -> 400 with the message', async (filter, message) => {
      const res = await app.http.get('/backend/api/collections/articles/records').query({ filter });
      expectBadRequest(res, message);
    });
  });
});
