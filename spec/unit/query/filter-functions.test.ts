import { describe, expect, test } from '@jest/globals';
import { compileFilter, compileCostedFilter } from '../../../lib/query/compile-filter.js';
import { parseFilter } from '../../../lib/query/filter-parser.js';
import { tokenizeFilter } from '../../../lib/query/filter-lexer.js';
import { reuseKey } from '../../../lib/records/access-rules.js';
import { lazyRuleHeaders, normalizeHeaderName, readRuleHeaders } from '../../../lib/query/request-headers.js';
import { alice, errorOf, guest, posts, postsContext } from './query-test-schema.js';

/**
 * PocketBase's additions to the filter language, as pure compilation: `//` comments, the
 * functions strftime() and geoDistance(), `@request.body.f:changed`, `@request.headers.*` and
 * `@request.context`. What they select on real rows is in spec/integration/rules-parity.test.ts.
 */

const asRule = (request = alice) => postsContext({ mode: 'rule', request });

describe('// comments', () => {
  test.each([
    ["title = 'x' // the title", "title = 'x'"],
    ["title = 'x' // one\n&& views > 1 // two", "title = 'x' && views > 1"],
    ["// first line only\ntitle = 'x'", "title = 'x'"],
    ["title = 'a // b'", "title = 'a // b'"],
    ["title = 'x' // it's (not) \"code\" && views > 1", "title = 'x'"],
    ["(title = 'x' // (\n)", "(title = 'x')"],
    ["title = 'x'//", "title = 'x'"],
  ])('%j reads as %j', (withComment, plain) => {
    expectSameShape(parseFilter(withComment), parseFilter(plain));
  });

  test('a string keeps its slashes as text', () => {
    expect(tokenizeFilter("title = 'a // b'").map((t) => t.kind)).toEqual(['identifier', 'operator', 'string', 'eof']);
    expect(tokenizeFilter("title = 'a // b'")[2]!.value).toBe('a // b');
  });

  test('a filter or rule that is only a comment is refused, as PocketBase refuses an empty expression (it never lets everyone in)', () => {
    expect(() => compileFilter('// nothing', asRule())).toThrow(/Invalid filter: empty expression \(only whitespace or comments\)/);
    expect(() => compileFilter('// nothing', postsContext())).toThrow(/Invalid filter: empty expression/);
  });
});

/** Positions differ between a filter with comments and its plain form: compare the shapes. */
function expectSameShape(node: unknown, expected: unknown): void {
  const strip = (value: unknown): unknown =>
    Array.isArray(value) ? value.map(strip) : value && typeof value === 'object' ? Object.fromEntries(Object.entries(value).filter(([k]) => k !== 'pos').map(([k, v]) => [k, strip(v)])) : value;
  expect(strip(node)).toEqual(strip(expected));
}

describe('function calls parse', () => {
  test('strftime with a name and modifiers', () => {
    expect(parseFilter("strftime('%Y', publishedAt, '+1 days') = '2024'")).toEqual({
      type: 'comparison',
      operator: '=',
      anyOf: false,
      pos: expect.any(Number),
      left: {
        type: 'function',
        name: 'strftime',
        pos: 0,
        args: [
          { type: 'literal', value: '%Y', pos: 9 },
          { type: 'identifier', name: 'publishedAt', segments: ['publishedAt'], pos: 15 },
          { type: 'literal', value: '+1 days', pos: 28 },
        ],
      },
      right: { type: 'literal', value: '2024', pos: 41 },
    });
  });

  test.each([
    ['strftime() = 1', 'strftime() takes at least 1 argument, not 0 at position 0'],
    [`strftime('%Y'${", '+1 days'".repeat(10)}) = 1`, 'strftime() takes at most 10 arguments'],
    ['geoDistance(1, 2, 3) < 1', 'geoDistance() takes 4 arguments, not 3 at position 0'],
    ['geoDistance(1, 2, 3, 4, 5) < 1', 'geoDistance() takes at most 4 arguments'],
    ["strftime('%Y', strftime('%Y')) = ''", "a function's argument cannot be a function call"],
    ['nope(1) = 1', 'unknown function "nope" (the functions are strftime and geoDistance) at position 0'],
    ['__proto__(1) = 1', 'unknown function "__proto__"'],
    ['constructor(1) = 1', 'unknown function "constructor"'],
    ["strftime('%Y' title) = ''", 'expected "," or ")" in strftime() but found "title"'],
    ["strftime('%Y', ) = ''", 'unexpected'],
    ["strftime('%Y'", 'expected "," or ")" in strftime()'],
  ])('%j is a 400: %s', (filter, message) => {
    const error = errorOf(() => compileFilter(filter, asRule()));
    expect(error.status).toBe(400);
    expect(error.message).toContain(message);
  });
});

