import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EventSource } from 'eventsource';
import knexFactory, { type Knex } from 'knex';
import PocketBase, { ClientResponseError } from 'pocketbase';
import type { CollectionDefinition } from '../../lib/index.js';
import { ensureBuilt } from '../support/built-package.js';
import { startInstances, type Instance } from '../support/multi-instance.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { startRoundRobinProxy, type RoundRobinProxy } from '../support/round-robin-proxy.js';
import { openSse, type SseConnection } from '../support/sse-reader.js';
import { TEST_IDENTITIES } from '../support/test-app.js';
import { testKnexLog } from '../support/test-database.js';

/**
 * Realtime across processes (issue 13 item 5): three recordbase processes from dist/ on one
 * Postgres database. A stream held by one instance, its subscriptions posted through another,
 * writes through a third; the listener's connection killed under load; an instance killed.
 *
 * The suite runs in a database of its own (not a schema of `test`), so that
 * `pg_terminate_backend` finds exactly these instances' listeners (`datname` and
 * `application_name = 'recordbase-realtime'`), never those of a suite running beside it.
 */

const ALICE = TEST_IDENTITIES['token-alice']!;
const BOB = TEST_IDENTITIES['token-bob']!;
/** Short instance heartbeats: a killed instance counts as gone after 3 x this. */
const INSTANCE_HEARTBEAT_MS = 500;

function collections(): CollectionDefinition[] {
  return [
    {
      name: 'posts',
      fields: [
        { name: 'title', type: 'text' },
        { name: 'n', type: 'number' },
      ],
      rules: OPEN_RULES,
    },
    {
      name: 'owned',
      fields: [
        { name: 'owner', type: 'text' },
        { name: 'title', type: 'text' },
      ],
      rules: { ...OPEN_RULES, list: 'owner = @request.auth.id', view: 'owner = @request.auth.id' },
    },
  ];
}

interface Message {
  action: string;
  record: { id: string; title?: string; n?: number; owner?: string };
}

const available = Boolean(process.env.RB_TEST_POSTGRES);
if (!available) console.warn('Postgres is not reachable: the realtime multi-instance suite does not run.');
const describeIfPostgres = available ? describe : describe.skip;

