import type { CollectionDefinition } from '../../lib/index.js';
import type { TestApp } from './test-app.js';
import { OPEN_RULES } from './open-rules.js';

/**
 * Collections and deterministic seed data for the query-language suites (spec/integration/query-*).
 * Every record has a fixed id so tests can assert exact sets; `created` is set explicitly so the
 * default order is known.
 */

export const ROOT = { Authorization: 'token-root' };
export const ALICE = { Authorization: 'token-alice' };
export const BOB = { Authorization: 'token-bob' };

/** People ids. alice and bob are the ids of the test identities (spec/support/test-app.ts). */
export const P = {
  alice: 'aliceaaaaaaaaaa',
  bob: 'bobbbbbbbbbbbbb',
  carol: 'carolcccccccccc',
  dave: 'daveddddddddddd',
  eve: 'eveeeeeeeeeeeee',
  frank: 'frankffffffffff',
  grace: 'gracegggggggggg',
} as const;

/** Article ids, in default (created) order. */
export const A = {
  a1: 'art000000000001',
  a2: 'art000000000002',
  a3: 'art000000000003',
  a4: 'art000000000004',
  a5: 'art000000000005',
  a6: 'art000000000006',
} as const;
export const ALL_ARTICLES = Object.values(A);

/** Remark ids (back-relation `remarks_via_article`). */
export const R = {
  r1: 'rem000000000001',
  r2: 'rem000000000002',
  r3: 'rem000000000003',
  r4: 'rem000000000004',
  r5: 'rem000000000005',
} as const;

/**
 * people: a chain alice -> bob -> carol -> dave -> eve -> frank -> grace through `next`
 * (for relation hop limits); articles: every field type; remarks: back-relation with cascade;
 * events: a date field for the macros; hostile: text seeded with hostile content.
 */
export function queryCollections(): CollectionDefinition[] {
  return [
    {
      name: 'people',
      fields: [
        { name: 'name', type: 'text' },
        { name: 'age', type: 'number' },
        { name: 'role', type: 'select', values: ['editor', 'reader'] },
        { name: 'next', type: 'relation', collection: 'people' },
        { name: 'secret', type: 'text', hidden: true },
      ],
      rules: OPEN_RULES,
    },
    {
      name: 'articles',
      fields: [
        { name: 'title', type: 'text' },
        { name: 'body', type: 'text' },
        { name: 'views', type: 'number' },
        { name: 'rating', type: 'number' },
        { name: 'published', type: 'bool' },
        { name: 'publishedAt', type: 'date' },
        { name: 'category', type: 'select', values: ['news', 'howto'] },
        { name: 'tags', type: 'select', values: ['a', 'b', 'c', 'a_b'], maxSelect: 4 },
        { name: 'meta', type: 'json' },
        { name: 'author', type: 'relation', collection: 'people' },
        { name: 'editors', type: 'relation', collection: 'people', maxSelect: 5 },
        { name: 'secret', type: 'text', hidden: true },
      ],
      rules: OPEN_RULES,
    },
    {
      name: 'remarks',
      fields: [
        { name: 'text', type: 'text' },
        { name: 'likes', type: 'number' },
        { name: 'article', type: 'relation', collection: 'articles', cascadeDelete: true },
      ],
      rules: OPEN_RULES,
    },
    {
      name: 'events',
      fields: [
        { name: 'label', type: 'text' },
        { name: 'at', type: 'date' },
      ],
      rules: OPEN_RULES,
    },
    {
      name: 'hostile',
      fields: [
        { name: 'text', type: 'text' },
        { name: 'n', type: 'number' },
      ],
      rules: OPEN_RULES,
    },
  ];
}

type Row = Record<string, unknown>;

const PEOPLE: Row[] = [
  // Created in reverse so that each `next` target already exists.
  { id: P.grace, name: 'Grace', next: '' },
  { id: P.frank, name: 'Frank', next: P.grace },
  { id: P.eve, name: 'Eve', next: P.frank },
  { id: P.dave, name: 'Dave', next: P.eve },
  { id: P.carol, name: 'Carol', age: 40, role: 'editor', next: P.dave },
  { id: P.bob, name: 'Bob', age: 25, role: 'reader', next: P.carol },
  { id: P.alice, name: 'Alice', age: 30, role: 'editor', next: P.bob, secret: 'pa' },
];

/**
 * The articles. Summary (views / published / category / tags / author / editors):
 * a1 10 T news [a,b] alice [alice,bob]; a2 20 F howto [a] bob [bob]; a3 0 T '' [] '' [];
 * a4 null F news [b,c] carol [carol,alice]; a5 5 T howto [c,a_b] alice [alice]; a6 15 F news [a,b,c] dave [dave,bob].
 */