describe('strftime compiles', () => {
  test('the format is never SQL text: each literal piece is a bound value', () => {
    const { sql, bindings } = compileFilter("strftime('x\\'; DROP TABLE posts; --%Y', publishedAt) = ''", asRule());
    expect(sql).not.toContain('DROP');
    expect(bindings).toContain("x'; DROP TABLE posts; --");
  });

  test('a date field is read as its instant, a text field per row, a number as a Julian day', () => {
    expect(compileFilter("strftime('%Y', publishedAt) = '2024'", asRule()).sql).toContain('extract(epoch FROM "r"."publishedAt")');
    expect(compileFilter("strftime('%Y', title) = '2024'", asRule()).sql).toContain('regexp_match("r"."title"');
    expect(compileFilter("strftime('%Y', views) = '2024'", asRule()).sql).toContain('"r"."views"');
  });

  test('no time value, "now" and @now are the filter\'s instant', () => {
    const now = 1715768430400;
    for (const filter of ["strftime('%Y') = ''", "strftime('%Y', 'now') = ''", "strftime('%Y', 'NOW') = ''", "strftime('%Y', @now) = ''"]) {
      expect(compileFilter(filter, asRule()).bindings).toContain(now);
    }
  });

  test('a literal time value is read at compile time, to its instant', () => {
    expect(compileFilter("strftime('%Y', '2024-05-15 10:20:30.456') = ''", asRule()).bindings).toContain(Date.UTC(2024, 4, 15, 10, 20, 30, 456));
    expect(compileFilter("strftime('%Y', '2024-05-15T12:20:30+02:00') = ''", asRule()).bindings).toContain(Date.UTC(2024, 4, 15, 10, 20, 30));
  });

  test.each([
    ["strftime('%Q') = ''", 'the unknown conversion "%Q"', 9],
    ["strftime('%Y%') = ''", 'a lone "%" at its end', 9],
    [`strftime('${'%Y'.repeat(51)}') = ''`, 'strftime() format too long (102 characters; at most 100)', 9],
    ["strftime('%Y', publishedAt, 'localtime') = ''", 'strftime() modifier "localtime" is not supported', 28],
    ["strftime('%Y', publishedAt, '+1 fortnights') = ''", 'has an unknown unit', 28],
    ["strftime('%Y', publishedAt, 'weekday 7') = ''", 'needs a whole weekday number from 0 (Sunday) to 6', 28],
    ["strftime('%Y', publishedAt, 'start of week') = ''", 'is not one SQLite knows', 28],
    ["strftime('%Y', publishedAt, '+1e20 days') = ''", 'is out of range', 28],
    ["strftime('%Y', publishedAt, '+1 days', 'unixepoch') = ''", 'must come right after the time value', 39],
    ["strftime('%Y', publishedAt, 'unixepoch') = ''", 'reads a number time value, and this time value is a date', 28],
    [`strftime('%Y', publishedAt, '${'+'.repeat(60)}') = ''`, 'strftime() modifier too long (60 characters; at most 50)', 28],
    ["strftime('%Y', 'yesterday') = ''", 'is not a time value strftime() reads', 15],
    ["strftime('%Y', '0000-01-01') = ''", 'is not a time value strftime() reads', 15],
    ["strftime('%Y', tags) = ''", "strftime()'s time value must be a date, text or number field", 15],
    ["strftime(title) = ''", "strftime()'s format must be text in quotes", 9],
    ["strftime(@request.query.q) = ''", "strftime()'s format must be text in quotes", 9],
    ["strftime('%Y', publishedAt, title) = ''", "strftime()'s modifiers must be text in quotes", 28],
    ["strftime('%Y', publishedAt:lower) = ''", "a function's argument takes no modifier", 15],
  ])('%j is a 400 naming the argument: %s', (filter, message, pos) => {
    const error = errorOf(() => compileFilter(filter, asRule()));
    expect(error.status).toBe(400);
    expect(error.message).toContain(message);
    expect(error.message).toContain(`at position ${pos}.`);
  });
});

