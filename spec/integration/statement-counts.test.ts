/**
 * Issue 17's guard: the SQL statements each hot request sends, counted at the driver
 * (node-postgres's `Client.prototype.query`, which both engines go through, whatever builds the
 * statement above it), on Postgres and PGlite, through a listening server. Timings vary from
 * run to run; statement counts do not, so one statement more on a hot path fails here. Each path
 * runs many times in a row (STATEMENT_COUNT_REPEAT, default 200 for reads), and every single
 * request must send exactly the expected number.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import pg from 'pg';
import { contextOfConnection } from '../../lib/db/statements/statement-bounds.js';
import type { CollectionDefinition } from '../../lib/index.js';
import { makePng } from '../support/file-fixtures.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

const REPEAT = Number(process.env.STATEMENT_COUNT_REPEAT ?? 200);
const WRITE_REPEAT = Math.max(1, Math.floor(REPEAT / 4));

const collections: CollectionDefinition[] = [
  {
    name: 'users',
    fields: [{ name: 'name', type: 'text', required: true }],
    rules: { list: '', view: '', create: null, update: null, delete: null },
  },
  {
    name: 'posts',
    fields: [
      { name: 'title', type: 'text', required: true, max: 200 },
      { name: 'views', type: 'number', min: 0, onlyInt: true },
      { name: 'published', type: 'bool' },
      { name: 'author', type: 'relation', collection: 'users', required: true },
      { name: 'cover', type: 'file', maxSize: 1024 * 1024, mimeTypes: ['image/png'], thumbs: ['20x20'] },
    ],
    rules: { list: '', view: '', create: '', update: '', delete: '' },
  },
];

/**
 * Statements sent to the database on behalf of a request (on a connection bound to a database
 * context), as the driver sees them; background work (realtime is off in this suite) would be
 * counted too.
 */
