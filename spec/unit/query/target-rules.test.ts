import { describe, expect, test } from '@jest/globals';
import { compileFilter, type FilterContext } from '../../../lib/query/compile-filter.js';
import { compileSort } from '../../../lib/query/compile-sort.js';
import { alice, guest, NOW } from './query-test-schema.js';
import { guardedRegistry } from './target-rules-schema.js';

/**
 * Target view rules: for a non-superuser, every relation hop of a client filter or sort sees only
 * the target's records that pass the target's view rule for the same request. Contexts are on
 * `posts` (alias "r") of target-rules-schema.ts, as alice unless said otherwise.
 */
type Case = [filter: string, sql: string, bindings: unknown[]];

const A = 'alice0000000001';
const posts = guardedRegistry.get('posts')!;
const comments = guardedRegistry.get('comments')!;

function context(overrides: Partial<FilterContext> = {}): FilterContext {
  return { registry: guardedRegistry, collection: posts, alias: 'r', request: alice, mode: 'user', now: NOW, ...overrides };
}

const userCases: Case[] = [
  // users.view = `id = @request.auth.id`, ANDed into the scalar subquery of the hop
  ["author.email ~ 'admin@'", "COALESCE((SELECT \"r1\".\"email\" FROM \"users\" \"r1\" WHERE \"r1\".\"id\" = \"r\".\"author\" AND (\"r1\".\"id\" = ?::text)), '') ILIKE ?::text", [A, "%admin@%"]],
  // two hops: each applies the rule to its own alias; bindings in text order (inner hop first)
  ["author.best.name = 'x'", "COALESCE((SELECT \"r2\".\"name\" FROM \"users\" \"r2\" WHERE \"r2\".\"id\" = (SELECT \"r1\".\"best\" FROM \"users\" \"r1\" WHERE \"r1\".\"id\" = \"r\".\"author\" AND (\"r1\".\"id\" = ?::text)) AND (\"r2\".\"id\" = ?::text)), '') = ?::text", [A, A, "x"]],
  ["author.friends ?= 'u2'", "EXISTS (SELECT 1 FROM (SELECT 1) AS \"r3\" LEFT JOIN LATERAL jsonb_array_elements_text(COALESCE((SELECT \"r1\".\"friends\" FROM \"users\" \"r1\" WHERE \"r1\".\"id\" = \"r\".\"author\" AND (\"r1\".\"id\" = ?::text)), '[]'::jsonb)) AS \"r2\"(\"v\") ON TRUE WHERE COALESCE(\"r2\".\"v\", '') = ?::text)", [A, "u2"]],
  // a multi-valued relation: the rule goes into the LEFT JOIN's ON, so hidden targets read as empty rows
  ["editors.name ?= 'x'", "EXISTS (SELECT 1 FROM (SELECT 1) AS \"r3\" LEFT JOIN LATERAL jsonb_array_elements_text(\"r\".\"editors\") AS \"r1\"(\"v\") ON TRUE LEFT JOIN \"users\" \"r2\" ON \"r2\".\"id\" = \"r1\".\"v\" AND (\"r2\".\"id\" = ?::text) WHERE COALESCE(\"r2\".\"name\", '') = ?::text)", [A, "x"]],
  // null view rule: the hop sees nothing (FALSE), like a missing target
  ["vault.code = 'x'", "COALESCE((SELECT \"r1\".\"code\" FROM \"vaults\" \"r1\" WHERE \"r1\".\"id\" = \"r\".\"vault\" AND (FALSE)), '') = ?::text", ["x"]],
  ["comments_via_post.text ?= 'hi'", "EXISTS (SELECT 1 FROM (SELECT 1) AS \"r2\" LEFT JOIN \"comments\" \"r1\" ON \"r1\".\"post\" = \"r\".\"id\" AND (FALSE) WHERE COALESCE(\"r1\".\"text\", '') = ?::text)", ["hi"]],
  // :length counts only visible records
  ["comments_via_post:length > 0", "(SELECT CAST(count(*) AS double precision) FROM \"comments\" \"r2\" WHERE \"r2\".\"post\" = \"r\".\"id\" AND (FALSE)) > ?::double precision", [0]],
  // a view rule that itself goes through a relation: compiled in rule mode, so its hop into users is NOT restricted (depth 1)
  ["bookmarks_via_posts.user ?= 'u1'", "EXISTS (SELECT 1 FROM (SELECT 1) AS \"r3\" LEFT JOIN \"bookmarks\" \"r1\" ON \"r1\".\"posts\" @> jsonb_build_array(\"r\".\"id\") AND ((\"r1\".\"user\" = ?::text OR COALESCE((SELECT \"r2\".\"best\" FROM \"users\" \"r2\" WHERE \"r2\".\"id\" = \"r1\".\"user\"), '') = ?::text)) WHERE COALESCE(\"r1\".\"user\", '') = ?::text)", [A, A, "u1"]],
  // the nested rule shares the outer alias allocator: r1..r6 all distinct; posts.view is "" (no condition)
  ["author.email = 'e' && bookmarks_via_posts.posts.title ?= 't'", "(COALESCE((SELECT \"r1\".\"email\" FROM \"users\" \"r1\" WHERE \"r1\".\"id\" = \"r\".\"author\" AND (\"r1\".\"id\" = ?::text)), '') = ?::text AND EXISTS (SELECT 1 FROM (SELECT 1) AS \"r6\" LEFT JOIN \"bookmarks\" \"r2\" ON \"r2\".\"posts\" @> jsonb_build_array(\"r\".\"id\") AND ((\"r2\".\"user\" = ?::text OR COALESCE((SELECT \"r3\".\"best\" FROM \"users\" \"r3\" WHERE \"r3\".\"id\" = \"r2\".\"user\"), '') = ?::text)) LEFT JOIN LATERAL jsonb_array_elements_text(\"r2\".\"posts\") AS \"r4\"(\"v\") ON TRUE LEFT JOIN \"posts\" \"r5\" ON \"r5\".\"id\" = \"r4\".\"v\" WHERE COALESCE(\"r5\".\"title\", '') = ?::text))", [A, "e", A, A, "t"]],
  // no hop: the record's own fields are never restricted
  ["author = 'u1' && editors ?= 'u2'", "(\"r\".\"author\" = ?::text AND EXISTS (SELECT 1 FROM (SELECT 1) AS \"r2\" LEFT JOIN LATERAL jsonb_array_elements_text(\"r\".\"editors\") AS \"r1\"(\"v\") ON TRUE WHERE COALESCE(\"r1\".\"v\", '') = ?::text))", ["u1", "u2"]],
];

