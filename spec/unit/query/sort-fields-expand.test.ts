import { describe, expect, test } from '@jest/globals';
import { BadRequestError } from '../../../lib/errors.js';
import { compileSort } from '../../../lib/query/compile-sort.js';
import { parseFields } from '../../../lib/query/parse-fields.js';
import { applyFields, excerpt } from '../../../lib/query/apply-fields.js';
import { parseExpand, type ExpandTree } from '../../../lib/query/parse-expand.js';
import { resolveRelation } from '../../../lib/query/resolve-relation.js';
import { LruCache } from '../../../lib/query/lru-cache.js';
import { parseDateLiteral } from '../../../lib/query/date-literal.js';
import { formatRecordDate } from '../../../lib/schema/record-date.js';
import { posts, postsContext, registry, users } from './query-test-schema.js';

const sortCases: [sort: string, sql: string][] = [
  ['', '"r"."created" ASC, "r"."id" ASC'],
  [' , ', '"r"."created" ASC, "r"."id" ASC'],
  ['title', '"r"."title" ASC, "r"."id" ASC'],
  ['+title', '"r"."title" ASC, "r"."id" ASC'],
  ['-created', '"r"."created" DESC, "r"."id" DESC'],
  ['-views,title', '"r"."views" DESC, "r"."title" ASC, "r"."id" ASC'],
  ['title,-views', '"r"."title" ASC, "r"."views" DESC, "r"."id" DESC'],
  ['-id', '"r"."id" DESC'],
  ['@random', 'random(), "r"."id" ASC'],
  ['-@random', 'random(), "r"."id" ASC'],
  ['author.name', 'COALESCE((SELECT "r1"."name" FROM "users" "r1" WHERE "r1"."id" = "r"."author"), \'\') ASC, "r"."id" ASC'],
  ['-author.best.age', '(SELECT "r2"."age" FROM "users" "r2" WHERE "r2"."id" = (SELECT "r1"."best" FROM "users" "r1" WHERE "r1"."id" = "r"."author")) DESC, "r"."id" DESC'],
  ['meta,publishedAt', '"r"."meta" ASC, "r"."publishedAt" ASC, "r"."id" ASC'],
];

const sortErrors: [sort: string, message: string][] = [
  ['nope', 'Invalid sort: unknown field "nope".'],
  ['secret', 'Invalid sort: unknown field "secret".'],
  ['author.token', 'Invalid sort: unknown field "author.token".'],
  ['tags', 'Invalid sort: "tags" is multi-valued.'],
  ['editors.name', 'Invalid sort: "editors.name" goes through the multi-valued relation "editors".'],
  ['comments_via_post.text', 'Invalid sort: "comments_via_post.text" goes through the multi-valued relation "comments_via_post".'],
  ['title:lower', 'Invalid sort: unknown field "title:lower".'],
  ['title"; DROP TABLE posts; --', 'Invalid sort: unknown field "title\\"; DROP TABLE posts; --".'],
  ['a,b,c,d,e,f,g,h,i', 'Invalid sort: at most 8 fields.'],
];

describe('compileSort', () => {
  test.each(sortCases)('%j', (sort, sql) => {
    expect(compileSort(sort, postsContext())).toEqual({ sql, bindings: [] });
  });
  test.each(sortErrors)('%j is a 400', (sort, message) => {
    expect(() => compileSort(sort, postsContext())).toThrow(new BadRequestError(message, 'invalid_sort'));
    try {
      compileSort(sort, postsContext());
    } catch (error) {
      expect((error as BadRequestError).code).toBe('invalid_sort');
    }
  });
  test('superusers may sort on hidden fields; eight fields are fine', () => {
    expect(compileSort('-secret', postsContext({ mode: 'superuser' })).sql).toBe('"r"."secret" DESC, "r"."id" DESC');
    expect(compileSort('title,title,title,title,title,title,title,title', postsContext()).sql.split(',')).toHaveLength(9);
  });
});

const record = {
  id: 'p1',
  title: 'Hello',
  body: '<p>Hello   <b>big</b>\n world, this is long</p>',
  tags: ['a'],
  expand: {
    author: { id: 'u1', name: 'Alice', email: 'a@x' },
    comments_via_post: [
      { id: 'c1', text: 'hi', likes: 1 },
      { id: 'c2', text: 'yo', likes: 2 },
    ],
  },
};

const fieldCases: [param: string | undefined, expected: unknown][] = [
  [undefined, record],
  ['', record],
  ['id,title', { id: 'p1', title: 'Hello' }],
  [' id , nope ', { id: 'p1' }],
  ['*', record],
  ['-body,-expand', { id: 'p1', title: 'Hello', tags: ['a'] }],
  ['*,-body', { id: 'p1', title: 'Hello', tags: ['a'], expand: record.expand }],
  ['id,expand.author.name', { id: 'p1', expand: { author: { name: 'Alice' } } }],
  ['id,expand.comments_via_post.text', { id: 'p1', expand: { comments_via_post: [{ text: 'hi' }, { text: 'yo' }] } }],
  ['id,expand.author', { id: 'p1', expand: { author: record.expand.author } }],
  ['*,expand.author.*,-expand.author.email', { ...record, expand: { author: { id: 'u1', name: 'Alice' } } }],
  ['-expand.author.email', { ...record, expand: { author: { id: 'u1', name: 'Alice' }, comments_via_post: record.expand.comments_via_post } }],
  ['id,body:excerpt(10)', { id: 'p1', body: 'Hello big' }],
  ['id,body:excerpt(12,true)', { id: 'p1', body: 'Hello big wo...' }],
  ['id,body:excerpt(500,true)', { id: 'p1', body: 'Hello big world, this is long' }],
  [',,,', record],
];

