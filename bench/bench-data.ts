/**
 * What the bench's data looks like, shared by the runner, the two servers and the load generator:
 * the collections, the seeded ids (computable anywhere, so no process has to ask the database for
 * them) and the marker that tells the rows the bench itself wrote apart from the seed.
 */
import { createHash } from 'node:crypto';
import type { CollectionDefinition } from '../lib/index.js';

/** Fixed collection ids, so that the hand-written baseline can answer with the same JSON. */
export const USERS_ID = 'pbc_bench_users';
export const POSTS_ID = 'pbc_bench_posts';
export const USER_COUNT = 1000;
/** Every record the bench writes (create, upload, batch, the posts update and delete prepare) has a title starting with this; the cleanup deletes them. */
export const WRITE_MARKER = 'bench-write';
/** The only thumbnail size the `cover` field allows (and the one scenario 6 downloads). */
export const THUMB = '100x100';
/** Signs file tokens; the bench never uses them, but a fixed secret keeps the data dir throwaway. */
export const FILE_TOKEN_SECRET = 'recordbase-bench-file-token-secret-0123456789';

/** The bench's collections: users, and posts with an `author` relation and a `cover` image with thumbnails. */
export const benchCollections: CollectionDefinition[] = [
  {
    name: 'users',
    id: USERS_ID,
    fields: [
      { name: 'name', type: 'text', required: true, max: 100 },
      { name: 'email', type: 'email' },
    ],
    rules: { list: '', view: '', create: null, update: null, delete: null },
  },
  {
    name: 'posts',
    id: POSTS_ID,
    fields: [
      { name: 'title', type: 'text', required: true, min: 1, max: 200 },
      { name: 'body', type: 'text', max: 10000 },
      { name: 'views', type: 'number', min: 0, onlyInt: true },
      { name: 'published', type: 'bool' },
      { name: 'author', type: 'relation', collection: 'users', required: true },
      { name: 'cover', type: 'file', maxSize: 5 * 1024 * 1024, mimeTypes: ['image/png', 'image/jpeg', 'image/webp'], thumbs: [THUMB] },
    ],
    // Anyone may update and delete: the update and delete scenarios measure the write, not an identity.
    rules: { list: '', view: '', create: '', update: '', delete: '' },
  },
];

/** The search index's language (issue 47's search cell). */
export const SEARCH_LANGUAGE = 'english';

/**
 * BENCH_SEARCH_INDEX=1 (set by the runner when the search cell runs): posts declare a search index
 * over title and body, in schemas of their own (benchSchemaPrefix), so that the other cells' tables
 * keep their shape and their writes do not pay for a vector they never read.
 */
export function searchIndexed(): boolean {
  return process.env.BENCH_SEARCH_INDEX === '1';
}

/** The collections of this run: benchCollections, and the search index where searchIndexed. */
export function benchCollectionsOfRun(): CollectionDefinition[] {
  if (!searchIndexed()) return benchCollections;
  return benchCollections.map((c) => (c.id === POSTS_ID && c.type !== 'view' ? { ...c, indexes: [...(c.indexes ?? []), { search: ['title', 'body'], language: SEARCH_LANGUAGE }] } : c));
}

/**
 * The field view rules BENCH_FIELD_RULES adds (issue 46's cells, docs/benchmarks.md); the bench's
 * requests are a guest's, and each rule passes on every record the cells read, so both servers
 * answer the same JSON: the cells price evaluating the rules, not answering less.
 * - `1`: two rules on posts over the record and the caller (the cell), one on users (what
 *   `expand=author` presents);
 * - `relation`: the same, but posts' second rule reads the author through the relation, a join
 *   for every row the filter reads.
 */
const FIELD_VIEW_RULES: Readonly<Record<string, Readonly<Record<string, Readonly<Record<string, string>>>>>> = {
  '1': {
    posts: { body: 'published = true || author = @request.auth.id', views: "author = @request.auth.id || title != ''" },
    users: { email: "id = @request.auth.id || name != ''" },
  },
  relation: {
    posts: { body: 'published = true || author = @request.auth.id', views: "author.name != ''" },
    users: { email: "id = @request.auth.id || name != ''" },
  },
};

/** The bench's collections with the field view rules of BENCH_FIELD_RULES (`1` or `relation`). */
export function withFieldRules(collections: readonly CollectionDefinition[], variant: string): CollectionDefinition[] {
  const byCollection = FIELD_VIEW_RULES[variant];
  if (!byCollection) throw new Error(`BENCH_FIELD_RULES must be 1 or relation, got "${variant}"`);
  return collections.map((collection) => {
    const rules = byCollection[collection.name];
    if (!rules || collection.type === 'view') return collection;
    return { ...collection, fields: collection.fields?.map((field) => (rules[field.name] === undefined ? field : { ...field, rules: { view: rules[field.name] } })) };
  });
}

function hashId(prefix: string, n: number): string {
  return prefix + createHash('md5').update(`${prefix}${n}`).digest('hex').slice(0, 14);
}

/** The id of seeded user n (1-based): `u` + 14 hex digits of md5('u' + n), the same as the seed's SQL. */
export function seededUserId(n: number): string {
  return hashId('u', n);
}

/** The id of seeded post n (1-based), as the seed's SQL makes it. */
export function seededPostId(n: number): string {
  return hashId('p', n);
}

/** The first letter of the ids of the posts the update and delete scenarios prepare (seeded ones start with `p`). */
export const PREPARED_ID_PREFIX = { update: 'e', delete: 'd' } as const;

/**
 * The id of prepared post n of a kind: the prefix and 14 hex digits of md5(prefix + n), the same as
 * `preparedIdSql` makes it, so that the load generator can name them without asking the database.
 */
export function preparedPostId(kind: keyof typeof PREPARED_ID_PREFIX, n: number): string {
  return hashId(PREPARED_ID_PREFIX[kind], n);
}

/**
 * The prefix of the bench's schemas (and of its embedded seed folders): BENCH_SCHEMA_PREFIX,
 * `rb_bench_` by default (`rb_bench_search_` with the search index, whose generated column and
 * index the other cells' tables do not have). Benches run by different people on one Postgres use different prefixes,
 * so that nobody reseeds, cleans or drops another's tables.
 */
export function benchSchemaPrefix(): string {
  const prefix = process.env.BENCH_SCHEMA_PREFIX || (searchIndexed() ? 'rb_bench_search_' : 'rb_bench_');
  if (!/^[a-z_][a-z0-9_]{0,40}$/.test(prefix)) throw new Error(`BENCH_SCHEMA_PREFIX must be lower-case letters, digits and _, got "${prefix}"`);
  return prefix;
}

/** The schema one data set lives in; one per size, so that both sizes stay cached side by side. */
export function benchSchema(rows: number): string {
  return `${benchSchemaPrefix()}${rows}`;
}