describe('geoDistance compiles', () => {
  test('four numbers, bound; the haversine distance in km', () => {
    const { sql, bindings } = compileFilter('geoDistance(2.3522, 48.8566, -0.1276, 51.5072) < 400', asRule());
    expect(sql).toContain('2 * 6371 * asin(sqrt(');
    expect(bindings).toEqual([2.3522, 2.3522, 48.8566, 48.8566, -0.1276, -0.1276, 51.5072, 51.5072, 400]);
  });

  test('number fields, and a @request value read as a number or NULL', () => {
    const { sql, bindings } = compileFilter('geoDistance(views, views, @request.query.n, @request.query.bad) < 1', asRule());
    expect(sql).toContain('"r"."views"');
    expect(bindings).toEqual([12, 12, null, null, 1]);
  });

  test.each([
    ["geoDistance('1', 2, 3, 4) < 1", "geoDistance()'s argument 1 must be a number", 12],
    ['geoDistance(1, title, 3, 4) < 1', "geoDistance()'s argument 2 must be a number", 15],
    ['geoDistance(1, 2, true, 4) < 1', "geoDistance()'s argument 3 must be a number", 18],
  ])('%j is a 400: %s', (filter, message, pos) => {
    const error = errorOf(() => compileFilter(filter, asRule()));
    expect(error.status).toBe(400);
    expect(error.message).toContain(message);
    expect(error.message).toContain(`at position ${pos}.`);
  });
});

describe('functions and the rules around them', () => {
  test("a guest's identity inside a call never matches a record value", () => {
    const rule = postsContext({ mode: 'rule', request: guest });
    expect(compileFilter("strftime('%Y', @request.auth.created) = strftime('%Y', publishedAt)", rule).sql).toBe('FALSE');
    expect(compileFilter("strftime('%Y', publishedAt) = strftime('%Y', @request.auth.created)", rule).sql).toBe('FALSE');
    expect(compileFilter('geoDistance(@request.auth.lon, @request.auth.lat, views, views) < 10', rule).sql).toBe('FALSE');
    // A comparison of the guest's identity with a value only is left as it is (true or false for everyone).
    expect(compileFilter("strftime('%Y', @request.auth.created) = ''", rule).sql).not.toBe('FALSE');
  });

  test("each argument of a call costs one more (modifiers too), and the limit names them", () => {
    expect(compileCostedFilter("strftime('%Y') = '2024'", asRule()).cost).toBe(2);
    expect(compileCostedFilter("strftime('%Y', publishedAt) = '2024'", asRule()).cost).toBe(3);
    expect(compileCostedFilter("strftime('%Y', publishedAt) = strftime('%Y')", asRule()).cost).toBe(4);
    expect(compileCostedFilter("strftime('%Y', publishedAt, 'start of day', 'start of day', 'start of day') = '1'", asRule()).cost).toBe(6);
    expect(compileCostedFilter('geoDistance(1, 2, 3, 4) < 1', asRule()).cost).toBe(5);
    const modifiers = Array.from({ length: 8 }, () => "'start of day'").join(', ');
    const filter = Array.from({ length: 19 }, () => `strftime('%Y', publishedAt, ${modifiers}) = ''`).join(' || ');
    const error = errorOf(() => compileFilter(filter, asRule()));
    expect(error.message).toContain('each argument of a function call and each multi-valued relation or back-relation it goes through 1 more, at most 200 in all');
  });

  test("a call's SQL grows linearly with its modifiers, whatever they are", () => {
    // Each step reads its input several times: written naively (or pulled up by Postgres's
    // planner, see oneRowTable) the expression would grow exponentially with the steps.
    for (const modifier of ["'start of day'", "'+1 months'", "'weekday 3'", "'+0001-02-03 04:05'", "'+5 hours'"]) {
      const sizes = [1, 2, 4, 8].map((n) => {
        const compiled = compileFilter(`strftime('%Y%m%d', publishedAt, ${Array.from({ length: n }, () => modifier).join(', ')}) = ''`, asRule());
        return compiled.sql.length;
      });
      const step = sizes[1]! - sizes[0]!;
      expect(sizes[3]! - sizes[2]!).toBeLessThanOrEqual(4 * step * 1.1);
      expect(sizes[2]! - sizes[1]!).toBeLessThanOrEqual(2 * step * 1.1);
    }
  });

  test('every derived table of a call is fenced (OFFSET 0), so Postgres cannot pull it up and copy its expressions', () => {
    const compiled = compileFilter("strftime('%Y', title, 'auto', 'start of month', '+1 months', 'weekday 2') = '' && geoDistance(views, views, 1, 2) < 1", asRule());
    const derived = compiled.sql.match(/FROM \(SELECT /g) ?? [];
    const fenced = compiled.sql.match(/ OFFSET 0\) AS /g) ?? [];
    expect(derived.length).toBeGreaterThan(5);
    expect(fenced.length).toBe(derived.length);
  });

  test('a filter with a call is never reused as static (it reads the clock)', () => {
    expect(reuseKey(parseFilter("strftime('%Y') = '2024'"), posts, 'user', guest)).toBeUndefined();
    expect(reuseKey(parseFilter('geoDistance(views, views, 1, 2) < 1'), posts, 'rule', guest)).toBeUndefined();
    expect(reuseKey(parseFilter("title = 'x'"), posts, 'user', guest)).toBe('');
  });

  test('a hidden field is unknown inside a call as everywhere', () => {
    expect(errorOf(() => compileFilter("strftime('%Y', secret) = ''", postsContext())).message).toContain('unknown field "secret"');
  });

  test('@collection inside a call is for rules only', () => {
    expect(errorOf(() => compileFilter("strftime('%Y', @collection.users.name) = ''", postsContext())).message).toContain('@collection is only allowed in rules');
  });

  test('two multi-valued arguments are refused (they would pair values of different records)', () => {
    expect(errorOf(() => compileFilter('geoDistance(editors.age, editors.age, 1, 2) < 1', asRule())).message).toContain('may read only one argument through a multi-valued relation');
  });
});

