import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { EventSource } from 'eventsource';
import knex from 'knex';
import PocketBase from 'pocketbase';
import { createRecordsRouter, SchemaError, type CollectionDefinition } from '../../lib/index.js';
import { createMemoryLogger, startSiblingRouter, startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines, testKnexLog } from '../support/test-database.js';

/**
 * Issue 47, search (docs/search.md): a search index declared beside the column indexes becomes a
 * generated tsvector and a GIN index; `?search=` matches it with websearch_to_tsquery, `-@rank`
 * orders by relevance, `fields=x:highlight` marks the matches; through HTTP, the SDK and the
 * server API. The attacks are in search-attacks.test.ts.
 */

const api = (path: string) => `/backend/api/collections/${path}`;
const ROOT = 'token-root';

const posts = (search: { search: string[]; language?: 'english' | 'simple' }): CollectionDefinition => ({
  name: 'posts',
  fields: [
    { name: 'title', type: 'text' },
    { name: 'body', type: 'editor' },
    { name: 'tag', type: 'text' },
  ],
  rules: { list: '', view: '', create: '', update: '', delete: '' },
  indexes: [{ fields: ['tag'] }, search],
});

const plain: CollectionDefinition = { name: 'plain', fields: [{ name: 'title', type: 'text' }], rules: { list: '', view: '' } };
// A view of every column: the search column is not one of its fields.
const everything: CollectionDefinition = { name: 'everything', type: 'view', viewQuery: 'SELECT * FROM posts', rules: { list: '', view: '' } };