export const ARTICLES: Row[] = [
  {
    id: A.a1, title: 'Learning Rust', body: 'Intro to systems', views: 10, rating: 4.5, published: true,
    publishedAt: '2024-05-01 10:00:00.000Z', category: 'news', tags: ['a', 'b'], meta: { k: 1 },
    author: P.alice, editors: [P.alice, P.bob], secret: 'alpha',
  },
  {
    id: A.a2, title: 'rust tips', body: '', views: 20, published: false,
    publishedAt: '2024-05-31 23:59:59.999Z', category: 'howto', tags: ['a'], meta: 'x',
    author: P.bob, editors: [P.bob], secret: '',
  },
  {
    id: A.a3, title: 'Go Basics', body: 'a_b literal', views: 0, rating: 1, published: true,
    publishedAt: '2024-06-01 00:00:00.000Z', category: '', tags: [], meta: null,
    author: '', editors: [], secret: 'beta',
  },
  {
    id: A.a4, title: '100% Pure', body: 'axb', rating: 3, published: false,
    category: 'news', tags: ['b', 'c'], meta: [],
    author: P.carol, editors: [P.carol, P.alice],
  },
  {
    id: A.a5, title: 'Under_score', body: 'C:\\dir', views: 5, rating: 2.5, published: true,
    publishedAt: '2023-12-31 23:59:59.000Z', category: 'howto', tags: ['c', 'a_b'], meta: { k: 2 },
    author: P.alice, editors: [P.alice], secret: 'alpha2',
  },
  {
    id: A.a6, title: 'MiXeD CaSe', body: 'rust inside', views: 15, published: false,
    publishedAt: '2024-05-15 12:00:00.000Z', category: 'news', tags: ['a', 'b', 'c'], meta: true,
    author: P.dave, editors: [P.dave, P.bob],
  },
];

const REMARKS: Row[] = [
  { id: R.r1, article: A.a1, text: 'Great post', likes: 5 },
  { id: R.r2, article: A.a1, text: 'xyz spam', likes: 50 },
  { id: R.r3, article: A.a2, text: 'nice', likes: 20 },
  { id: R.r4, article: A.a2, text: 'Nice too', likes: 30 },
  { id: R.r5, article: A.a6, text: 'meh', likes: 1 },
];

/** Creates `rows` through the API as superuser, failing loudly on any refusal. */
export async function createRows(app: TestApp, collection: string, rows: readonly Row[]): Promise<void> {
  for (const row of rows) {
    const res = await app.http.post(`/backend/api/collections/${collection}/records`).set(ROOT).send(row);
    if (res.status !== 200) throw new Error(`seeding ${collection} ${JSON.stringify(row)} failed: ${res.status} ${JSON.stringify(res.body)}`);
  }
}

/** Sets `created` of the given ids to consecutive days from 2024-01-01, in the order given. */
export async function setCreatedInOrder(app: TestApp, table: string, ids: readonly string[]): Promise<void> {
  for (let i = 0; i < ids.length; i++) {
    await app.database.db(table).where({ id: ids[i] }).update({ created: new Date(Date.UTC(2024, 0, 1 + i)).toISOString() });
  }
}

/** Seeds people, articles and remarks (fixed ids, created in id order). */
export async function seedQueryData(app: TestApp): Promise<void> {
  await createRows(app, 'people', PEOPLE);
  await createRows(app, 'articles', ARTICLES);
  await createRows(app, 'remarks', REMARKS);
  await setCreatedInOrder(app, 'articles', ALL_ARTICLES);
  await setCreatedInOrder(app, 'people', Object.values(P));
}

/** Response of a list call: status and, on success, the ids in order. */
export interface ListOutcome {
  status: number;
  body: Record<string, unknown>;
  ids: string[];
}

