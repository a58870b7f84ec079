/**
 * Readiness and drain (issue 44, part 2; docs/deployment.md, "Rolling restarts: readiness and
 * drain"), as a load balancer and a client see them on a listening server: `GET /api/health`
 * answers 503 from the moment `close()` begins, a request already running finishes, a new one is
 * refused with 503 `draining` and `Connection: close`, and a slow client is cut at `drainMs`, on
 * both engines; the health check's statements, at most one a second however many probes come
 * (counted on the wire), and its 503 while a throwaway Postgres is down.
 */
import { mkdtempSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import knexFactory from 'knex';
import pg from 'pg';
import { createRecordsRouter, type RecordsApi, type RecordsRouter } from '../../lib/index.js';
import { openMemoryDatabase } from '../../lib/db/engine/open-embedded-database.js';
import { startCountingProxy, type CountingProxy } from '../support/counting-proxy.js';
import { startFreezingProxy } from '../support/freezing-proxy.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { requestOnce } from '../support/request-once.js';
import { serveRouter, type ServedRouter } from '../support/served-router.js';
import { openSse } from '../support/sse-reader.js';
import { createMemoryLogger, startTestApp, type TestApp } from '../support/test-app.js';
import { openTestDatabase, testEngines, testKnexLog, type TestDatabase } from '../support/test-database.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/throwaway-postgres.js';

const collections = [
  { name: 'notes', fields: [{ name: 'text', type: 'text' as const }], rules: OPEN_RULES },
  { name: 'docs', fields: [{ name: 'doc', type: 'file' as const, maxSelect: 1, maxSize: 64 * 1024 * 1024 }], rules: OPEN_RULES },
];
const tempDir = () => mkdtempSync(path.join(os.tmpdir(), 'rb-health-'));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A create held in its beforeCreate hook until the test lets it go: a request that runs while close() begins. */
function heldCreates() {
  let entered!: () => void;
  const running = new Promise<void>((resolve) => (entered = resolve));
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  // Once let go, it reads through the server API its hook was given: running work keeps it during the drain.
  const hooks = {
    notes: {
      beforeCreate: async (e: { data: Record<string, unknown>; api: RecordsApi }) => {
        if (e.data.text !== 'held') return;
        entered();
        await released;
        await e.api.collection('notes').getList(1, 1);
      },
    },
  };
  return { hooks, running, release };
}

/** A POST whose multipart body trickles in a byte every 50 ms and never ends; resolves when the server closes the connection. */
function trickleUpload(baseUrl: string): { closed: Promise<void>; stop(): void } {
  const { hostname, port } = new URL(baseUrl);
  const socket = net.connect(Number(port), hostname);
  socket.on('error', () => undefined);
  socket.write(
    'POST /backend/api/collections/notes/records HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=XX\r\nContent-Length: 1000000\r\n\r\n' +
      '--XX\r\nContent-Disposition: form-data; name="text"\r\n\r\n',
  );
  const timer = setInterval(() => socket.write('a'), 50);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  void closed.then(() => clearInterval(timer));
  return { closed, stop: () => socket.destroy() };
}

describe.each(testEngines())('readiness and drain (%s)', (engine) => {
  let app: TestApp;
  afterEach(async () => {
    await app?.close();
  });

  test('health answers 200 in PocketBase\'s shape while the database answers, 503 in the same shape from the moment close() begins', async () => {
    const held = heldCreates();
    app = await startTestApp(engine, { collections, hooks: held.hooks, drainMs: 5_000 });
    const healthy = await requestOnce(`${app.baseUrl}/backend/api/health`);
    expect({ status: healthy.status, body: healthy.json }).toEqual({ status: 200, body: { code: 200, status: 200, message: 'API is healthy.', data: {} } });

    const create = requestOnce(`${app.baseUrl}/backend/api/collections/notes/records`, { method: 'POST', json: { text: 'held' } });
    await held.running;
    const closing = app.router.close();

    const health = await requestOnce(`${app.baseUrl}/backend/api/health`);
    expect(health.status).toBe(503);
    expect(health.json).toEqual({ code: 503, status: 503, message: expect.stringMatching(/shutting down/), data: {} });
    expect(health.headers.connection).toBe('close');

    const refused = await requestOnce(`${app.baseUrl}/backend/api/collections/notes/records`);
    expect({ status: refused.status, body: refused.json }).toEqual({ status: 503, body: { status: 503, message: expect.stringMatching(/shutting down/), data: {} } });
    expect(refused.headers.connection).toBe('close');
    expect(refused.headers['recordbase-refused']).toBe('draining');
    const refusedWrite = await requestOnce(`${app.baseUrl}/backend/api/collections/notes/records`, { method: 'POST', json: { text: 'refused' } });
    expect(refusedWrite.status).toBe(503);
    // Under /api/ as Express matches it (any case, at a segment boundary); the host's other paths are the host's.
    expect((await requestOnce(`${app.baseUrl}/backend/API/Collections/notes/records`)).headers['recordbase-refused']).toBe('draining');
    expect((await requestOnce(`${app.baseUrl}/backend/api`)).headers['recordbase-refused']).toBe('draining');
    const outside = await requestOnce(`${app.baseUrl}/backend/apix`);
    expect({ status: outside.status, refused: outside.headers['recordbase-refused'] }).toEqual({ status: 404, refused: undefined });

    // The server API too, with the same 503.
    await expect(app.router.api.collection('notes').getList()).rejects.toMatchObject({ status: 503, code: 'draining' });

    // The running create finishes, and only then does close() resolve.
    let closed = false;
    void closing.then(() => (closed = true));
    await sleep(200);
    expect(closed).toBe(false);
    held.release();
    const created = await create;
    expect(created.status).toBe(200);
    expect(created.headers.connection).toBe('close');
    await closing;
    const rows = (await app.database.db('notes').select('text')) as { text: string }[];
    expect(rows.map((row) => row.text)).toEqual(['held']);
  });

  test('a slow client (an upload trickling in) cannot hold close() past drainMs: it is cut and close() resolves', async () => {
    app = await startTestApp(engine, { collections, drainMs: 500 });
    const upload = trickleUpload(app.baseUrl);
    try {
      await sleep(300);
      const started = performance.now();
      await app.router.close();
      const took = performance.now() - started;
      expect(took).toBeLessThan(3_000);
      // Cut by the server by the time close() resolved: no byte of it is still awaited.
      const cut = await Promise.race([upload.closed.then(() => 'cut'), sleep(200).then(() => 'still open')]);
      expect(cut).toBe('cut');
    } finally {
      upload.stop();
    }
  });
});

/** A GET of `path` on a raw socket that reads nothing: the server can write only until the socket's buffers are full. */
function stalledDownload(baseUrl: string, path: string): { stop(): void } {
  const { hostname, port } = new URL(baseUrl);
  const socket = net.connect(Number(port), hostname);
  socket.on('error', () => undefined);
  socket.pause();
  socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
  return { stop: () => socket.destroy() };
}

describe.each(testEngines())('drain and the clients that stay (%s)', (engine) => {
  let app: TestApp;
  afterEach(async () => {
    await app?.close();
  });

  // 48 MiB: more than loopback's socket buffers take, so the response cannot finish unread. A
  // client that reads nothing notices no close either: the server's own count of connections says it.
  test('a download read slowly is cut at drainMs too, and close() resolves', async () => {
    app = await startTestApp(engine, { collections, drainMs: 500, limits: { maxFileSize: 64 * 1024 * 1024, maxBodySize: 64 * 1024 * 1024 } });
    const form = new FormData();
    form.append('doc', new Blob([randomBytes(48 * 1024 * 1024)], { type: 'application/octet-stream' }), 'big.bin');
    const created = await fetch(`${app.baseUrl}/backend/api/collections/docs/records`, { method: 'POST', body: form });
    expect(created.status).toBe(200);
    const record = (await created.json()) as { id: string; collectionId: string; doc: string };
    const connections = () => new Promise<number>((resolve, reject) => app.server.getConnections((err, count) => (err ? reject(err) : resolve(count))));
    const before = await connections();
    const download = stalledDownload(app.baseUrl, `/backend/api/files/${record.collectionId}/${record.id}/${record.doc}`);
    try {
      await sleep(300);
      expect(await connections()).toBe(before + 1);
      const started = performance.now();
      await app.router.close();
      expect(performance.now() - started).toBeLessThan(3_000);
      expect(await connections()).toBe(before);
    } finally {
      download.stop();
    }
  });

  test('an open realtime stream does not hold close() for drainMs: it ends right after the drain', async () => {
    app = await startTestApp(engine, { collections, drainMs: 5_000 });
    const stream = await openSse(`${app.baseUrl}/backend/api/realtime`);
    await stream.clientId();
    const started = performance.now();
    await app.router.close();
    expect(performance.now() - started).toBeLessThan(2_500);
    await stream.endedPromise;
    expect(stream.ended()).toBe(true);
  });
});

describe.each(testEngines())('health before the start finished (%s)', (engine) => {
  let database: TestDatabase;
  let router: RecordsRouter | undefined;
  let served: { close(): void; url: string } | undefined;
  afterEach(async () => {
    served?.close();
    await router?.close();
    await database?.destroy();
  });

  test('while a migration runs, health answers 503 not_ready at once (it does not wait for the start)', async () => {
    database = await openTestDatabase(engine);
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    router = createRecordsRouter({ collections, database: database.db, dataDir: tempDir(), logger: createMemoryLogger(), fileSweep: false, migrations: [{ name: '001_slow', up: () => finished }] });
    served = await listenEarly(router);
    const probe = await requestOnce(`${served.url}/backend/api/health`, { timeoutMs: 2_000 });
    expect({ status: probe.status, body: probe.json }).toEqual({ status: 503, body: { code: 503, status: 503, message: expect.stringMatching(/starting/), data: {} } });
    finish();
    await router.ready;
    expect((await requestOnce(`${served.url}/backend/api/health`)).status).toBe(200);
  });
});

test('after a failed start, health answers 503 with the reason in its own shape (`code`, as the SDK reads it)', async () => {
  const database = knexFactory({ client: 'pg', connection: 'postgres://nobody@127.0.0.1:1/none', pool: { min: 0, max: 1 }, log: testKnexLog });
  const router = createRecordsRouter({ collections, database, dataDir: tempDir(), logger: createMemoryLogger(), fileSweep: false, realtime: false });
  await router.ready.catch(() => undefined);
  const served = await listenEarly(router);
  try {
    const probe = await requestOnce(`${served.url}/backend/api/health`);
    expect({ status: probe.status, body: probe.json }).toEqual({ status: 503, body: { code: 503, status: 503, message: expect.stringMatching(/^recordbase could not start: /), data: {} } });
  } finally {
    served.close();
    await router.close();
    await database.destroy();
  }
});

test('on the embedded engine too, a flood of probes sends at most about one check a second (counted at the driver)', async () => {
  const sent: string[] = [];
  const originalQuery = pg.Client.prototype.query;
  pg.Client.prototype.query = function countedQuery(this: pg.Client, ...args: unknown[]) {
    const config = args[0] as string | { text?: string };
    sent.push(typeof config === 'string' ? config : (config.text ?? ''));
    return (originalQuery as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof pg.Client.prototype.query;
  const db = openMemoryDatabase({ log: testKnexLog });
  const served = await serveRouter(createRecordsRouter({ collections, database: db, logger: createMemoryLogger(), fileSweep: false, realtime: false, dataDir: tempDir() }));
  try {
    await requestOnce(`${served.baseUrl}/api/health`);
    await sleep(1_100);
    sent.length = 0;
    const statuses = await floodHealth(served.baseUrl, 2_500);
    const checks = sent.filter((text) => /^SELECT 1$/i.test(text.trim())).length;
    expect(statuses.length).toBeGreaterThan(100);
    expect(new Set(statuses)).toEqual(new Set([200]));
    expect(checks).toBeGreaterThanOrEqual(2);
    expect(checks).toBeLessThanOrEqual(4);
  } finally {
    pg.Client.prototype.query = originalQuery;
    await served.close();
    await db.destroy();
  }
});

/** 20 probes at a time, each sent as soon as the one before it was answered, for `ms`: every status answered. */
async function floodHealth(baseUrl: string, ms: number): Promise<number[]> {
  const until = performance.now() + ms;
  const statuses: number[] = [];
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      while (performance.now() < until) statuses.push((await requestOnce(`${baseUrl}/api/health`)).status);
    }),
  );
  return statuses;
}