describe.each(testEngines())('search (%s)', (engine) => {
  let app: TestApp;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    app = await startTestApp(engine, { collections: [posts({ search: ['title', 'body'], language: 'english' }), plain, everything] });
    const rows = {
      fast: { title: 'Fast cars', body: '<p>A review of cars that run fast.</p>', tag: 'a' },
      slow: { title: 'Slow boats', body: '<p>Boats, and a <b>car</b> ferry.</p>', tag: 'b' },
      bodyOnly: { title: 'Weekly notes', body: '<p>Fast food and a fast car.</p>', tag: 'a' },
      other: { title: 'Gardening', body: '<p>Tomatoes & <script>alert(1)</script> roses</p>', tag: 'b' },
    };
    for (const [key, row] of Object.entries(rows)) {
      const res = await app.http.post(api('posts/records')).send(row);
      expect(res.status).toBe(200);
      ids[key] = res.body.id;
    }
  }, 60_000);

  afterAll(async () => {
    await app?.close();
  });

  const list = (query: Record<string, string>) => app.http.get(api('posts/records')).query(query);

  test('search matches words with stemming (english): "cars" finds "car"; totalItems counts the matches', async () => {
    const res = await list({ search: 'car' });
    expect(res.status).toBe(200);
    expect(new Set(res.body.items.map((r: { id: string }) => r.id))).toEqual(new Set([ids.fast, ids.slow, ids.bodyOnly]));
    expect(res.body.totalItems).toBe(3);
  });

  test('websearch syntax: quoted phrases, or, -word', async () => {
    const phrase = await list({ search: '"fast food"' });
    expect(phrase.body.items.map((r: { id: string }) => r.id)).toEqual([ids.bodyOnly]);
    const apart = await list({ search: '"run cars"' });
    expect(apart.body.items).toEqual([]);
    const either = await list({ search: 'boats or gardening', sort: 'title' });
    expect(either.body.items.map((r: { id: string }) => r.id)).toEqual([ids.other, ids.slow]);
    const without = await list({ search: 'car -boats', sort: 'title' });
    expect(without.body.items.map((r: { id: string }) => r.id)).toEqual([ids.fast, ids.bodyOnly]);
  });

  test('search combines with filter and paging', async () => {
    const res = await list({ search: 'car', filter: 'tag = "a"', perPage: '1', sort: 'title' });
    expect(res.body).toMatchObject({ page: 1, perPage: 1, totalItems: 2, totalPages: 2 });
    expect(res.body.items.map((r: { id: string }) => r.id)).toEqual([ids.fast]);
  });

  test('sort=-@rank puts the most relevant first (a match in the title, weighted A, before one in the body)', async () => {
    const res = await list({ search: 'fast', sort: '-@rank' });
    expect(res.status).toBe(200);
    expect(res.body.items.map((r: { id: string }) => r.id)).toEqual([ids.fast, ids.bodyOnly]);
    const ascending = await list({ search: 'fast', sort: '@rank' });
    expect(ascending.body.items.map((r: { id: string }) => r.id)).toEqual([ids.bodyOnly, ids.fast]);
  });

  test('-@rank ranks by each request\'s own search text (a compiled @rank sort is never reused)', async () => {
    const x = (await app.http.post(api('posts/records')).send({ title: 'zebra', body: 'yak yak yak', tag: 'rank' })).body.id;
    const y = (await app.http.post(api('posts/records')).send({ title: 'yak', body: 'zebra zebra zebra', tag: 'rank' })).body.id;
    try {
      // Symmetric records: each ranks first for the word in its title.
      const zebra = await list({ search: 'zebra', filter: 'tag = "rank"', sort: '-@rank' });
      expect(zebra.body.items.map((r: { id: string }) => r.id)).toEqual([x, y]);
      const yak = await list({ search: 'yak', filter: 'tag = "rank"', sort: '-@rank' });
      expect(yak.body.items.map((r: { id: string }) => r.id)).toEqual([y, x]);
    } finally {
      for (const id of [x, y]) await app.http.delete(api(`posts/records/${id}`));
    }
  });

  test('@rank without search, or search on a collection without a search index, is a clear 400', async () => {
    const rank = await list({ sort: '-@rank' });
    expect(rank.status).toBe(400);
    expect(rank.body.message).toBe('Invalid sort: @rank needs a search parameter.');
    const none = await app.http.get(api('plain/records')).query({ search: 'x' });
    expect(none.status).toBe(400);
    expect(none.body.message).toBe('Invalid search: the collection "plain" has no search index (docs/search.md).');
  });

  test('a blank search is no search', async () => {
    const res = await list({ search: '   ' });
    expect(res.status).toBe(200);
    expect(res.body.totalItems).toBe(4);
  });

  test('fields=title:highlight marks the matches in <mark> and escapes the rest; an editor field is its text', async () => {
    const res = await list({ search: 'car', sort: 'title', fields: 'id,title:highlight,body:highlight' });
    expect(res.status).toBe(200);
    const byId = Object.fromEntries(res.body.items.map((r: { id: string; title: string; body: string }) => [r.id, r]));
    expect(byId[ids.fast]).toEqual({ id: ids.fast, title: 'Fast <mark>cars</mark>', body: 'A review of <mark>cars</mark> that run fast.' });
    expect(byId[ids.slow].body).toBe('Boats, and a <mark>car</mark> ferry.');
  });

  test('highlight escapes HTML in the text; without search it is the escaped text, unmarked', async () => {
    const res = await list({ search: 'roses', fields: 'title,body:highlight' });
    expect(res.body.items).toEqual([{ title: 'Gardening', body: 'Tomatoes &amp; alert(1) <mark>roses</mark>' }]);
    const unsearched = await list({ filter: `id = "${ids.other}"`, fields: 'body:highlight' });
    expect(unsearched.body.items).toEqual([{ body: 'Tomatoes &amp; alert(1) roses' }]);
    // One record (no list, no search): the value escaped as it is stored.
    const one = await app.http.get(api(`posts/records/${ids.other}`)).query({ fields: 'body:highlight' });
    expect(one.body).toEqual({ body: '&lt;p&gt;Tomatoes &amp; &lt;script&gt;alert(1)&lt;/script&gt; roses&lt;/p&gt;' });
  });

  test('a text that holds the private marker characters cannot forge a mark', async () => {
    const res = await app.http.post(api('posts/records')).send({ title: 'odd \uE000boats\uE001 <i>', tag: 'z' });
    const found = await list({ search: 'odd', filter: 'tag = "z"', fields: 'title:highlight' });
    expect(found.body.items).toEqual([{ title: '<mark>odd</mark> boats &lt;i&gt;' }]);
    await app.http.delete(api(`posts/records/${res.body.id}`));
  });

  test(':highlight on a relation path is a 400', async () => {
    const res = await list({ fields: 'expand.author.name:highlight' });
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/^Invalid fields: ":highlight" applies to the listed records' own fields/);
  });

  test('the search column is never in a record, and the sync does not report it as left alone', async () => {
    const res = await list({ search: 'fast' });
    expect(Object.keys(res.body.items[0]).sort()).toEqual(['body', 'collectionId', 'collectionName', 'created', 'id', 'tag', 'title', 'updated']);
    const logger = createMemoryLogger();
    const same = await startSiblingRouter(app, { collections: [posts({ search: ['title', 'body'], language: 'english' }), plain], logger });
    await same.close();
    expect(logger.lines.join('\n')).not.toMatch(/_rb_search/);
  });

  test('a view of SELECT * over the searched table serves its fields, not the search column', async () => {
    const res = await app.http.get(api('everything/records')).query({ filter: `id = "${ids.fast}"` });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body.items[0]).sort()).toEqual(['body', 'collectionId', 'collectionName', 'created', 'id', 'tag', 'title', 'updated']);
  });

  test('a realtime message of a searched collection has its fields only', async () => {
    const previous = (globalThis as { EventSource?: unknown }).EventSource;
    (globalThis as { EventSource?: unknown }).EventSource = EventSource;
    const pb = new PocketBase(`${app.baseUrl}/backend`);
    try {
      const heard = new Promise<Record<string, unknown>>((resolve) => {
        void pb.collection('posts').subscribe('*', (event) => resolve(event.record as Record<string, unknown>));
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      const created = await app.http.post(api('posts/records')).send({ title: 'heard', tag: 'rt' });
      const record = await heard;
      expect(record.id).toBe(created.body.id);
      expect(Object.keys(record).sort()).toEqual(['body', 'collectionId', 'collectionName', 'created', 'id', 'tag', 'title', 'updated']);
      await app.http.delete(api(`posts/records/${created.body.id}`));
    } finally {
      await pb.realtime.unsubscribe().catch(() => undefined);
      (globalThis as { EventSource?: unknown }).EventSource = previous;
    }
  });

  test('the real SDK: getList(1, 20, { search, sort: "-@rank" })', async () => {
    const pb = new PocketBase(`${app.baseUrl}/backend`);
    pb.autoCancellation(false);
    const page = await pb.collection('posts').getList(1, 20, { search: 'fast car', sort: '-@rank' });
    expect(page.items.map((r) => r.id)).toEqual([ids.fast, ids.bodyOnly]);
    expect(page.totalItems).toBe(2);
  });

  test('the server API: collection(c).getList(..., { search })', async () => {
    const page = await app.router.api.collection('posts').getList(1, 20, { search: 'fast car', sort: '-@rank', fields: 'id,title:highlight' });
    expect(page.items).toEqual([
      { id: ids.fast, title: '<mark>Fast</mark> <mark>cars</mark>' },
      { id: ids.bodyOnly, title: 'Weekly notes' },
    ]);
    await expect(app.router.api.collection('posts').getList(1, 20, { search: 'x'.repeat(1001) })).rejects.toMatchObject({ status: 400 });
  });

  test('realtime: a subscription with options.query.search is refused with 400', async () => {
    const previous = (globalThis as { EventSource?: unknown }).EventSource;
    (globalThis as { EventSource?: unknown }).EventSource = EventSource;
    const pb = new PocketBase(`${app.baseUrl}/backend`);
    let error: unknown;
    try {
      await pb.collection('posts').subscribe('*', () => undefined, { query: { search: 'car' } });
    } catch (err) {
      error = err;
    } finally {
      await pb.realtime.unsubscribe().catch(() => undefined);
      (globalThis as { EventSource?: unknown }).EventSource = previous;
    }
    expect(error).toMatchObject({ status: 400 });
    expect(JSON.stringify((error as { response?: unknown }).response)).toContain('options.query.search is not supported on realtime subscriptions');
  });

  test('changing the declaration adds a new column and GIN index beside the old ones, which a running older release keeps using', async () => {
    const logger = createMemoryLogger();
    const newer = await startSiblingRouter(app, { collections: [posts({ search: ['title'], language: 'simple' }), plain], logger });
    try {
      const columns = await app.database.db.raw(`SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'posts' AND column_name LIKE '\\_rb\\_search$%' ORDER BY 1`);
      expect(columns.rows).toHaveLength(2);
      const indexes = await app.database.db.raw(`SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'posts' AND indexname LIKE '\\_rb\\_search\\_%'`);
      expect(indexes.rows).toHaveLength(2);
      for (const row of indexes.rows as { indexdef: string }[]) expect(row.indexdef).toMatch(/USING gin/);
      // simple: no stemming, so "car" does not find "cars" in the newer release; the older still stems.
      const newerRes = await newer.http.get(api('posts/records')).query({ search: 'cars' });
      expect(newerRes.body.items.map((r: { id: string }) => r.id)).toEqual([ids.fast]);
      const olderRes = await list({ search: 'car' });
      expect(olderRes.body.totalItems).toBe(3);
      // The newer release names the older declaration's column among what it leaves alone.
      expect(logger.lines.join('\n')).toMatch(/left alone.*column "posts"\."_rb_search\$[0-9a-f]{8}"/);
    } finally {
      await newer.close();
    }
  });
});

