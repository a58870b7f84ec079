import { describe, expect, test } from '@jest/globals';
import { compileFilter } from '../../../lib/query/compile-filter.js';
import { errorOf, postsContext, registry } from './query-test-schema.js';

type ErrorCase = [filter: string, message: string];

const errorCases: ErrorCase[] = [
  ['foo = 1', 'Invalid filter: unknown field "foo" at position 0.'],
  ['title = 1 && foo.bar = 1', 'Invalid filter: unknown field "foo.bar" at position 13.'],
  ['secret = "x"', 'Invalid filter: unknown field "secret" at position 0.'],
  ['author.token = "x"', 'Invalid filter: unknown field "author.token" at position 0.'],
  ['title.name = "x"', 'Invalid filter: "title" in "title.name" is not a relation field at position 0.'],
  ['author.nope = 1', 'Invalid filter: unknown field "author.nope" at position 0.'],
  ['comments_via_nope.text = 1', 'Invalid filter: unknown field "comments_via_nope.text" at position 0.'],
  ['author.best.best.best.best.best.best.name = "x"', 'Invalid filter: "author.best.best.best.best.best.best.name" has more than 6 relation hops at position 0.'],
  ["views > 'abc'", 'Invalid filter: "abc" is not a valid number to compare with "views" at position 8.'],
  ["published = 'yes'", 'Invalid filter: "yes" is not a valid boolean to compare with "published" at position 12.'],
  ["publishedAt > 'yesterday'", 'Invalid filter: "yesterday" is not a valid date to compare with "publishedAt" at position 14.'],
  ["publishedAt > '2024-02-30'", 'Invalid filter: "2024-02-30" is not a valid date to compare with "publishedAt" at position 14.'],
  ['views > true && created > 5', 'Invalid filter: true is not a valid number to compare with "views" at position 8.'],
  ['views > 1 && created > 5', 'Invalid filter: 5 is not a valid date to compare with "created" at position 23.'],
  ['title:length > 1', 'Invalid filter: ":length" needs a multi-valued field, not "title" at position 0.'],
  ['title:each = 1', 'Invalid filter: ":each" needs a multi-valued field, not "title" at position 0.'],
  ['title:isset = true', 'Invalid filter: ":isset" is only for @request.* values, not "title" at position 0.'],
  ['title:upper = "x"', 'Invalid filter: unknown modifier ":upper" at position 0.'],
  ['@now:lower = "x"', 'Invalid filter: macros take no modifier ("@now:lower") at position 0.'],
  ['@nope = 1', 'Invalid filter: unknown identifier "@nope" at position 0.'],
  ['@request.headers.x.y = 1', 'Invalid filter: unknown identifier "@request.headers.x.y" at position 0.'],
  ['@request.auth = 1', 'Invalid filter: unknown identifier "@request.auth" at position 0.'],
  ['@collection.users.name = "x"', 'Invalid filter: @collection is only allowed in rules at position 0.'],
  ['title = "a" &&', 'Invalid filter: unexpected end of filter at position 14.'],
  ['title = "a" && && views = 1', 'Invalid filter: unexpected "&&" at position 15.'],
  ['&& title = 1', 'Invalid filter: unexpected "&&" at position 0.'],
  ['title "a"', 'Invalid filter: expected an operator after "title" but found "\\"a\\"" at position 6.'],
  ['title', 'Invalid filter: expected an operator after "title" but found end of filter at position 5.'],
  ['title == "a"', 'Invalid filter: unexpected "=" at position 7.'],
  ['title = "a" views = 1', 'Invalid filter: unexpected "views" at position 12.'],
  ['(title = "a"', 'Invalid filter: expected ")" but found end of filter at position 12.'],
  ['title = "a")', 'Invalid filter: unexpected ")" at position 11.'],
  ['()', 'Invalid filter: empty parentheses at position 0.'],
  ["title = 'abc", 'Invalid filter: unterminated string at position 8.'],
  ['title = "abc\\"', 'Invalid filter: unterminated string at position 8.'],
  ['title = 12abc', 'Invalid filter: invalid number "12a" at position 8.'],
  ['title # 1', 'Invalid filter: unexpected character "#" at position 6.'],
  ['title = 1; DROP TABLE posts', 'Invalid filter: unexpected character ";" at position 9.'],
  ['title = 1 -- comment', 'Invalid filter: unexpected character "-" at position 10.'],
  ['title = 1 /* c */', 'Invalid filter: unexpected character "/" at position 10.'],
  ['title:lo-wer = 1', 'Invalid filter: unexpected character "-" at position 8.'],
  ['title:a:b = 1', 'Invalid filter: invalid modifier in "title:a:b" at position 5.'],
  ['title.@x = 1', 'Invalid filter: invalid name "title.@x" at position 0.'],
  ['a..b = 1', 'Invalid filter: invalid name "a..b" at position 0.'],
];