/** GET a list with the given query parameters (supertest encodes them) and the given headers. */
export async function listRecords(
  app: TestApp,
  collection: string,
  query: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<ListOutcome> {
  const res = await app.http.get(`/backend/api/collections/${collection}/records`).query({ perPage: '500', ...query }).set(headers);
  const items = (res.body?.items ?? []) as { id: string }[];
  return { status: res.status, body: res.body as Record<string, unknown>, ids: res.status === 200 ? items.map((r) => r.id) : [] };
}

/** The ids a filter selects, sorted; fails the test (with the body) unless the answer is 200. */
export async function filterIds(
  app: TestApp,
  collection: string,
  filter: string,
  options: { headers?: Record<string, string>; query?: Record<string, string> } = {},
): Promise<string[]> {
  const out = await listRecords(app, collection, { filter, ...options.query }, options.headers);
  if (out.status !== 200) throw new Error(`filter ${JSON.stringify(filter)} answered ${out.status}: ${JSON.stringify(out.body)}`);
  return [...out.ids].sort();
}

/** Shorthand for an expected id set: `ids(A.a1, A.a5)` sorted. */
export function sorted(...ids: string[]): string[] {
  return [...ids].sort();
}

/** The error body every 400 must have. */
export function expectBadRequest(res: { status: number; body: unknown }, message?: string | RegExp): void {
  expect(res.status).toBe(400);
  expect(res.body).toEqual({ status: 400, message: expect.any(String), data: {} });
  if (typeof message === 'string') expect((res.body as { message: string }).message).toBe(message);
  else if (message) expect((res.body as { message: string }).message).toMatch(message);
}

/** Ids used by the rules suite. */
export const G = { red: 'groupred0000000', blue: 'groupblue000000' } as const;

/**
 * Collections whose rules are expressions (spec/integration/query-rules.test.ts):
 * - docs: list hides drafts and classified records (a hidden field) except from their owner; view
 *   needs ownership or membership of the record's group (@collection.members); create reads the
 *   new row; update forbids changing `owner` to someone else (@request.body); delete reads a hidden field.
 * - notes: guests vs users, and a create rule on @request.body.
 * - tasks / subtasks: bulk delete, with a list rule that narrows and a cascading relation.
 * - archive: a null delete rule.
 */
export function ruleCollections(): CollectionDefinition[] {
  return [
    { name: 'people', fields: [{ name: 'name', type: 'text' }], rules: OPEN_RULES },
    { name: 'groups', fields: [{ name: 'name', type: 'text' }], rules: OPEN_RULES },
    {
      name: 'members',
      fields: [
        { name: 'user', type: 'relation', collection: 'people' },
        { name: 'group', type: 'relation', collection: 'groups' },
      ],
      rules: OPEN_RULES,
    },
    {
      name: 'docs',
      fields: [
        { name: 'title', type: 'text' },
        { name: 'status', type: 'select', values: ['draft', 'published'] },
        { name: 'owner', type: 'relation', collection: 'people' },
        { name: 'group', type: 'relation', collection: 'groups' },
        { name: 'views', type: 'number' },
        { name: 'secret', type: 'text', hidden: true },
      ],
      rules: {
        list: "(status = 'published' && secret != 'classified') || owner = @request.auth.id",
        view: '@request.auth.id != "" && (owner = @request.auth.id || (@collection.members.user = @request.auth.id && @collection.members.group = group))',
        create: '@request.auth.id != "" && owner = @request.auth.id',
        update: 'owner = @request.auth.id && (@request.body.owner:isset = false || @request.body.owner = @request.auth.id)',
        delete: "owner = @request.auth.id && secret != 'keep'",
      },
    },
    {
      name: 'notes',
      fields: [
        { name: 'text', type: 'text' },
        { name: 'public', type: 'bool' },
        { name: 'level', type: 'number' },
      ],
      rules: {
        list: 'public = true || @request.auth.id != ""',
        view: 'public = true || @request.auth.id != ""',
        create: '@request.auth.id != "" && @request.body.text != \'forbidden\' && (@request.body.level:isset = false || @request.body.level <= 5)',
        update: "@request.auth.role = 'editor'",
        delete: "@request.auth.role = 'editor' && @request.method = 'DELETE'",
      },
    },
    {
      name: 'tasks',
      fields: [
        { name: 'title', type: 'text' },
        { name: 'owner', type: 'relation', collection: 'people' },
        { name: 'shared', type: 'bool' },
      ],
      rules: {
        list: 'owner = @request.auth.id || shared = true',
        view: 'owner = @request.auth.id || shared = true',
        create: '',
        update: 'owner = @request.auth.id',
        delete: 'owner = @request.auth.id',
      },
    },
    {
      name: 'subtasks',
      fields: [
        { name: 'text', type: 'text' },
        { name: 'task', type: 'relation', collection: 'tasks', cascadeDelete: true },
      ],
      rules: OPEN_RULES,
    },
    {
      name: 'archive',
      fields: [{ name: 'text', type: 'text' }],
      rules: { list: '', view: '', create: '', update: '', delete: null },
    },
  ];
}
