/**
 * Issue 43, part B, step 3: realtime's idle mode (docs/realtime.md, "Idle mode"). An instance
 * holding no stream sends no periodic statement once `realtime.idleAfterMs` has passed (no
 * heartbeat, outbox read or prune, and its LISTEN connection closed), so a serverless Postgres can
 * suspend; a stream or a POST wakes it before it answers.
 *
 * On Postgres: two routers on a throwaway server of their own (the read window ends at the oldest
 * transaction of the whole server: other files' transactions on the shared one would delay
 * delivery past the second asserted here), each Knex through its own counting proxy
 * (spec/support/counting-proxy.ts: what reached the server, the LISTEN connection's included),
 * so what each instance sends is counted apart. On the embedded engine (idle mode applies there
 * too: it spares the worker's CPU and the file's writes): one router, its statements counted at
 * node-postgres's Client.prototype.query, which the engine's connection goes through.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EventSource } from 'eventsource';
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import { createRecordsRouter, type RecordsRouterOptions } from '../../lib/index.js';
import { openMemoryDatabase } from '../../lib/db/engine/open-embedded-database.js';
import { INSTANCES_TABLE } from '../../lib/db/shared-names.js';
import { startCountingProxy, type CountingProxy } from '../support/counting-proxy.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/throwaway-postgres.js';
import { sdkOf, serveRouter, type ServedRouter } from '../support/served-router.js';
import { openSse } from '../support/sse-reader.js';
import { TEST_FILE_TOKEN_SECRET } from '../support/test-app.js';
import { testKnexLog } from '../support/test-database.js';

const TIMEOUT_MS = 60_000;
const HEARTBEAT_MS = 200;
const IDLE_AFTER_MS = 800;
/** Longer than the outbox's safety read (2 s) and ten instance heartbeats. */
const OBSERVE_MS = 2_500;

const collections: RecordsRouterOptions['collections'] = [{ name: 'notes', fields: [{ name: 'text', type: 'text' }], rules: { list: '', view: '', create: '', update: '', delete: '' } }];
const realtime = { instanceHeartbeatMs: HEARTBEAT_MS, idleAfterMs: IDLE_AFTER_MS };

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function routerOptions(database: Knex, dataDir: string): RecordsRouterOptions {
  const quiet = () => undefined;
  return { collections, database, dataDir, realtime, fileSweep: false, thumbnailWorkers: 1, fileTokenSecret: TEST_FILE_TOKEN_SECRET, logger: { error: quiet, warn: quiet, info: quiet } };
}

/** The PocketBase SDK's realtime needs a global EventSource (Node has none). */
async function withEventSource<T>(work: () => Promise<T>): Promise<T> {
  const previous = (globalThis as { EventSource?: unknown }).EventSource;
  (globalThis as { EventSource?: unknown }).EventSource = EventSource;
  try {
    return await work();
  } finally {
    (globalThis as { EventSource?: unknown }).EventSource = previous;
  }
}

async function waitFor(check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check() && Date.now() < deadline) await pause(10);
}

async function createNote(on: ServedRouter, text: string): Promise<void> {
  const res = await fetch(`${on.baseUrl}/api/collections/notes/records`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text }) });
  expect(res.status).toBe(200);
  await res.text();
}

async function postSubscriptions(on: ServedRouter, clientId: string, subscriptions: string[]): Promise<{ status: number; ms: number }> {
  const started = Date.now();
  const res = await fetch(`${on.baseUrl}/api/realtime`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ clientId, subscriptions }) });
  await res.text();
  return { status: res.status, ms: Date.now() - started };
}

const isHeartbeat = (text: string) => text.includes(INSTANCES_TABLE);