describe('@request.body.f:changed', () => {
  const update = (body: Record<string, unknown>) => postsContext({ mode: 'rule', request: { ...alice, body } });

  test.each([
    ['title', 'New', '(?::text IS DISTINCT FROM "r"."title") = ?::boolean', ['New', false]],
    ['views', 7, '(?::double precision IS DISTINCT FROM "r"."views") = ?::boolean', [7, false]],
    ['published', true, '(?::boolean IS DISTINCT FROM "r"."published") = ?::boolean', [true, false]],
    ['publishedAt', '2024-01-02 00:00:00.000Z', '(?::timestamptz IS DISTINCT FROM "r"."publishedAt") = ?::boolean', ['2024-01-02T00:00:00.000Z', false]],
    ['tags', ['a', 'b'], '(?::jsonb IS DISTINCT FROM "r"."tags") = ?::boolean', ['["a","b"]', false]],
    ['meta', { a: 1 }, '(?::jsonb IS DISTINCT FROM "r"."meta") = ?::boolean', ['{"a":1}', false]],
    ['author', 'alice0000000001', '(?::text IS DISTINCT FROM "r"."author") = ?::boolean', ['alice0000000001', false]],
  ])('on update, %s compares what is sent with the stored column', (field, value, sql, bindings) => {
    expect(compileFilter(`@request.body.${field}:changed = false`, update({ [field]: value }))).toEqual({ sql, bindings });
  });

  test('not sent: false, on update and on create', () => {
    expect(compileFilter('@request.body.title:changed = false', update({}))).toEqual({ sql: '?::boolean = ?::boolean', bindings: [false, false] });
    expect(compileFilter('@request.body.title:changed = false', postsContext({ mode: 'rule', creating: true, request: { ...alice, body: {} } })).bindings).toEqual([false, false]);
  });

  test('on create: sent and not empty', () => {
    const create = (body: Record<string, unknown>) => postsContext({ mode: 'rule', creating: true, request: { ...alice, body } });
    expect(compileFilter('@request.body.title:changed = true', create({ title: 'x' })).bindings).toEqual([true, true]);
    expect(compileFilter('@request.body.title:changed = true', create({ title: '' })).bindings).toEqual([false, true]);
    expect(compileFilter('@request.body.tags:changed = true', create({ tags: [] })).bindings).toEqual([false, true]);
    expect(compileFilter('@request.body.published:changed = true', create({ published: false })).bindings).toEqual([false, true]);
  });

  test.each([
    ['title:changed = true', '":changed" is only for @request.body.* fields, not "title"'],
    ['@request.query.q:changed = true', '":changed" is only for @request.body.* fields'],
    ['@request.body.nope:changed = true', 'unknown field "nope"'],
  ])('%j is a 400 (%s)', (filter, message) => {
    const error = errorOf(() => compileFilter(filter, asRule()));
    expect(error.status).toBe(400);
    expect(error.message).toContain(message);
  });
});