describe('filter errors: 400 invalid_filter naming what and where', () => {
  test.each(errorCases)('%s', (filter, message) => {
    const error = errorOf(() => compileFilter(filter, postsContext()));
    expect(error.message).toBe(message);
    expect(error.status).toBe(400);
    expect(error.code).toBe('invalid_filter');
  });

  test('@collection with an unknown collection', () => {
    expect(errorOf(() => compileFilter('@collection.nope.id = 1', postsContext({ mode: 'rule' }))).message).toBe(
      'Invalid filter: unknown collection "nope" at position 0.',
    );
  });

  test('@collection needs a field', () => {
    expect(errorOf(() => compileFilter('@collection.users = 1', postsContext({ mode: 'rule' }))).message).toBe(
      'Invalid filter: "@collection.users" needs a field ("@collection.<name>.<field>") at position 0.',
    );
  });

  test('superusers may use @collection and hidden fields when allowed', () => {
    const ctx = postsContext({ mode: 'superuser' });
    expect(compileFilter('secret = "x" && @collection.users.token = "t"', ctx).bindings).toEqual(['x', 't']);
  });

  test('a normal user cannot reach another collection through @collection', () => {
    expect(errorOf(() => compileFilter('@collection.users.token = "t"', postsContext())).message).toBe(
      'Invalid filter: @collection is only allowed in rules at position 0.',
    );
  });

  test('limits: length, comparisons, nesting', () => {
    expect(errorOf(() => compileFilter('title = "' + 'x'.repeat(3500) + '"', postsContext())).message).toBe(
      'Invalid filter: too long (3510 characters; at most 3500).',
    );
    const many = Array.from({ length: 201 }, () => 'views=1').join('&&');
    expect(errorOf(() => compileFilter(many, postsContext())).message).toBe(
      'Invalid filter: too many comparisons (at most 200) at position 1800.',
    );
    const exactly = Array.from({ length: 200 }, () => 'views=1').join('&&');
    expect(compileFilter(exactly, postsContext()).bindings).toHaveLength(200);
    const deep = '('.repeat(51) + 'views=1' + ')'.repeat(51);
    expect(errorOf(() => compileFilter(deep, postsContext())).message).toBe(
      'Invalid filter: parentheses nested deeper than 50 levels at position 50.',
    );
    expect(compileFilter('('.repeat(50) + 'views=1' + ')'.repeat(50), postsContext()).sql).toBe('"r"."views" = ?::double precision');
    expect(errorOf(() => compileFilter('('.repeat(3000), postsContext())).code).toBe('invalid_filter');
  });

  test('the registry is what makes names valid (sanity)', () => {
    expect(registry.get('posts')?.field('title')).toBeDefined();
  });
});

/** Hostile text: as a value it must land only in bindings; as a name it must be a 400. */
const hostile = [
  "'; DROP TABLE posts; --",
  '"; DROP TABLE posts; --',
  "x' OR '1'='1",
  'a -- comment',
  'a /* comment */ b',
  'semi;colon',
  '?',
  '??',
  '$1',
  '$1::text',
  '\\',
  '\\\\',
  'back\\slash',
  'ünïcødé ✓ 🚀',
  '\u0000nul',
  '%_%',
  "O'Reilly",
  'line\nbreak',
];

describe('injection table: values', () => {
  test.each(hostile)('value %j stays a binding', (value) => {
    const literal = JSON.stringify(value); // the way pb.filter() writes strings
    for (const filter of [`title = ${literal}`, `title ~ ${literal}`, `tags ?= ${literal}`, `author.name != ${literal}`, `comments_via_post.text ?~ ${literal}`]) {
      const { sql, bindings } = compileFilter(filter, postsContext());
      expect(sql.split('?').length - 1).toBe(bindings.length);
      expect(sql).not.toContain(value.length > 2 ? value : '\u0001never');
      expect(sql).not.toMatch(/DROP|--|\/\*|;|\$1|\\/);
      expect(bindings.some((b) => typeof b === 'string' && (b === value || b.includes(value.replace(/[\\_]/g, (c) => '\\' + c))))).toBe(true);
    }
  });

  test.each(hostile)('single-quoted value %j round-trips through the lexer', (value) => {
    const literal = "'" + value.replace(/\\/g, '\\\\').replace(/'/g, "\\'") + "'";
    expect(compileFilter(`title = ${literal}`, postsContext()).bindings).toEqual([value]);
  });

  test.each(hostile)('request value %j stays a binding', (value) => {
    const ctx = postsContext({ request: { auth: { id: value }, query: { q: value }, body: { title: value }, method: 'GET' } });
    const { sql, bindings } = compileFilter('author = @request.auth.id && title = @request.query.q && body = @request.body.title', ctx);
    expect(sql).toBe('("r"."author" = ?::text AND "r"."title" = ?::text AND "r"."body" = ?::text)');
    expect(bindings).toEqual([value, value, value]);
  });
});

describe('injection table: identifiers', () => {
  const names = [
    'title"; DROP TABLE posts; --',
    "title'",
    'title;',
    'title--',
    'title/*',
    'ti?tle',
    'title??',
    '$1',
    'tïtle',
    'title\\',
    'title.id"',
    '@collection.users"; --.id',
  ];
  test.each(names)('name %j is a 400, never SQL', (name) => {
    const error = errorOf(() => compileFilter(`${name} = 1`, postsContext({ mode: 'rule' })));
    expect(error.code).toBe('invalid_filter');
  });
});