/** The same filters with no target rule (superusers, rules). */
const unrestricted: Case[] = [
  ["author.email ~ 'admin@'", "COALESCE((SELECT \"r1\".\"email\" FROM \"users\" \"r1\" WHERE \"r1\".\"id\" = \"r\".\"author\"), '') ILIKE ?::text", ["%admin@%"]],
  ["vault.code = 'x'", "COALESCE((SELECT \"r1\".\"code\" FROM \"vaults\" \"r1\" WHERE \"r1\".\"id\" = \"r\".\"vault\"), '') = ?::text", ["x"]],
  ["comments_via_post:length > 0", "(SELECT CAST(count(*) AS double precision) FROM \"comments\" \"r2\" WHERE \"r2\".\"post\" = \"r\".\"id\") > ?::double precision", [0]],
  ["bookmarks_via_posts.user ?= 'u1'", "EXISTS (SELECT 1 FROM (SELECT 1) AS \"r2\" LEFT JOIN \"bookmarks\" \"r1\" ON \"r1\".\"posts\" @> jsonb_build_array(\"r\".\"id\") WHERE COALESCE(\"r1\".\"user\", '') = ?::text)", ["u1"]],
];

describe('target view rules in client filters', () => {
  test.each(userCases)('%s', (filter, sql, bindings) => {
    expect(compileFilter(filter, context())).toEqual({ sql, bindings });
  });

  test('a guest never matches a rule comparing a field with his (empty) identity: the hop sees nothing', () => {
    expect(compileFilter("author.email ~ 'admin@'", context({ request: guest }))).toEqual({
      sql: "COALESCE((SELECT \"r1\".\"email\" FROM \"users\" \"r1\" WHERE \"r1\".\"id\" = \"r\".\"author\" AND (FALSE)), '') ILIKE ?::text",
      bindings: ['%admin@%'],
    });
  });

  test('a "" view rule adds no condition', () => {
    expect(compileFilter("post.title = 'x' && post.author.name = 'y'", context({ collection: comments }))).toEqual({
      sql: "(COALESCE((SELECT \"r1\".\"title\" FROM \"posts\" \"r1\" WHERE \"r1\".\"id\" = \"r\".\"post\"), '') = ?::text AND COALESCE((SELECT \"r3\".\"name\" FROM \"users\" \"r3\" WHERE \"r3\".\"id\" = (SELECT \"r2\".\"author\" FROM \"posts\" \"r2\" WHERE \"r2\".\"id\" = \"r\".\"post\") AND (\"r3\".\"id\" = ?::text)), '') = ?::text)",
      bindings: ['x', A, 'y'],
    });
  });

  test.each(unrestricted)('superuser mode: %s', (filter, sql, bindings) => {
    expect(compileFilter(filter, context({ mode: 'superuser' }))).toEqual({ sql, bindings });
  });

  test.each(unrestricted)('rule mode: %s', (filter, sql, bindings) => {
    expect(compileFilter(filter, context({ mode: 'rule' }))).toEqual({ sql, bindings });
  });

  test.each(userCases)('%s has one binding per "?" and never "??"', (filter) => {
    const { sql, bindings } = compileFilter(filter, context());
    expect(sql.split('?').length - 1).toBe(bindings.length);
    expect(sql).not.toContain('??');
  });
});