describe('realtime idle mode on Postgres, two instances counted on the wire', () => {
  let server: ThrowawayPostgres;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'rb-idle-'));
  const instances: { proxy: CountingProxy; db: Knex; served: ServedRouter }[] = [];

  /** What each instance sends while the test waits `ms` and sends no request. */
  async function sentMeanwhile(ms: number): Promise<string[][]> {
    for (const { proxy } of instances) proxy.reset();
    await pause(ms);
    return instances.map(({ proxy }) => proxy.sent.map((s) => s.text));
  }

  beforeAll(async () => {
    server = await startThrowawayPostgres();
    const url = new URL(server.url);
    for (let i = 0; i < 2; i++) {
      const proxy = await startCountingProxy({ host: url.hostname, port: Number(url.port || 5432) });
      const through = new URL(url.href);
      through.hostname = '127.0.0.1';
      through.port = String(proxy.port);
      const db = knexFactory({ client: 'pg', connection: through.href, pool: { min: 0, max: 4 }, log: testKnexLog });
      const served = await serveRouter(createRecordsRouter(routerOptions(db, dataDir)));
      instances.push({ proxy, db, served });
    }
  }, TIMEOUT_MS);

  afterAll(async () => {
    for (const { served, db, proxy } of instances) {
      await served.close().catch(() => undefined);
      await db.destroy();
      await proxy.close();
    }
    await server?.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  }, TIMEOUT_MS);

  test('no stream: after idleAfterMs neither instance sends a statement; a subscriber wakes one, which hears a create through the other (still asleep) within a second; closed, it sleeps again', async () => {
    await pause(IDLE_AFTER_MS + 500);
    expect(await sentMeanwhile(OBSERVE_MS)).toEqual([[], []]);

    const [one, two] = instances;
    await withEventSource(async () => {
      const pb = sdkOf(one!.served);
      const heard: Array<{ text: string; at: number }> = [];
      two!.proxy.reset();
      await pb.collection('notes').subscribe('*', (event) => void heard.push({ text: String(event.record['text']), at: Date.now() }));
      try {
        // The GET and the POST went to instance 1: instance 2 heard nothing and sent nothing.
        expect(two!.proxy.sent).toEqual([]);
        for (let i = 0; i < 3; i++) {
          const sent = Date.now();
          await createNote(two!.served, `through-two-${i}`);
          await waitFor(() => heard.some((h) => h.text === `through-two-${i}`), 5_000);
          const got = heard.find((h) => h.text === `through-two-${i}`);
          expect(got).toBeDefined();
          expect(got!.at - sent).toBeLessThan(1_000);
        }
        // Instance 2 sent its three creates' statements, and nothing periodic: no more while no request comes.
        const afterCreates = two!.proxy.sent.length;
        expect(afterCreates).toBeGreaterThan(0);
        expect(two!.proxy.sent.filter((s) => isHeartbeat(s.text) || /pg_snapshot_xmin|^LISTEN/i.test(s.text))).toEqual([]);
        // Instance 1 holds a stream: awake, beating (what the counts above would see if instance 2 were).
        const [awake, asleep] = await sentMeanwhile(IDLE_AFTER_MS + 4 * HEARTBEAT_MS);
        expect(awake!.filter(isHeartbeat).length).toBeGreaterThanOrEqual(3);
        expect(asleep).toEqual([]);
      } finally {
        // An open stream would keep the HTTP server's close waiting.
        await pb.realtime.unsubscribe();
      }
    });

    // The stream closed: instance 1 sleeps again after the delay.
    await pause(IDLE_AFTER_MS + 500);
    expect(await sentMeanwhile(OBSERVE_MS)).toEqual([[], []]);
  }, TIMEOUT_MS);

  test('a POST to a sleeping instance for a stream held by the other answers 204 at once, and the stream then receives', async () => {
    const [one, two] = instances;
    const sse = await openSse(`${one!.served.baseUrl}/api/realtime`);
    try {
      const clientId = await sse.clientId();
      // Instance 2 holds nothing: asleep.
      await pause(IDLE_AFTER_MS + 500);
      const [, quiet] = await sentMeanwhile(OBSERVE_MS);
      expect(quiet).toEqual([]);
      const posted = await postSubscriptions(two!.served, clientId, ['notes/*']);
      expect(posted).toMatchObject({ status: 204 });
      expect(posted.ms).toBeLessThan(2_000);
      const sent = Date.now();
      await createNote(two!.served, 'after-the-forward');
      await sse.next((e) => e.event === 'notes/*', { timeoutMs: 5_000 });
      expect(sse.messages('notes/*').map((m) => m.data.record['text'])).toEqual(['after-the-forward']);
      expect(Date.now() - sent).toBeLessThan(1_000);
    } finally {
      sse.close();
    }
  }, TIMEOUT_MS);
});

describe('realtime idle mode on the embedded engine, counted at the driver', () => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'rb-idle-embedded-'));
  let db: Knex;
  let served: ServedRouter;
  const sent: string[] = [];
  const originalQuery = pg.Client.prototype.query;

  beforeAll(async () => {
    pg.Client.prototype.query = function countedQuery(this: pg.Client, ...args: unknown[]) {
      const config = args[0] as string | { text?: string };
      sent.push(typeof config === 'string' ? config : (config.text ?? ''));
      return (originalQuery as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof pg.Client.prototype.query;
    db = openMemoryDatabase({ log: testKnexLog });
    served = await serveRouter(createRecordsRouter(routerOptions(db, dataDir)));
  }, TIMEOUT_MS);

  afterAll(async () => {
    await served?.close();
    await db?.destroy();
    pg.Client.prototype.query = originalQuery;
    rmSync(dataDir, { recursive: true, force: true });
  }, TIMEOUT_MS);

  async function sentMeanwhile(ms: number): Promise<string[]> {
    sent.length = 0;
    await pause(ms);
    return [...sent];
  }

  test('no stream: no statement after idleAfterMs; a stream and its POST wake it, a create is delivered, and it sleeps again once the stream closes', async () => {
    await pause(IDLE_AFTER_MS + 500);
    expect(await sentMeanwhile(OBSERVE_MS)).toEqual([]);

    const sse = await openSse(`${served.baseUrl}/api/realtime`);
    try {
      const clientId = await sse.clientId();
      expect((await postSubscriptions(served, clientId, ['notes/*'])).status).toBe(204);
      // Awake while it holds the stream: it beats.
      expect((await sentMeanwhile(4 * HEARTBEAT_MS)).filter(isHeartbeat).length).toBeGreaterThanOrEqual(2);
      const at = Date.now();
      await createNote(served, 'embedded');
      await sse.next((e) => e.event === 'notes/*', { timeoutMs: 5_000 });
      expect(sse.messages('notes/*').map((m) => m.data.record['text'])).toEqual(['embedded']);
      expect(Date.now() - at).toBeLessThan(1_000);
    } finally {
      sse.close();
    }
    await pause(IDLE_AFTER_MS + 500);
    expect(await sentMeanwhile(OBSERVE_MS)).toEqual([]);
  }, TIMEOUT_MS);
});
