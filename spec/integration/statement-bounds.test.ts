/**
 * Issue 10, Postgres side: a request's statements are bounded. A slow statement is cancelled at
 * the statement timeout with a clear 400; a statement whose client left is cancelled on the
 * server (pg_stat_activity shows it gone); abandoned requests do not starve the pool; a request
 * that finds no free connection gives up with a 503; and a database that goes silent (no RST)
 * answers 503 within seconds and is used again once it speaks.
 *
 * It runs on a throwaway Postgres (one test freezes traffic to it), without parallel query
 * workers so that the slow statement costs one core of this shared machine.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import { createRecordsRouter, type RecordsRouter } from '../../lib/index.js';
import type { Limits } from '../../lib/options.js';
import { CLIENTS_TABLE } from '../../lib/db/shared-names.js';
import { startFreezingProxy, type FreezingProxy } from '../support/freezing-proxy.js';
import { createMemoryLogger } from '../support/test-app.js';
import { startMonitoredPostgres, type MonitoredPostgres, type ThrowawayPostgres } from '../support/throwaway-postgres.js';

const collections = [{ name: 'notes', fields: [{ name: 'text', type: 'text' as const }], rules: { list: '', view: '', create: '', update: '' } }];
const ROWS = 20_000;
/** 150 case-insensitive substring tests on 20,000 rows of 1 KB: about 25 s of one core here, far past every limit below. */
const SLOW_FILTER = Array.from({ length: 150 }, (_, i) => `text ~ 'zq${i}'`).join(' || ');
const SLOW_LIST = `/api/collections/notes/records?skipTotal=1&filter=${encodeURIComponent(SLOW_FILTER)}`;
const LIST = '/api/collections/notes/records?perPage=1&skipTotal=1';

let postgres: MonitoredPostgres;
let server: ThrowawayPostgres;
let monitor: pg.Client;

beforeAll(async () => {
  postgres = await startMonitoredPostgres({ settings: { max_parallel_workers_per_gather: 0 } });
  ({ server, monitor } = postgres);
}, 60_000);

afterAll(async () => {
  await postgres?.destroy();
}, 60_000);

/** A host app on `url` with its own application_name, so that pg_stat_activity shows its statements apart. */
interface BoundsApp {
  readonly base: string;
  readonly db: Knex;
  readonly name: string;
  readonly router: RecordsRouter;
  readonly app: express.Express;
  close(): Promise<void>;
}

let appCount = 0;
async function startApp(options: { url?: string; poolMax: number; limits: Partial<Limits>; mountAt?: string; seed?: boolean }): Promise<BoundsApp> {
  const name = `rb-bounds-${process.pid}-${++appCount}`;
  const db = knexFactory({
    client: 'pg',
    connection: { connectionString: options.url ?? server.url, application_name: name },
    pool: { min: 0, max: options.poolMax },
    // Knex reports each dropped connection; here they are the point of the test.
    log: { warn: () => undefined },
  });
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'rb-bounds-'));
  const router = createRecordsRouter({ collections, database: db, dataDir, fileSweep: false, logger: createMemoryLogger(), limits: options.limits });
  await router.ready;
  if (options.seed) {
    await db.raw('TRUNCATE notes');
    await db.raw(
      `INSERT INTO notes (id, text, created, updated)
       SELECT substr(md5(i::text), 1, 15), repeat(md5(i::text), 32), now(), now() FROM generate_series(1, ?::int) AS i`,
      [ROWS],
    );
  }
  const app = express();
  const mountAt = options.mountAt ?? '/backend';
  app.use(mountAt, router);
  const listening = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const base = `http://127.0.0.1:${(listening.address() as { port: number }).port}${mountAt === '/' ? '' : mountAt}`;
  return {
    base,
    db,
    name,
    router,
    app,
    async close() {
      listening.closeAllConnections();
      await new Promise<void>((resolve) => listening.close(() => resolve()));
      await router.close();
      await db.destroy();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Statements of `app` running on the server now. */
async function activeStatements(app: BoundsApp): Promise<string[]> {
  const { rows } = await monitor.query<{ query: string }>("SELECT query FROM pg_stat_activity WHERE application_name = $1 AND state = 'active'", [app.name]);
  return rows.map((r) => r.query);
}

/** Connections of `app` left inside a transaction (none may be, between requests). */
async function countInTransaction(app: BoundsApp): Promise<number> {
  const { rows } = await monitor.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND state LIKE 'idle in transaction%'", [app.name]);
  return rows[0]!.n;
}

async function createNote(app: BoundsApp, text: string): Promise<string> {
  const res = await fetch(`${app.base}/api/collections/notes/records`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text }) });
  return ((await res.json()) as { id: string }).id;
}