describe('target view rules in sort', () => {
  const restricted = {
    sql: "COALESCE((SELECT \"r1\".\"name\" FROM \"users\" \"r1\" WHERE \"r1\".\"id\" = \"r\".\"author\" AND (\"r1\".\"id\" = ?::text)), '') ASC, COALESCE((SELECT \"r2\".\"code\" FROM \"vaults\" \"r2\" WHERE \"r2\".\"id\" = \"r\".\"vault\" AND (FALSE)), '') DESC, \"r\".\"id\" DESC",
    bindings: [A],
  };
  const open = {
    sql: "COALESCE((SELECT \"r1\".\"name\" FROM \"users\" \"r1\" WHERE \"r1\".\"id\" = \"r\".\"author\"), '') ASC, COALESCE((SELECT \"r2\".\"code\" FROM \"vaults\" \"r2\" WHERE \"r2\".\"id\" = \"r\".\"vault\"), '') DESC, \"r\".\"id\" DESC",
    bindings: [],
  };
  const base = { registry: guardedRegistry, collection: posts, alias: 'r', mode: 'user' as const, now: NOW };

  test('with the request, a non-superuser hop sees only viewable targets (null rule: none)', () => {
    expect(compileSort('author.name,-vault.code', { ...base, request: alice })).toEqual(restricted);
  });
  test('two-hop sort: bindings of both hops in order', () => {
    expect(compileSort('-author.best.age', { ...base, request: alice })).toEqual({
      sql: "(SELECT \"r2\".\"age\" FROM \"users\" \"r2\" WHERE \"r2\".\"id\" = (SELECT \"r1\".\"best\" FROM \"users\" \"r1\" WHERE \"r1\".\"id\" = \"r\".\"author\" AND (\"r1\".\"id\" = ?::text)) AND (\"r2\".\"id\" = ?::text)) DESC, \"r\".\"id\" DESC",
      bindings: [A, A],
    });
  });
  test('a guest sorting through an owner-only target sees no target at all', () => {
    expect(compileSort('-author.best.age', { ...base, request: guest })).toEqual({
      sql: "(SELECT \"r2\".\"age\" FROM \"users\" \"r2\" WHERE \"r2\".\"id\" = (SELECT \"r1\".\"best\" FROM \"users\" \"r1\" WHERE \"r1\".\"id\" = \"r\".\"author\" AND (FALSE)) AND (FALSE)) DESC, \"r\".\"id\" DESC",
      bindings: [],
    });
  });
  test('superusers, and callers that pass no request, are not restricted', () => {
    expect(compileSort('author.name,-vault.code', { ...base, request: alice, mode: 'superuser' })).toEqual(open);
    expect(compileSort('author.name,-vault.code', base)).toEqual(open);
  });
  test('fields of the collection itself carry no bindings', () => {
    expect(compileSort('-title,author', { ...base, request: alice })).toEqual({ sql: '"r"."title" DESC, "r"."author" ASC, "r"."id" ASC', bindings: [] });
  });
});