const sent: string[] = [];
/** The keys of every query config those statements reached node-postgres with (its public QueryConfig). */
const configKeys = new Set<string>();
const CONNECTION_SETUP = /^set search_path to /i;
const originalQuery = pg.Client.prototype.query;
beforeAll(() => {
  pg.Client.prototype.query = function countedQuery(this: pg.Client, ...args: unknown[]) {
    if (contextOfConnection(this) !== undefined) {
      const config = args[0] as string | { text?: string };
      const text = typeof config === 'string' ? config : (config.text ?? '');
      // A connection the pool opens during a request is set up first (Knex's `set search_path`):
      // the pool's work, once per connection, not the request's (it made one run in 200 count 2).
      if (!CONNECTION_SETUP.test(text)) {
        sent.push(text);
        if (typeof config === 'object') for (const key of Object.keys(config)) configKeys.add(key);
      }
    }
    return (originalQuery as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof pg.Client.prototype.query;
});
afterAll(() => {
  pg.Client.prototype.query = originalQuery;
});

/** Runs `send` `times` times; returns the distinct statement counts of the requests, and one request's statements. */
async function countStatements(times: number, send: (i: number) => Promise<Response>): Promise<{ counts: number[]; sample: string[] }> {
  const counts = new Set<number>();
  let sample: string[] = [];
  for (let i = 0; i < times; i++) {
    sent.length = 0;
    const res = await send(i);
    await res.arrayBuffer();
    if (!res.ok) throw new Error(`request ${i} answered ${res.status}`);
    counts.add(sent.length);
    sample = [...sent];
  }
  return { counts: [...counts].sort(), sample };
}

describe.each(testEngines())('statements per request on %s', (engine) => {
  let app: TestApp;
  let base: string;
  const userIds: string[] = [];
  const postIds: string[] = [];
  let coverPost: { id: string; cover: string };

  const json = (method: string, body: unknown): RequestInit => ({ method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  beforeAll(async () => {
    // Realtime's reader and heartbeat are background work in a database context of their own:
    // off here, so only the requests' statements are counted (realtime-match.test.ts bounds its
    // statements per change). Its capture triggers run inside the writes and add no statement.
    app = await startTestApp(engine, { collections, realtime: false });
    base = `${app.baseUrl}/backend/api/collections`;
    const root = { authorization: 'token-root', 'content-type': 'application/json' };
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${base}/users/records`, { method: 'POST', headers: root, body: JSON.stringify({ name: `user ${i}` }) });
      userIds.push(((await res.json()) as { id: string }).id);
    }
    for (let i = 0; i < 40; i++) {
      const res = await fetch(`${base}/posts/records`, json('POST', { title: `post ${i}`, views: i * 10, published: i % 3 !== 0, author: userIds[i % 5] }));
      postIds.push(((await res.json()) as { id: string }).id);
    }
    const form = new FormData();
    form.append('title', 'with cover');
    form.append('author', userIds[0]!);
    form.append('cover', new Blob([makePng(64, 48)], { type: 'image/png' }), 'cover.png');
    coverPost = (await (await fetch(`${base}/posts/records`, { method: 'POST', body: form })).json()) as { id: string; cover: string };
    // The pool's connections are opened (and their session set up) before anything is counted.
    await Promise.all(Array.from({ length: 8 }, () => fetch(`${base}/posts/records?perPage=1`).then((r) => r.arrayBuffer())));
  });

  afterAll(async () => {
    await app?.close();
  });

  const LIST = `/posts/records?filter=${encodeURIComponent('published = true && views >= 100')}&sort=-created`;

  test('list with skipTotal: 1 statement', async () => {
    const { counts, sample } = await countStatements(REPEAT, () => fetch(`${base}${LIST}&skipTotal=1`));
    expect({ counts, sample: sample.length }).toEqual({ counts: [1], sample: 1 });
    expect(sample[0]).toMatch(/^select /i);
  });

  test('list with total: 2 statements (page, count)', async () => {
    const { counts, sample } = await countStatements(REPEAT, () => fetch(`${base}${LIST}`));
    expect(counts).toEqual([2]);
    expect(sample[1]).toMatch(/count\(\*\)/i);
  });

  test('list with expand: 2 statements (page, the related records)', async () => {
    const { counts } = await countStatements(REPEAT, () => fetch(`${base}${LIST}&skipTotal=1&expand=author`));
    expect(counts).toEqual([2]);
  });

  test('view: 1 statement', async () => {
    const { counts } = await countStatements(REPEAT, (i) => fetch(`${base}/posts/records/${postIds[i % postIds.length]}`));
    expect(counts).toEqual([1]);
  });

  test('create (JSON, no create rule): 1 statement, the relation check folded into the insert', async () => {
    const { counts, sample } = await countStatements(WRITE_REPEAT, (i) => fetch(`${base}/posts/records`, json('POST', { title: `created ${i}`, views: 1, published: true, author: userIds[i % 5] })));
    expect(counts).toEqual([1]);
    expect(sample[0]).toMatch(/^insert /i);
  });

  test('create with a missing relation: still the 422, from one follow-up query', async () => {
    sent.length = 0;
    const res = await fetch(`${base}/posts/records`, json('POST', { title: 'orphan', author: 'nosuchuser00000' }));
    expect(res.status).toBe(422);
    expect(await res.json()).toMatchObject({ data: { author: { code: 'validation_missing_rel_records' } } });
    expect(sent).toHaveLength(2);
  });

  test('upload (multipart create): 1 statement', async () => {
    const png = makePng(32, 32);
    const { counts } = await countStatements(Math.max(1, Math.floor(WRITE_REPEAT / 2)), (i) => {
      const form = new FormData();
      form.append('title', `upload ${i}`);
      form.append('author', userIds[i % 5]!);
      form.append('cover', new Blob([png], { type: 'image/png' }), 'up.png');
      return fetch(`${base}/posts/records`, { method: 'POST', body: form });
    });
    expect(counts).toEqual([1]);
  });

  test('update: 2 statements (the read with its row version, the update of that version with the rule in it)', async () => {
    const { counts } = await countStatements(WRITE_REPEAT, (i) => fetch(`${base}/posts/records/${postIds[i % postIds.length]}`, json('PATCH', { title: `updated ${i}` })));
    expect(counts).toEqual([2]);
  });

  test('batch of 10 creates: 12 statements (BEGIN, 10 inserts with their relation checks folded in, COMMIT)', async () => {
    const { counts } = await countStatements(Math.max(1, Math.floor(WRITE_REPEAT / 5)), (i) =>
      fetch(
        `${app.baseUrl}/backend/api/batch`,
        json('POST', { requests: Array.from({ length: 10 }, (_, n) => ({ method: 'POST', url: '/api/collections/posts/records', body: { title: `batch ${i}.${n}`, author: userIds[n % 5] } })) }),
      ),
    );
    expect(counts).toEqual([12]);
  });

  test("every statement reaches node-postgres through Knex's own path, as a plain query config of node-postgres's public keys (no private member written)", async () => {
    configKeys.clear();
    const { counts } = await countStatements(10, (i) => fetch(`${base}/posts/records/${postIds[i % postIds.length]}`));
    expect(counts).toEqual([1]);
    // text and values, and the record type parsers (`types`); a prepared statement adds its `name`.
    expect([...configKeys].sort()).toEqual(['text', 'types', 'values']);
  });

  test('delete: 1 statement (the delete, its rule in it; nothing points at posts)', async () => {
    const doomed: string[] = [];
    for (let i = 0; i < WRITE_REPEAT; i++) {
      const res = await fetch(`${base}/posts/records`, json('POST', { title: `doomed ${i}`, author: userIds[i % 5] }));
      doomed.push(((await res.json()) as { id: string }).id);
    }
    const { counts } = await countStatements(WRITE_REPEAT, (i) => fetch(`${base}/posts/records/${doomed[i]}`, { method: 'DELETE' }));
    expect(counts).toEqual([1]);
  });

  test('cached thumbnail download: 1 statement', async () => {
    const url = `${app.baseUrl}/backend/api/files/posts/${coverPost.id}/${coverPost.cover}?thumb=20x20`;
    expect((await fetch(url)).status).toBe(200); // made once
    const { counts } = await countStatements(REPEAT, () => fetch(url));
    expect(counts).toEqual([1]);
  });
});