describe('@request.headers and @request.context', () => {
  const withHeaders = (headers: Record<string, string> | undefined, context?: 'realtime') => postsContext({ mode: 'rule', request: { ...alice, headers, context } });

  test('a header is a bound value; absent reads ""', () => {
    expect(compileFilter("@request.headers.x_token = 'abc'", withHeaders({ x_token: 'abc' }))).toEqual({ sql: '?::text = ?::text', bindings: ['abc', 'abc'] });
    expect(compileFilter("@request.headers.x_token = ''", withHeaders({}))).toEqual({ sql: '?::text = ?::text', bindings: ['', ''] });
    expect(compileFilter("@request.headers.x_token = ''", withHeaders(undefined))).toEqual({ sql: '?::text = ?::text', bindings: ['', ''] });
    expect(compileFilter('@request.headers.x_token:isset = true', withHeaders({})).bindings).toEqual([false, true]);
  });

  test("names of Object.prototype are not headers", () => {
    for (const name of ['__proto__', 'constructor', 'tostring', 'hasownproperty']) {
      expect(compileFilter(`@request.headers.${name} = ''`, withHeaders({})).bindings).toEqual(['', '']);
    }
  });

  test('an upper-case name in a rule is a 400 (it could never match)', () => {
    expect(errorOf(() => compileFilter("@request.headers.X_Token = ''", withHeaders({}))).message).toContain('write "@request.headers.x_token"');
  });

  test('@request.context: default unless set', () => {
    expect(compileFilter("@request.context = 'default'", withHeaders({})).bindings).toEqual(['default', 'default']);
    expect(compileFilter("@request.context = 'realtime'", withHeaders({}, 'realtime')).bindings).toEqual(['realtime', 'realtime']);
    expect(errorOf(() => compileFilter("@request.context.x = ''", withHeaders({}))).message).toContain('unknown identifier');
  });
});

describe('header names (PocketBase: inflector.Snakecase)', () => {
  test.each([
    ['X-Token', 'x_token'],
    ['x-token', 'x_token'],
    ['x_token', 'x_token'],
    ['xToken', 'x_token'],
    ['X-Forwarded-For', 'x_forwarded_for'],
    ['--x..token--', 'x_token'],
    ['', ''],
  ])('%j is %j', (name, normal) => {
    expect(normalizeHeaderName(name)).toBe(normal);
  });

  test('an HTTP request: req.headers as the host left them, "-" as "_", odd names dropped so none stands in for another', () => {
    const headers = readRuleHeaders({ 'x-token': 'one, two', x_token: 'forged', 'x--token': 'forged', 'x.token': 'forged', authorization: 'Bearer t', 'set-cookie': ['a=1', 'b=2'], 'x-gone': undefined });
    expect({ ...headers }).toEqual({ x_token: 'one, two', authorization: 'Bearer t', set_cookie: 'a=1, b=2' });
    expect(Object.getPrototypeOf(headers)).toBeNull();
  });

  test("a host's own values: a mixed-case name under its lower-case one, numbers as text, other values absent", () => {
    expect({ ...readRuleHeaders({ 'X-Tenant': 'acme', 'x-user-id': 42, 'x-flag': true, 'x-object': { id: 1 }, 'x-mixed': ['a', 1] }) }).toEqual({ x_tenant: 'acme', x_user_id: '42', x_flag: 'true' });
  });

  test("a name two keys lower-case to is read from neither (the client's x-tenant and a host's X-Tenant)", () => {
    expect({ ...readRuleHeaders({ 'x-tenant': 'acme', 'X-Tenant': 'globex', 'x-other': 'kept' }) }).toEqual({ x_other: 'kept' });
    expect({ ...readRuleHeaders({ 'x-tenant': 'acme', 'X-Tenant': undefined }) }).toEqual({ x_tenant: 'acme' });
  });

  test('read lazily: nothing is read until something looks, then once, and it reads as the plain object', () => {
    let reads = 0;
    const headers = lazyRuleHeaders(() => {
      reads++;
      return { 'x-token': 'one', 'x.token': 'forged', authorization: 'Bearer t' };
    });
    const copied = { auth: null, headers };
    expect(reads).toBe(0);
    expect(Object.hasOwn(copied.headers, 'x_token')).toBe(true);
    expect(reads).toBe(1);
    expect(headers.x_token).toBe('one');
    expect(Object.hasOwn(headers, 'x.token')).toBe(false);
    expect(headers['x.token']).toBeUndefined();
    expect('authorization' in headers).toBe(true);
    expect(Object.keys(headers).sort()).toEqual(['authorization', 'x_token']);
    expect({ ...headers }).toEqual({ x_token: 'one', authorization: 'Bearer t' });
    expect(JSON.parse(JSON.stringify(headers))).toEqual({ x_token: 'one', authorization: 'Bearer t' });
    expect(() => {
      'use strict';
      (headers as Record<string, string>).x_token = 'forged';
    }).toThrow(TypeError);
    expect(headers.x_token).toBe('one');
    expect(reads).toBe(1);
  });
});
