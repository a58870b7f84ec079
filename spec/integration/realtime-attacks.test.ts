import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import knexFactory from 'knex';
import supertest from 'supertest';
import { createAppServer, createRecordsRouter, type CollectionDefinition, type RecordsRouter } from '../../lib/index.js';
import type { RecordsRouterOptions } from '../../lib/options.js';
import { measureEventLoopLag } from '../support/event-loop-lag.js';
import { measurePeakGrowth } from '../support/measure-peak-growth.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { openSse, type SseConnection } from '../support/sse-reader.js';
import { createMemoryLogger, TEST_IDENTITIES } from '../support/test-app.js';
import { openTestDatabase, testEngines, testKnexLog, type Engine, type TestDatabase } from '../support/test-database.js';

/**
 * DESIGN 12 "Under attack" (issue 29, findings 1, 3, 4, 5, 6) over a listening server, on
 * Postgres and on the embedded engine ON DISK (the default a user gets; an in-memory database
 * cannot stop a statement at all, docs/realtime.md). Each test measures an honest subscriber
 * beside the attacker in the same run.
 */

const api = (p: string) => `/backend/api/collections/${p}`;

function collections(): CollectionDefinition[] {
  return [
    { name: 'notes', fields: [{ name: 'name', type: 'text' }, { name: 'n', type: 'number' }], rules: OPEN_RULES },
    { name: 'feed', fields: [{ name: 'title', type: 'text' }], rules: OPEN_RULES },
    { name: 'nodes', fields: [{ name: 'name', type: 'text' }, { name: 'links', type: 'relation', collection: 'nodes', maxSelect: 1000 }], rules: OPEN_RULES },
  ];
}

/** A host app whose database is the engine a user gets: the embedded default on disk, or a fresh Postgres schema. */
interface AttackApp {
  readonly baseUrl: string;
  readonly http: supertest.Agent;
  readonly router: RecordsRouter;
  readonly logger: ReturnType<typeof createMemoryLogger>;
  close(): Promise<void>;
}