describe('parseFields + applyFields', () => {
  test.each(fieldCases)('%j', (param, expected) => {
    expect(applyFields(record, parseFields(param))).toEqual(expected);
  });
  test('a list applies the selection to each item', () => {
    expect([record, record].map((r) => applyFields(r, parseFields('id')))).toEqual([{ id: 'p1' }, { id: 'p1' }]);
  });
  test('a malformed excerpt is a 400 invalid_fields', () => {
    expect(() => parseFields('body:excerpt(x)')).toThrow(BadRequestError);
    expect(() => parseFields('body:upper')).toThrow(BadRequestError);
  });
  test('a __proto__ key stays data', () => {
    const value = JSON.parse('{"__proto__": {"polluted": true}, "id": "x"}') as Record<string, unknown>;
    const projected = applyFields(value, parseFields('*')) as Record<string, unknown>;
    expect(Object.getPrototypeOf(projected)).toBe(Object.prototype);
    expect(Object.keys(projected)).toEqual(['__proto__', 'id']);
  });
  test('excerpt counts code points', () => {
    expect(excerpt('🚀🚀🚀', { max: 2, ellipsis: true })).toBe('🚀🚀...');
  });
});

function toPlain(tree: ExpandTree): unknown {
  return Object.fromEntries([...tree].map(([k, v]) => [k, toPlain(v)]));
}

describe('parseExpand', () => {
  test.each([
    [undefined, {}],
    ['', {}],
    ['author', { author: {} }],
    ['author, editors', { author: {}, editors: {} }],
    ['author.best,author.friends,author', { author: { best: {}, friends: {} } }],
    ['author..best,,', { author: { best: {} } }],
    ['a.b.c.d.e.f.g.h', { a: { b: { c: { d: { e: { f: {} } } } } } }],
    ['comments_via_post.author', { comments_via_post: { author: {} } }],
    ['author"; DROP,ok', { ok: {} }],
  ])('%j', (param, expected) => {
    expect(toPlain(parseExpand(param))).toEqual(expected);
  });
  test('at most 100 paths are read', () => {
    const param = Array.from({ length: 500 }, (_, i) => `r${i}`).join(',');
    expect(parseExpand(param).size).toBe(100);
  });
});

describe('resolveRelation', () => {
  test('fields, back-relations, unknown and hidden', () => {
    expect(resolveRelation({ registry, collection: posts, name: 'author' })).toMatchObject({ kind: 'field', target: { name: 'users' } });
    expect(resolveRelation({ registry, collection: posts, name: 'comments_via_post' })).toMatchObject({ kind: 'back', collection: { name: 'comments' }, field: { name: 'post' } });
    expect(resolveRelation({ registry, collection: posts, name: 'bookmarks_via_posts' })).toMatchObject({ kind: 'back', field: { multiple: true } });
    expect(resolveRelation({ registry, collection: users, name: 'posts_via_author' })).toMatchObject({ kind: 'back' });
    expect(resolveRelation({ registry, collection: posts, name: 'title' })).toBeUndefined();
    expect(resolveRelation({ registry, collection: posts, name: 'nope_via_post' })).toBeUndefined();
    expect(resolveRelation({ registry, collection: posts, name: 'nope' })).toBeUndefined();
  });
});

describe('LruCache', () => {
  test('evicts the least recently used entry', () => {
    const cache = new LruCache<string, number>(2);
    cache.set('a', 1);
    cache.set('b', 2);
    expect(cache.get('a')).toBe(1);
    cache.set('c', 3);
    expect(cache.has('b')).toBe(false);
    expect(cache.get('a')).toBe(1);
    expect(cache.get('c')).toBe(3);
    expect(cache.size).toBe(2);
    cache.clear();
    expect(cache.size).toBe(0);
  });
});

describe('date literals', () => {
  test.each([
    ['2024', '2024-01-01T00:00:00.000Z'],
    ['2024-05', '2024-05-01T00:00:00.000Z'],
    ['2024-05-01', '2024-05-01T00:00:00.000Z'],
    ['2024-05-01 10', '2024-05-01T10:00:00.000Z'],
    ['2024-05-01 10:30', '2024-05-01T10:30:00.000Z'],
    ['2024-05-01 10:30:15', '2024-05-01T10:30:15.000Z'],
    ['2024-05-01 10:30:15.123Z', '2024-05-01T10:30:15.123Z'],
    ['2024-05-01T10:30:15.123456789Z', '2024-05-01T10:30:15.123Z'],
    ['2024-05-01T10:30:00+02:00', '2024-05-01T08:30:00.000Z'],
    ['2024-05-01T10:30:00-0130', '2024-05-01T12:00:00.000Z'],
    ['2024-02-29', '2024-02-29T00:00:00.000Z'],
  ])('%s', (text, iso) => {
    expect(parseDateLiteral(text)?.toISOString()).toBe(iso);
  });
  test.each(['', 'x', '2024-13', '2023-02-29', '2024-05-01 24:00', '2024-05-01T10:60', '24-05-01', '2024-5-1', '2024-05-01T10:00:00+25:00'])('%j is not a date', (text) => {
    expect(parseDateLiteral(text)).toBeUndefined();
  });
  test('record format', () => {
    expect(formatRecordDate(new Date('2024-05-01T10:00:00Z'))).toBe('2024-05-01 10:00:00.000Z');
  });
});