describe('search index declarations', () => {
  async function creationError(collections: unknown): Promise<unknown> {
    const database = knex({ client: 'pg', connection: 'postgres://127.0.0.1:1/never', log: testKnexLog });
    try {
      const router = createRecordsRouter({ collections: collections as CollectionDefinition[], database, logger: createMemoryLogger(), fileSweep: false });
      await router.close();
      return undefined;
    } catch (err) {
      return err;
    } finally {
      await database.destroy();
    }
  }

  const fields = [
    { name: 'title', type: 'text' },
    { name: 'secret', type: 'text', hidden: true },
    { name: 'note', type: 'text', rules: { view: '@request.auth.id != ""' } },
    { name: 'count', type: 'number' },
  ];

  test.each([
    ['a hidden field', [{ search: ['secret'] }], /collection "posts", index 0: search field "secret" is hidden; its matches would tell callers what it holds, so it cannot be searched/],
    ['a field with a view rule', [{ search: ['title', 'note'] }], /search field "note" is guarded by a view rule/],
    ['a number field', [{ search: ['count'] }], /search field "count" is number; only text, editor, email, url fields can be searched/],
    ['an unknown language', [{ search: ['title'], language: "english'; DROP TABLE posts; --" }], /unknown search language/],
    ['two search indexes', [{ search: ['title'] }, { search: ['title'], language: 'english' }], /index 1 is a second search index; a collection has at most one/],
    ['no fields', [{ search: [] }], /"search" needs 1 to 4 field names/],
    ['an unknown field', [{ search: ['titel'] }], /search names unknown field "titel"/],
    ['search and fields mixed', [{ search: ['title'], fields: ['title'] }], /unknown key "fields"/],
  ])('%s is a SchemaError at start', async (_label, indexes, message) => {
    const err = await creationError([{ name: 'posts', fields, indexes }]);
    expect(err).toBeInstanceOf(SchemaError);
    expect((err as Error).message).toMatch(message);
  });
});