/** Mounts `router` at /backend without waiting for `ready`. */
async function listenEarly(router: RecordsRouter): Promise<{ url: string; close(): void }> {
  const { default: express } = await import('express');
  const host = express();
  host.use('/backend', router);
  const server = await new Promise<import('node:http').Server>((resolve) => {
    const s = host.listen(0, '127.0.0.1', () => resolve(s));
  });
  return { url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, close: () => void server.close() };
}

const postgresOnly = process.env.RB_TEST_POSTGRES ? describe : describe.skip;

postgresOnly('the health check and the drain on Postgres', () => {
  let app: TestApp | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  test('a flood of probes sends at most about one check a second (counted on the wire), and every probe is answered', async () => {
    const database = await openTestDatabase('postgres');
    const target = new URL(database.url!);
    const proxy: CountingProxy = await startCountingProxy({ host: target.hostname, port: Number(target.port || 5432) });
    const proxied = new URL(database.url!);
    proxied.host = `127.0.0.1:${proxy.port}`;
    const db = knexFactory({ client: 'pg', connection: proxied.toString(), searchPath: [database.schema!], pool: { min: 0, max: 5 }, log: testKnexLog });
    const served: ServedRouter = await serveRouter(createRecordsRouter({ collections, database: db, logger: createMemoryLogger(), fileSweep: false, realtime: false, dataDir: tempDir() }));
    try {
      await requestOnce(`${served.baseUrl}/api/health`);
      await sleep(1_100);
      proxy.reset();
      const statuses = await floodHealth(served.baseUrl, 2_500);
      const checks = proxy.sent.filter((s) => /^SELECT 1$/i.test(s.text.trim())).length;
      expect(statuses.length).toBeGreaterThan(100);
      expect(new Set(statuses)).toEqual(new Set([200]));
      // 2.5 s of probes: a check when the cached answer turns a second old, so 2 or 3 (4 allows a slow machine's edges).
      expect(checks).toBeGreaterThanOrEqual(2);
      expect(checks).toBeLessThanOrEqual(4);
    } finally {
      await served.close();
      await db.destroy();
      await proxy.close();
      await database.destroy();
    }
  });

  test('a database that stops answering (no reset, no close: a frozen network) is a 503 within about a second; the check that hangs is bounded', async () => {
    const database = await openTestDatabase('postgres');
    const target = new URL(database.url!);
    const proxy = await startFreezingProxy({ host: target.hostname, port: Number(target.port || 5432) });
    const proxied = new URL(database.url!);
    proxied.host = `127.0.0.1:${proxy.port}`;
    const db = knexFactory({ client: 'pg', connection: proxied.toString(), searchPath: [database.schema!], pool: { min: 0, max: 5 }, log: testKnexLog });
    const served = await serveRouter(createRecordsRouter({ collections, database: db, logger: createMemoryLogger(), fileSweep: false, realtime: false, dataDir: tempDir() }));
    try {
      expect((await requestOnce(`${served.baseUrl}/api/health`)).status).toBe(200);
      proxy.freeze();
      const frozen = performance.now();
      const probe = await pollHealth(served.baseUrl, 503, 5_000);
      expect(probe.json).toMatchObject({ code: 503, message: expect.stringMatching(/database does not answer/) });
      // At most a second of the cached answer, then a check given a second.
      expect(performance.now() - frozen).toBeLessThan(3_000);
      proxy.thaw();
      await pollHealth(served.baseUrl, 200, 10_000);
    } finally {
      proxy.thaw();
      await served.close();
      await db.destroy();
      await proxy.close();
      await database.destroy();
    }
  }, 30_000);

  test('a request cut at drainMs has its statement cancelled: an update waiting on a row lock stops waiting, and writes nothing', async () => {
    app = await startTestApp('postgres', { collections, drainMs: 500, limits: { statementTimeoutMs: 30_000 } });
    const created = await requestOnce(`${app.baseUrl}/backend/api/collections/notes/records`, { method: 'POST', json: { text: 'before' } });
    const id = (created.json as { id: string }).id;
    const holder = knexFactory({ client: 'pg', connection: app.database.url!, searchPath: [app.database.schema!], pool: { min: 0, max: 2 }, log: testKnexLog });
    const waiting = async () => {
      const { rows } = await holder.raw<{ rows: { n: number }[] }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()");
      return rows[0]!.n;
    };
    const tx = await holder.transaction();
    try {
      await tx.raw('SELECT id FROM notes WHERE id = ? FOR UPDATE', [id]);
      const update = requestOnce(`${app.baseUrl}/backend/api/collections/notes/records/${id}`, { method: 'PATCH', json: { text: 'after' } }).catch(() => undefined);
      for (let i = 0; i < 50 && (await waiting()) === 0; i++) await sleep(50);
      expect(await waiting()).toBe(1);
      await app.router.close();
      for (let i = 0; i < 40 && (await waiting()) > 0; i++) await sleep(50);
      expect(await waiting()).toBe(0);
      await tx.commit();
      await update;
      const rows = (await holder('notes').select('text').where({ id })) as { text: string }[];
      expect(rows).toEqual([{ text: 'before' }]);
    } finally {
      if (!tx.isCompleted()) await tx.rollback();
      await holder.destroy();
    }
  }, 30_000);

  describe('while the database is down', () => {
    let server: ThrowawayPostgres;
    beforeAll(async () => {
      server = await startThrowawayPostgres();
    }, 60_000);
    afterAll(async () => {
      await server?.destroy();
    });

    test('health answers 503 within about a second of the database stopping, and 200 again once it is back', async () => {
      const db = knexFactory({ client: 'pg', connection: server.url, pool: { min: 0, max: 5 }, log: testKnexLog });
      const logger = createMemoryLogger();
      const served = await serveRouter(createRecordsRouter({ collections, database: db, logger, fileSweep: false, realtime: false, dataDir: tempDir() }));
      try {
        expect((await requestOnce(`${served.baseUrl}/api/health`)).status).toBe(200);
        await server.stop();
        const stopped = performance.now();
        const down = await pollHealth(served.baseUrl, 503, 5_000);
        expect(down.json).toEqual({ code: 503, status: 503, message: expect.stringMatching(/database does not answer/), data: {} });
        expect(performance.now() - stopped).toBeLessThan(2_000);
        await server.start();
        await pollHealth(served.baseUrl, 200, 10_000);
        // Logged once each way, never per probe.
        expect(logger.lines.filter((line) => line.startsWith('health:'))).toHaveLength(2);
      } finally {
        await served.close();
        await db.destroy();
      }
    }, 60_000);
  });
});

/** Probes health every 100 ms until it answers `status`; fails after `withinMs`. */
async function pollHealth(baseUrl: string, status: number, withinMs: number) {
  const until = performance.now() + withinMs;
  for (;;) {
    const probe = await requestOnce(`${baseUrl}/api/health`);
    if (probe.status === status) return probe;
    if (performance.now() > until) throw new Error(`health did not answer ${status} within ${withinMs} ms (last: ${probe.status})`);
    await sleep(100);
  }
}