function patchNote(app: BoundsApp, id: string, signal?: AbortSignal): Promise<Response> {
  return fetch(`${app.base}/api/collections/notes/records/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: 'changed' }), signal });
}

/** The same update as a one-request batch: in a transaction, with a locked read (an update alone reads unlocked and writes the version it read). */
function patchNoteInBatch(app: BoundsApp, id: string, signal?: AbortSignal): Promise<Response> {
  const requests = [{ method: 'PATCH', url: `/api/collections/notes/records/${id}`, body: { text: 'changed' } }];
  return fetch(`${app.base}/api/batch`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ requests }), signal });
}

/** Runs `work` while another session holds the note's row (FOR UPDATE): an update of it waits inside its transaction. */
async function whileRowLocked(id: string, work: () => Promise<void>): Promise<void> {
  const holder = new pg.Client({ connectionString: server.url });
  await holder.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT * FROM notes WHERE id = $1 FOR UPDATE', [id]);
    await work();
  } finally {
    await holder.query('ROLLBACK');
    await holder.end();
  }
}

/** Runs `work` while another session holds `tables` locked (ACCESS EXCLUSIVE): every statement that reads or writes them waits. */
async function whileTablesLocked(tables: readonly string[], work: () => Promise<void>): Promise<void> {
  const holder = new pg.Client({ connectionString: server.url });
  await holder.connect();
  try {
    await holder.query('BEGIN');
    await holder.query(`LOCK TABLE ${tables.map((t) => `"${t}"`).join(', ')} IN ACCESS EXCLUSIVE MODE`);
    await work();
  } finally {
    await holder.query('ROLLBACK');
    await holder.end();
  }
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<number> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > timeoutMs) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return Date.now() - started;
}

/** GET `url`; resolves with status, body and how long it took. */
async function timedGet(url: string, signal?: AbortSignal): Promise<{ status: number; body: { status: number; message: string; data: object }; ms: number }> {
  const started = Date.now();
  const res = await fetch(url, { signal });
  return { status: res.status, body: (await res.json()) as never, ms: Date.now() - started };
}

/** Starts a GET and abandons it (the client closes its connection) after `afterMs`. */
async function abandonGet(url: string, afterMs: number): Promise<void> {
  const controller = new AbortController();
  const request = fetch(url, { signal: controller.signal }).catch(() => undefined);
  await new Promise((r) => setTimeout(r, afterMs));
  controller.abort();
  await request;
}

describe('statement bounds on Postgres', () => {
  let app: BoundsApp;
  afterEach(async () => {
    await app?.close();
  }, 30_000);

  test('a slow statement is cancelled at the statement timeout: 400 statement_timeout naming the limit, nothing left running', async () => {
    app = await startApp({ poolMax: 3, limits: { statementTimeoutMs: 1000 }, seed: true });
    const res = await timedGet(app.base + SLOW_LIST);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      status: 400,
      message: expect.stringContaining('ran longer than the statement timeout (1000 ms, limits.statementTimeoutMs) and was cancelled'),
      data: {},
    });
    expect(res.ms).toBeGreaterThanOrEqual(1000);
    expect(res.ms).toBeLessThan(3000);
    expect(await activeStatements(app)).toEqual([]);
    // the connection that ran it serves the next request
    expect((await timedGet(app.base + LIST)).status).toBe(200);
  }, 60_000);

  test("the server API's calls are bounded too: a slow one fails with statement_timeout, nothing left running", async () => {
    app = await startApp({ poolMax: 3, limits: { statementTimeoutMs: 1000 }, seed: true });
    const started = Date.now();
    const err = await app.router.api.collection('notes').getList(1, 30, { filter: SLOW_FILTER, skipTotal: true, as: 'superuser' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 400, code: 'statement_timeout' });
    expect(Date.now() - started).toBeLessThan(3000);
    expect(await activeStatements(app)).toEqual([]);
    await expect(app.router.api.transaction((tx) => tx.collection('notes').getList(1, 30, { filter: SLOW_FILTER, skipTotal: true, as: 'superuser' }))).rejects.toMatchObject({
      code: 'statement_timeout',
    });
    expect(await countInTransaction(app)).toBe(0);
  }, 60_000);

  test('a statement whose client left is cancelled on the server, long before its end', async () => {
    app = await startApp({ poolMax: 3, limits: { statementTimeoutMs: 60_000 }, seed: true });
    const controller = new AbortController();
    const request = fetch(app.base + SLOW_LIST, { signal: controller.signal }).catch(() => undefined);
    await waitFor('the slow statement runs', async () => (await activeStatements(app)).some((q) => q.includes('ILIKE') || q.includes('ilike')), 10_000);
    controller.abort();
    await request;
    // cancelled once it has run 500 ms (ABANDONED_STATEMENT_GRACE_MS) and the cancel reached the server
    const gone = await waitFor('the statement is gone from pg_stat_activity', async () => (await activeStatements(app)).length === 0, 5_000);
    expect(gone).toBeLessThan(3_000);
  }, 60_000);

  test('three abandoned requests on a pool of three leave the pool free for the next request', async () => {
    app = await startApp({ poolMax: 3, limits: { statementTimeoutMs: 60_000, acquireTimeoutMs: 3_000 }, seed: true });
    await Promise.all([0, 1, 2].map(() => abandonGet(app.base + SLOW_LIST, 700)));
    const next = await timedGet(app.base + LIST);
    expect(next.status).toBe(200);
    expect(next.ms).toBeLessThan(3_000);
    await waitFor('no statement left running', async () => (await activeStatements(app)).length === 0, 5_000);
  }, 60_000);

  test('a request that gets no connection within the acquire timeout answers 503 database_busy', async () => {
    app = await startApp({ poolMax: 1, limits: { statementTimeoutMs: 60_000, acquireTimeoutMs: 800 }, seed: true });
    const controller = new AbortController();
    const holder = fetch(app.base + SLOW_LIST, { signal: controller.signal }).catch(() => undefined);
    await waitFor('the slow statement holds the only connection', async () => (await activeStatements(app)).length === 1, 10_000);
    const res = await timedGet(app.base + LIST);
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ status: 503, message: 'The database is busy: no connection became free within 800 ms (limits.acquireTimeoutMs). Try again later.', data: {} });
    expect(res.ms).toBeLessThan(2_500);
    controller.abort();
    await holder;
    await waitFor('the pool is free again', async () => (await timedGet(app.base + LIST)).status === 200, 5_000);
  }, 60_000);

  test.each([
    ['in its transaction (a batch: the locked read waits)', patchNoteInBatch, /for update/i],
    ['in its one statement (an update alone: the update waits)', patchNote, /^\s*update/i],
  ])('a write whose client leaves while it waits %s is rolled back, and its connection is not left in a transaction', async (_, send, waiting) => {
    app = await startApp({ poolMax: 2, limits: { statementTimeoutMs: 60_000 } });
    const id = await createNote(app, 'original');
    await whileRowLocked(id, async () => {
      const controller = new AbortController();
      const update = send(app, id, controller.signal).catch(() => undefined);
      await waitFor('the update waits for the row lock', async () => (await activeStatements(app)).some((q) => waiting.test(q)), 10_000);
      controller.abort();
      await update;
      await waitFor('no statement of the app is running', async () => (await activeStatements(app)).length === 0, 5_000);
      expect(await countInTransaction(app)).toBe(0);
    });
    expect((await timedGet(`${app.base}/api/collections/notes/records/${id}`)).body).toMatchObject({ text: 'original' });
  }, 60_000);

  test('a write that waits on a row lock past the timeout answers 400 and is rolled back', async () => {
    app = await startApp({ poolMax: 2, limits: { statementTimeoutMs: 800 } });
    const id = await createNote(app, 'original');
    await whileRowLocked(id, async () => {
      const started = Date.now();
      const res = await patchNote(app, id);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { message: string }).message).toContain('statement timeout (800 ms, limits.statementTimeoutMs)');
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(await activeStatements(app)).toEqual([]);
      expect(await countInTransaction(app)).toBe(0);
    });
    expect((await timedGet(`${app.base}/api/collections/notes/records/${id}`)).body).toMatchObject({ text: 'original' });
  }, 60_000);

  test('every route that sends statements is bounded: while their tables are locked, a create, a file download, a batch and a realtime connect answer at the statement timeout', async () => {
    app = await startApp({ poolMax: 5, limits: { statementTimeoutMs: 800 } });
    const id = await createNote(app, 'original');
    const json = { 'content-type': 'application/json' };
    await whileTablesLocked(['notes', CLIENTS_TABLE], async () => {
      const started = Date.now();
      const answers = await Promise.all([
        fetch(`${app.base}/api/collections/notes/records`, { method: 'POST', headers: json, body: JSON.stringify({ text: 'new' }) }),
        fetch(`${app.base}/api/files/notes/${id}/a_0123456789.png`),
        fetch(`${app.base}/api/batch`, { method: 'POST', headers: json, body: JSON.stringify({ requests: [{ method: 'PATCH', url: `/api/collections/notes/records/${id}`, body: { text: 'batch' } }] }) }),
        fetch(`${app.base}/api/realtime`),
      ]);
      const elapsed = Date.now() - started;
      for (const res of answers) {
        expect(res.status).toBe(400);
        expect(JSON.stringify(await res.json())).toContain('statement timeout (800 ms, limits.statementTimeoutMs)');
      }
      expect(elapsed).toBeLessThan(3_000);
      expect(await activeStatements(app)).toEqual([]);
      expect(await countInTransaction(app)).toBe(0);
    });
    expect((await timedGet(`${app.base}/api/collections/notes/records/${id}`)).body).toMatchObject({ text: 'original' });
    expect((await timedGet(app.base + LIST)).status).toBe(200);
  }, 60_000);

  test("the host's own routes after the router keep their own rules: no statement timeout there", async () => {
    app = await startApp({ poolMax: 2, limits: { statementTimeoutMs: 300 }, mountAt: '/' });
    const db = app.db;
    app.app.get('/host/slow', async (_req, res) => {
      await db.raw('SELECT pg_sleep(1)');
      res.json({ host: true });
    });
    const res = await fetch(`${app.base}/host/slow`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ host: true });
  }, 60_000);
});

describe('a database that goes silent (no RST) behind a freezing proxy', () => {
  let proxy: FreezingProxy;
  let app: BoundsApp;
  beforeAll(async () => {
    proxy = await startFreezingProxy({ host: '127.0.0.1', port: server.port });
    const url = server.url.replace(`:${server.port}/`, `:${proxy.port}/`);
    app = await startApp({ url, poolMax: 3, limits: { statementTimeoutMs: 1000, acquireTimeoutMs: 1000 } });
  }, 60_000);
  afterAll(async () => {
    proxy?.thaw();
    await app?.close();
    await proxy?.close();
  }, 60_000);

  test('requests answer 503 within seconds while it is silent, and succeed again once it answers', async () => {
    const before = await createNote(app, 'before');
    // several pooled connections, each of which the freeze leaves hanging mid-statement
    await Promise.all([0, 1, 2].map(() => timedGet(app.base + LIST)));

    proxy.freeze();
    const during = await Promise.all([timedGet(app.base + LIST), timedGet(app.base + LIST), timedGet(`${app.base}/api/collections/notes/records/${before}`)]);
    for (const res of during) {
      expect(res.status).toBe(503);
      expect(res.body.status).toBe(503);
      expect(res.body.message).toMatch(/^The database is (unavailable|busy)/);
      // statement timeout (1 s) + cancel grace (2 s), or the acquire timeout (1 s), plus slack
      expect(res.ms).toBeLessThan(5_000);
    }
    const write = await fetch(`${app.base}/api/collections/notes/records`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: 'while silent' }) });
    expect(write.status).toBe(503);

    proxy.thaw();
    await waitFor('the app uses the database again', async () => (await timedGet(app.base + LIST)).status === 200, 15_000);
    const after = await fetch(`${app.base}/api/collections/notes/records`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: 'after' }) });
    expect(after.status).toBe(200);
    const mine = encodeURIComponent("text = 'before' || text = 'while silent' || text = 'after'");
    const list = (await (await fetch(`${app.base}/api/collections/notes/records?sort=created&filter=${mine}`)).json()) as { items: { text: string }[] };
    expect(list.items.map((r: { text: string }) => r.text)).toEqual(['before', 'after']);
  }, 60_000);
});