async function startApp(engine: Engine, options: Partial<RecordsRouterOptions> = {}): Promise<AttackApp> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'rb-attack-'));
  const database: TestDatabase | undefined = engine === 'postgres' ? await openTestDatabase(engine) : undefined;
  const logger = createMemoryLogger();
  const router = createRecordsRouter({
    collections: collections(),
    auth: (token) => TEST_IDENTITIES[token] ?? null,
    logger,
    dataDir,
    fileSweep: false,
    thumbnailWorkers: 1,
    ...options,
    database: database?.db,
  });
  await router.ready;
  const app = express();
  app.use('/backend', router);
  const server: Server = createAppServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    baseUrl,
    http: supertest.agent(baseUrl),
    router,
    logger,
    async close() {
      await router.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await database?.destroy();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A long literal after `%`: Postgres compares it at every position of the text, so on a 1 MB text one check takes seconds. */
const SLOW_PATTERN = `${'a'.repeat(2_300)}b`;
const BIG_NAME = 'a'.repeat(1_000_000);

describe.each(testEngines())('realtime under attack on %s', (engine) => {
  let app: AttackApp;
  const open: SseConnection[] = [];
  beforeAll(async () => {
    app = await startApp(engine, { realtime: { checkTimeoutMs: 500 } });
  });
  afterEach(() => {
    for (const c of open.splice(0)) c.close();
  });
  afterAll(async () => {
    await app?.close();
  });

  async function subscribe(subscriptions: string[], token?: string): Promise<SseConnection & { id: string }> {
    const sse = await openSse(`${app.baseUrl}/backend/api/realtime`);
    open.push(sse);
    const id = await sse.clientId();
    const post = app.http.post('/backend/api/realtime');
    if (token) post.set('Authorization', token);
    const res = await post.send({ clientId: id, subscriptions });
    expect(res.status).toBe(204);
    return Object.assign(sse, { id });
  }
  const withFilter = (topic: string, filter: string, extra: Record<string, string> = {}) => `${topic}?options=${encodeURIComponent(JSON.stringify({ query: { filter, ...extra } }))}`;

  test('a filter that runs past checkTimeoutMs costs its own subscriber only; three such checks in a row end its stream', async () => {
    const honest = await subscribe(['notes/*', 'feed/*']);
    const attacker = await subscribe([0, 1, 2].map((i) => withFilter('notes/*', `name ~ '${SLOW_PATTERN}${i}'`)));
    const big = await app.http.post(api('notes/records')).send({ name: BIG_NAME, n: 0 });
    expect(big.status).toBe(200);
    const latencies: number[] = [];
    for (let n = 1; n <= 3; n++) {
      const started = Date.now();
      expect((await app.http.patch(api(`notes/records/${big.body.id}`)).send({ n })).status).toBe(200);
      await honest.next((e) => e.event === 'notes/*' && e.data!.includes(`"n":${n}`), { timeoutMs: 20_000 });
      latencies.push(Date.now() - started);
      const marker = `after-${n}`;
      const sent = Date.now();
      await app.http.post(api('feed/records')).send({ title: marker });
      await honest.next((e) => e.event === 'feed/*' && e.data!.includes(marker), { timeoutMs: 20_000 });
      latencies.push(Date.now() - sent);
    }
    // Before: the three filters were checked in the honest subscriber's statement, which waited
    // the statement timeout (5 s) once per half: 31-35 s to the next message. Now the honest
    // subscriber waits at most for one cancelled check (and, on the embedded engine, its restart).
    expect(Math.max(...latencies)).toBeLessThan(2_500);
    // The attacker's checks failed three times in a row: its stream is ended, and the log says why
    // (not whose: a client id is not written to the log, docs/observability.md).
    await attacker.endedPromise;
    expect(app.logger.lines.filter((l) => l.includes("a client's stream is ended") && l.includes('failed 3 times in a row'))).toHaveLength(1);
    expect(app.logger.lines.some((l) => l.includes(attacker.id))).toBe(false);
    expect(attacker.messages('notes/*')).toEqual([]);
    // The honest one received every change, in order.
    expect(honest.messages('notes/*').map((m) => m.data.record.n)).toEqual([0, 1, 2, 3]);
  });

  test('a filter over the subscription bounds is refused at the POST, naming the limit', async () => {
    const sse = await openSse(`${app.baseUrl}/backend/api/realtime`);
    open.push(sse);
    const id = await sse.clientId();
    const post = (subscriptions: string[]) => app.http.post('/backend/api/realtime').send({ clientId: id, subscriptions });
    const deep = await post([withFilter('nodes/*', "links.links.links.links.links.links.name ?~ '%q%r%0'")]);
    expect(deep.status).toBe(400);
    expect(deep.body.message).toMatch(/has more than 2 relation hops/);
    // Finding 6's topic: 61 comparisons, over a subscription's 50.
    const wide = `created <= @now && (${Array.from({ length: 60 }, (_, i) => `name ~ 'f0x${i}'`).join(' || ')})`;
    const costly = await post([withFilter('notes/*', wide)]);
    expect(costly.status).toBe(400);
    expect(costly.body.message).toMatch(/too complex for a realtime subscription's filter: .* at most 50/);
    // Within the per-filter bound, but 1,000 of them are over one client's total.
    const many = await post(Array.from({ length: 30 }, (_, i) => withFilter('notes/*', Array.from({ length: 40 }, (_, k) => `n != ${i * 100 + k}`).join(' && '))));
    expect(many.status).toBe(400);
    expect(many.body.message).toMatch(/together cost more than 1000/);
    expect((await post([withFilter('nodes/*', "links.links.name ?~ 'zz'")])).status).toBe(204);
  });

  test('identical subscriptions of a client are one: one message per change', async () => {
    const sse = await subscribe(Array.from({ length: 1000 }, () => 'feed/*'));
    const created = await app.http.post(api('feed/records')).send({ title: 'once' });
    await sse.next((e) => e.event === 'feed/*' && e.data!.includes('once'));
    const marker = await app.http.post(api('feed/records')).send({ title: 'marker' });
    await sse.next((e) => e.event === 'feed/*' && e.data!.includes(marker.body.id as string));
    expect(sse.messages('feed/*').filter((m) => m.data.record.id === created.body.id)).toHaveLength(1);
  });

  test('a client whose messages for one write would pass its buffer bound is dropped alone, without the memory or the stall', async () => {
    const honest = await subscribe(['feed/*']);
    // 1,000 distinct topics of one shape, and a 600 KB record: 600 MB of frames if they were built per subscription.
    const attacker = await subscribe(Array.from({ length: 1000 }, (_, i) => `feed/*?options=${encodeURIComponent(JSON.stringify({ query: { k: String(i) } }))}`));
    const big = 'x'.repeat(600_000);
    let maxLagMs = 0;
    const growth = await measurePeakGrowth(async () => {
      ({ maxLagMs } = await measureEventLoopLag(async () => {
        const res = await app.http.post(api('feed/records')).send({ title: big });
        expect(res.status).toBe(200);
        await honest.next((e) => e.event === 'feed/*' && (e.data?.length ?? 0) > 600_000, { timeoutMs: 20_000 });
        await attacker.endedPromise;
      }));
    });
    expect(honest.messages('feed/*')).toHaveLength(1);
    // Before: +100 MB of RSS and 170-340 ms of lag for a 100 KB record; RangeError at 600 KB.
    expect(growth).toBeLessThan(80 * 1024 * 1024);
    expect(maxLagMs).toBeLessThan(500);
    // Others still receive after it.
    const after = await app.http.post(api('feed/records')).send({ title: 'after' });
    await honest.next((e) => e.event === 'feed/*' && e.data!.includes(after.body.id as string));
  });

  test('a date macro is read when the change is checked, not when the subscription was compiled', async () => {
    const sse = await subscribe([withFilter('feed/*', 'updated <= @now && title != "skip"')]);
    // A record written after the POST would fail `updated <= @now` with the POST's clock.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const created = await app.http.post(api('feed/records')).send({ title: 'late' });
    await sse.next((e) => e.event?.startsWith('feed/*') === true && e.data!.includes(created.body.id as string));
  });

  test('three clients with 1,000 @now topics each: compiled once, no event-loop stall, every message delivered', async () => {
    const clients = await Promise.all([0, 1, 2].map((c) => subscribe(Array.from({ length: 1000 }, (_, i) => withFilter('feed/*', 'created <= @now', { k: `c${c}x${i}` })))));
    const received = (c: SseConnection, title: string) => c.messages().filter((m) => m.data.record.title === title).length;
    const runs: number[] = [];
    for (let run = 0; run < 3; run++) {
      const title = `tick-${run}`;
      const { maxLagMs } = await measureEventLoopLag(async () => {
        await app.http.post(api('feed/records')).send({ title });
        const deadline = Date.now() + 20_000;
        while (clients.some((c) => received(c, title) < 1000) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      });
      runs.push(maxLagMs);
      for (const c of clients) expect(received(c, title)).toBe(1000);
    }
    // Before: 1.2-1.4 s of stall per write (every topic compiled again per change). The least of
    // three runs: a stall the write causes shows in every run, one of a busy machine in one.
    expect(Math.min(...runs)).toBeLessThan(100);
  });
});

describe('realtime delivery with a delay between commit and delivery, on Postgres', () => {
  const url = process.env.RB_TEST_POSTGRES;
  (url ? test : test.skip)('a version never visible to a subscriber is never delivered to it', async () => {
    const rules = { list: 'post.private = false || author = @request.auth.id', view: 'post.private = false || author = @request.auth.id', create: '', update: '', delete: '' };
    const app = await startApp('postgres', {
      collections: [
        { name: 'posts', fields: [{ name: 'private', type: 'bool' }], rules: OPEN_RULES },
        { name: 'notes', fields: [{ name: 'text', type: 'text' }, { name: 'author', type: 'text' }, { name: 'post', type: 'relation', collection: 'posts' }], rules },
      ],
    });
    const blocker = knexFactory({ client: 'pg', connection: url!, pool: { min: 0, max: 1 }, log: testKnexLog });
    try {
      const sse = await openSse(`${app.baseUrl}/backend/api/realtime`);
      const id = await sse.clientId();
      expect((await app.http.post('/backend/api/realtime').set('Authorization', 'token-bob').send({ clientId: id, subscriptions: ['notes/*'] })).status).toBe(204);
      const alice = 'token-alice';
      const aliceId = TEST_IDENTITIES[alice]!.id;
      // A transaction that has written something holds back every instance's read window (docs/realtime.md): delivery waits until it ends.
      const hold = await blocker.transaction();
      await hold.raw('SELECT pg_current_xact_id()');
      const post = await app.http.post(api('posts/records')).send({ private: true });
      const draft = await app.http.post(api('notes/records')).set('Authorization', alice).send({ text: 'DRAFT secret', author: aliceId, post: post.body.id });
      expect((await app.http.get(api(`notes/records/${draft.body.id}`)).set('Authorization', 'token-bob')).status).toBe(404);
      await app.http.patch(api(`notes/records/${draft.body.id}`)).set('Authorization', alice).send({ text: 'final' });
      const gone = await app.http.post(api('notes/records')).set('Authorization', alice).send({ text: 'DRAFT deleted', author: aliceId, post: post.body.id });
      await app.http.delete(api(`notes/records/${gone.body.id}`)).set('Authorization', alice);
      await app.http.patch(api(`posts/records/${post.body.id}`)).send({ private: false });
      await hold.commit();
      const marker = await app.http.post(api('notes/records')).set('Authorization', alice).send({ text: 'marker', author: aliceId, post: post.body.id });
      await sse.next((e) => e.data?.includes(marker.body.id as string) === true, { timeoutMs: 10_000 });
      // What bob receives of the notes: the edited text, checked as the note is now; never the draft.
      expect(sse.text()).not.toContain('DRAFT');
      const notes = sse.messages('notes/*').filter((m) => m.data.record.id === draft.body.id);
      expect(notes.map((m) => [m.data.action, m.data.record.text])).toEqual([
        ['create', 'final'],
        ['update', 'final'],
      ]);
      // The delete of a note bob never could read: at most which record went, none of its values.
      for (const m of sse.messages('notes/*').filter((x) => x.data.record.id === gone.body.id)) expect(Object.keys(m.data.record).sort()).toEqual(['collectionId', 'collectionName', 'id']);
      sse.close();
    } finally {
      await blocker.destroy();
      await app.close();
    }
  });
});