describeIfPostgres('realtime across three instances on one Postgres', () => {
  const databaseName = `rbrt_${randomBytes(5).toString('hex')}`;
  let admin: Knex;
  let db: Knex;
  let storageRoot: string;
  let instances: Instance[];
  let stopAll: () => Promise<void>;
  let proxy: RoundRobinProxy;
  const open: Array<{ close(): void }> = [];
  const url = (instance: Instance | RoundRobinProxy, rest: string) => `${instance.url}/backend/api/${rest}`;

  beforeAll(async () => {
    await ensureBuilt();
    admin = knexFactory({ client: 'pg', connection: process.env.RB_TEST_POSTGRES!, pool: { min: 0, max: 1 }, log: testKnexLog });
    await admin.raw(`CREATE DATABASE "${databaseName}"`);
    const databaseUrl = new URL(process.env.RB_TEST_POSTGRES!);
    databaseUrl.pathname = `/${databaseName}`;
    db = knexFactory({ client: 'pg', connection: databaseUrl.toString(), pool: { min: 0, max: 3 }, log: testKnexLog });
    storageRoot = await fs.mkdtemp(path.join(os.tmpdir(), 'rb-realtime-instances-'));
    ({ instances, stopAll } = await startInstances({
      count: 3,
      databaseUrl: databaseUrl.toString(),
      schema: 'public',
      storage: { kind: 'disk', root: storageRoot },
      collections: collections(),
      identities: TEST_IDENTITIES,
      realtime: { instanceHeartbeatMs: INSTANCE_HEARTBEAT_MS, heartbeatMs: 5_000 },
    }));
    proxy = await startRoundRobinProxy(instances.map((instance) => instance.url));
  }, 120_000);

  afterAll(async () => {
    for (const connection of open.splice(0)) connection.close();
    await proxy?.close();
    await stopAll?.();
    await db?.destroy();
    await admin?.raw(`DROP DATABASE IF EXISTS "${databaseName}" WITH (FORCE)`).catch(() => undefined);
    await admin?.destroy();
    if (storageRoot) await fs.rm(storageRoot, { recursive: true, force: true });
  });

  /** Opens a stream on `on` and waits for its PB_CONNECT. */
  async function stream(on: Instance): Promise<SseConnection & { id: string }> {
    const sse = await openSse(url(on, 'realtime'));
    open.push(sse);
    expect(sse.status).toBe(200);
    return Object.assign(sse, { id: await sse.clientId() });
  }

  async function post(on: Instance | RoundRobinProxy, clientId: string, subscriptions: string[], token?: string): Promise<{ status: number; body: string }> {
    const response = await fetch(url(on, 'realtime'), {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...(token ? { Authorization: token } : {}) },
      body: JSON.stringify({ clientId, subscriptions }),
    });
    return { status: response.status, body: await response.text() };
  }

  async function write(on: Instance, method: string, rest: string, body?: unknown, token?: string): Promise<any> {
    const response = await fetch(url(on, rest), {
      method,
      headers: { ...(body === undefined ? {} : { 'Content-Type': 'application/json' }), ...(token ? { Authorization: token } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    if (response.status >= 300) throw new Error(`${method} ${rest}: HTTP ${response.status} ${text.slice(0, 300)}`);
    return text === '' ? null : JSON.parse(text);
  }

  const createPost = (on: Instance, title: string, n = 1): Promise<{ id: string }> => write(on, 'POST', 'collections/posts/records', { title, n });

  /** The parsed messages a stream received for `event`, in arrival order. */
  const messagesOf = (sse: SseConnection, event: string): Message[] => sse.messages(event).map((m) => m.data as unknown as Message);

  /** Waits until `sse` holds a message for `event` whose record title is `title`. */
  const waitForTitle = (sse: SseConnection, event: string, title: string, timeoutMs = 15_000) =>
    sse.next((e) => e.event === event && (JSON.parse(e.data!) as Message).record.title === title, { timeoutMs });

  /** Each record's actions in arrival order. */
  function actionsById(messages: Message[]): Map<string, string[]> {
    const byId = new Map<string, string[]>();
    for (const m of messages) byId.set(m.record.id, [...(byId.get(m.record.id) ?? []), m.action]);
    return byId;
  }

  test('a stream on A, subscriptions posted through B, writes through C: every change arrives on A once, in per-record order', async () => {
    const [a, b, c] = instances as [Instance, Instance, Instance];
    const sse = await stream(a);
    expect(await post(b, sse.id, ['posts/*'])).toEqual({ status: 204, body: '' });

    // The 204 means the subscription is active on A: the very next write reaches it.
    const first = await createPost(c, 'first');
    await waitForTitle(sse, 'posts/*', 'first');

    const singles = [first];
    for (let i = 2; i <= 5; i++) singles.push(await createPost(c, `single-${i}`));
    for (const r of singles) await write(c, 'PATCH', `collections/posts/records/${r.id}`, { n: 2 });
    await write(c, 'DELETE', `collections/posts/records/${singles[4]!.id}`);

    const batch: Array<{ status: number; body: { id: string } | null }> = await write(c, 'POST', 'batch', {
      requests: [
        { method: 'POST', url: '/api/collections/posts/records', body: { title: 'batch-1' } },
        { method: 'POST', url: '/api/collections/posts/records', body: { title: 'batch-2' } },
        { method: 'PATCH', url: `/api/collections/posts/records/${singles[0]!.id}`, body: { n: 3 } },
        { method: 'DELETE', url: `/api/collections/posts/records/${singles[1]!.id}` },
      ],
    });
    expect(batch.map((r) => r.status)).toEqual([200, 200, 200, 204]);

    const bulk = [await createPost(c, 'bulk-1'), await createPost(c, 'bulk-2'), await createPost(c, 'bulk-3')];
    await write(c, 'DELETE', `collections/posts/records?filter=${encodeURIComponent('title ~ "bulk-"')}`);
    await createPost(c, 'last');
    await waitForTitle(sse, 'posts/*', 'last');

    const messages = messagesOf(sse, 'posts/*');
    const expected = new Map<string, string[]>([
      [singles[0]!.id, ['create', 'update', 'update']],
      [singles[1]!.id, ['create', 'update', 'delete']],
      [singles[2]!.id, ['create', 'update']],
      [singles[3]!.id, ['create', 'update']],
      [singles[4]!.id, ['create', 'update', 'delete']],
      [batch[0]!.body!.id, ['create']],
      [batch[1]!.body!.id, ['create']],
      ...bulk.map((r) => [r.id, ['create', 'delete']] as [string, string[]]),
    ]);
    const seen = actionsById(messages);
    const lastId = messages.at(-1)!.record.id;
    expect(seen.get(lastId)).toEqual(['create']);
    seen.delete(lastId);
    expect(seen).toEqual(expected);
    // Per-record order includes the data: the batch's update carries n = 3 after the single update's 2.
    expect(messages.filter((m) => m.record.id === singles[0]!.id).map((m) => m.record.n)).toEqual([1, 2, 3]);
    // Every message on the wire carries A's client id.
    expect(new Set(sse.messages('posts/*').map((m) => m.id))).toEqual(new Set([sse.id]));
  }, 60_000);

  test('the identity lock and unknown clients across instances: 204 through B, 403 through C, 404 for an unknown id', async () => {
    const [a, b, c] = instances as [Instance, Instance, Instance];
    const sse = await stream(a);
    expect((await post(b, sse.id, ['owned/*'], 'token-alice')).status).toBe(204);

    const asBob = await post(c, sse.id, ['owned/*'], 'token-bob');
    expect(asBob.status).toBe(403);
    expect(JSON.parse(asBob.body)).toMatchObject({ status: 403 });
    expect((await post(c, sse.id, ['owned/*'])).status).toBe(403);
    // The same identity may change its subscriptions through any instance.
    expect((await post(c, sse.id, ['owned/*', 'posts/*'], 'token-alice')).status).toBe(204);
    const unknown = await post(b, 'x'.repeat(40), ['posts/*']);
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.body)).toMatchObject({ status: 404 });

    // The owner rule is checked for Alice on A whatever instance wrote the record.
    await write(c, 'POST', 'collections/owned/records', { owner: BOB.id, title: 'for bob' });
    await write(b, 'POST', 'collections/owned/records', { owner: ALICE.id, title: 'for alice' });
    await createPost(c, 'owned-marker');
    await waitForTitle(sse, 'posts/*', 'owned-marker');
    await waitForTitle(sse, 'owned/*', 'for alice');
    expect(messagesOf(sse, 'owned/*').map((m) => m.record.title)).toEqual(['for alice']);
  }, 60_000);

  test('the SDK with eventsource through the round-robin proxy: GET and POST on different instances, every message once', async () => {
    const previous = (globalThis as { EventSource?: unknown }).EventSource;
    (globalThis as { EventSource?: unknown }).EventSource = EventSource;
    const pb = new PocketBase(`${proxy.url}/backend`);
    pb.autoCancellation(false);
    pb.authStore.save('token-alice', null);
    try {
      const servedBefore = [...proxy.served];
      const received: Message[] = [];
      const unsubscribe = await pb.collection('posts').subscribe('*', (event) => received.push(event as unknown as Message));
      const servedBy = proxy.served.map((count, index) => count - servedBefore[index]!);
      // One GET (the stream, counted once its head arrived) and one POST, each on its own instance.
      expect(servedBy.reduce((x, y) => x + y, 0)).toBe(2);
      expect(servedBy.filter((count) => count === 1)).toHaveLength(2);

      const created: string[] = [];
      for (let i = 0; i < 12; i++) {
        const record = await pb.collection('posts').create({ title: `sdk-${i}`, n: i });
        created.push(record.id);
      }
      await pb.collection('posts').update(created[0]!, { n: 100 });
      await pb.collection('posts').delete(created[1]!);
      const deadline = Date.now() + 15_000;
      while (received.length < 14 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(received.filter((m) => m.action === 'create').map((m) => m.record.id)).toEqual(created);
      expect(received.filter((m) => m.action !== 'create').map((m) => [m.action, m.record.id])).toEqual([
        ['update', created[0]],
        ['delete', created[1]],
      ]);

      // Another identity on the same client id, through whatever instance the proxy picks next: 403.
      const clientId = pb.realtime.clientId;
      expect(clientId).toMatch(/^[A-Za-z0-9]{40}$/);
      for (let i = 0; i < 3; i++) expect((await post(proxy, clientId, ['posts/*'], 'token-bob')).status).toBe(403);
      const asBob = new PocketBase(`${proxy.url}/backend`);
      asBob.authStore.save('token-bob', null);
      const refused = await asBob
        .send('/api/realtime', { method: 'POST', body: { clientId, subscriptions: ['posts/*'] } })
        .then(() => undefined, (error: unknown) => error);
      expect(refused).toBeInstanceOf(ClientResponseError);
      expect((refused as ClientResponseError).status).toBe(403);
      await unsubscribe();
    } finally {
      pb.realtime.unsubscribe().catch(() => undefined);
      (globalThis as { EventSource?: unknown }).EventSource = previous;
    }
  }, 60_000);

  test('listener connections killed with pg_terminate_backend in 5 rounds while at least 300 records are written: every record arrives once on each instance', async () => {
    const [a, b, c] = instances as [Instance, Instance, Instance];
    const streams = [await stream(a), await stream(b)];
    for (const sse of streams) expect((await post(c, sse.id, ['posts/*'])).status).toBe(204);

    const listeners = async (): Promise<number[]> =>
      ((await db.raw(`SELECT pid FROM pg_stat_activity WHERE datname = ? AND application_name = 'recordbase-realtime'`, [databaseName])) as { rows: { pid: number }[] }).rows.map((r) => r.pid);
    expect((await listeners()).length).toBe(3);

    // At least 300 records, written as fast as 8 writers can, for as long as it takes the killer to
    // hit the listeners in 5 separate rounds (on a fast machine 300 creates alone could be over
    // before the second round).
    const total = 300;
    const rounds = 5;
    const created: string[] = [];
    let killRounds = 0;
    let kills = 0;
    const deadline = Date.now() + 60_000;
    const writers = Array.from({ length: 8 }, async (_, w) => {
      for (let i = w; (created.length < total || killRounds < rounds) && Date.now() < deadline; i += 8) {
        const record = await createPost(i % 2 === 0 ? b : c, `storm-${i}`, i);
        created.push(record.id);
      }
    });
    const killer = (async () => {
      while (killRounds < rounds && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 150));
        const result = (await db.raw(
          `SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity WHERE datname = ? AND application_name = 'recordbase-realtime'`,
          [databaseName],
        )) as { rows: { killed: boolean }[] };
        const killed = result.rows.filter((row) => row.killed).length;
        kills += killed;
        if (killed > 0) killRounds++;
      }
    })();
    await Promise.all([...writers, killer]);
    expect(killRounds).toBe(rounds);
    expect(kills).toBeGreaterThanOrEqual(rounds);
    expect(created.length).toBeGreaterThanOrEqual(total);

    // Every instance reconnected its listener.
    const reconnectBy = Date.now() + 15_000;
    while ((await listeners()).length < 3 && Date.now() < reconnectBy) await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await listeners()).length).toBe(3);

    await createPost(c, 'storm-end');
    for (const sse of streams) {
      await waitForTitle(sse, 'posts/*', 'storm-end', 30_000);
      const ids = messagesOf(sse, 'posts/*')
        .filter((m) => m.action === 'create' && m.record.title?.startsWith('storm-') && m.record.title !== 'storm-end')
        .map((m) => m.record.id);
      expect(ids.length).toBe(created.length);
      expect(new Set(ids).size).toBe(created.length);
      expect([...ids].sort()).toEqual([...created].sort());
    }
  }, 120_000);

  test('an instance killed with SIGKILL: its clients leave the registry within a few heartbeats, a POST for them is 404, the others keep delivering', async () => {
    const [a, b, c] = instances as [Instance, Instance, Instance];
    const survivor = await stream(a);
    expect((await post(b, survivor.id, ['posts/*'])).status).toBe(204);
    const doomed = await stream(c);
    expect((await post(a, doomed.id, ['posts/*'])).status).toBe(204);
    const clientRow = async () => (await db('_recordbase_realtime_clients').where({ client_id: doomed.id }).first()) as { instance_id: string } | undefined;
    const owner = (await clientRow())!.instance_id;
    expect(await db('_recordbase_realtime_instances').where({ instance_id: owner }).first()).toBeDefined();

    await c.kill();
    const killedAt = Date.now();
    while ((await clientRow()) !== undefined && Date.now() - killedAt < 20 * INSTANCE_HEARTBEAT_MS) await new Promise((resolve) => setTimeout(resolve, 100));
    const goneAfterMs = Date.now() - killedAt;
    expect(await clientRow()).toBeUndefined();
    expect(await db('_recordbase_realtime_instances').where({ instance_id: owner }).first()).toBeUndefined();
    // Stale after 3 heartbeats, found by the next heartbeat of a survivor, with room for a loaded machine.
    expect(goneAfterMs).toBeLessThan(12 * INSTANCE_HEARTBEAT_MS);
    expect(await db('_recordbase_realtime_clients').where({ instance_id: owner }).count({ n: '*' })).toEqual([{ n: '0' }]);

    const refused = await post(a, doomed.id, ['posts/*']);
    expect(refused.status).toBe(404);
    expect(JSON.parse(refused.body)).toMatchObject({ status: 404 });

    await createPost(b, 'after-kill');
    await waitForTitle(survivor, 'posts/*', 'after-kill');
    expect(messagesOf(survivor, 'posts/*').map((m) => m.record.title)).toEqual(['after-kill']);
  }, 60_000);
});
