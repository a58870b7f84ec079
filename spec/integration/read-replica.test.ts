/**
 * Reads from a read replica (issue 43, part C; DESIGN 21; docs/deployment.md "Read replicas"),
 * against a real throwaway primary and its streaming hot standby (spec/support/replica.ts), with
 * a counting proxy in front of the replica that shows which statements reached it. Two routers
 * (two instances) on the pair, each a real listening server; every client has its own address
 * (X-Forwarded-For through `trust proxy` on loopback) and identity.
 * - Lists, counts, views and expands go to the replica; a write, its rule's reads included, never does.
 * - Attack: a membership revoked on the primary while replay is paused: the revoked user's reads
 *   through the replica stop within maxLagMs of the revoke's commit (the documented bound).
 * - Read-your-writes: a caller's write, then its read at once on the same and on the other
 *   instance, sees the write with replay paused; another caller meanwhile reads the replica.
 * - The replica stopped mid-load: every read answers (from the primary), the status says so;
 *   started again, it takes reads again.
 * Postgres only by nature (two clusters of its own); the embedded engine refuses the option.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import knexFactory, { type Knex } from 'knex';
import { createAppServer, createRecordsRouter, type CollectionDefinition, type RecordsRouter } from '../../lib/index.js';
import { resolveOptions } from '../../lib/options.js';
import { startCountingProxy, type CountingProxy } from '../support/counting-proxy.js';
import { startPrimaryWithReplica, type PrimaryWithReplica } from '../support/replica.js';
import { testKnexLog } from '../support/test-database.js';

const TIMEOUT_MS = 120_000;
const MAX_LAG_MS = 1500;

const collections: CollectionDefinition[] = [
  { name: 'members', type: 'base', fields: [{ name: 'user', type: 'text' }], rules: { list: '', view: '' } },
  {
    name: 'posts',
    type: 'base',
    fields: [
      { name: 'title', type: 'text' },
      { name: 'owner', type: 'text' },
      { name: 'tag', type: 'relation', collection: 'tags', maxSelect: 1 },
    ],
    rules: {
      list: '@collection.members.user ?= @request.auth.id',
      view: '@collection.members.user ?= @request.auth.id',
      // A write's rule reads another collection: it must be read on the primary.
      create: '@collection.members.user ?= @request.auth.id && owner = @request.auth.id',
    },
  },
  { name: 'tags', type: 'base', fields: [{ name: 'name', type: 'text' }], rules: { list: '', view: '' } },
];

interface Instance {
  router: RecordsRouter;
  baseUrl: string;
  primary: Knex;
  replica: Knex;
  close(): Promise<void>;
}

/** Each user's own address, as a proxy in front would say it. */
const ADDRESSES: Record<string, string> = { root: '10.0.0.1', alice: '10.0.0.2', bob: '10.0.0.3', carol: '10.0.0.4' };

async function startInstance(pair: PrimaryWithReplica, proxy: CountingProxy, dataDir: string): Promise<Instance> {
  const primary = knexFactory({ client: 'pg', connection: pair.primary.url, pool: { min: 0, max: 6 }, log: testKnexLog });
  const replica = knexFactory({ client: 'pg', connection: `postgres://postgres@127.0.0.1:${proxy.port}/postgres`, pool: { min: 0, max: 6 }, log: testKnexLog });
  const router = createRecordsRouter({
    collections,
    database: primary,
    readReplica: { database: replica, maxLagMs: MAX_LAG_MS },
    dataDir,
    realtime: false,
    fileSweep: false,
    auth: (token) => (token === 'root' ? { id: 'root', superuser: true } : { id: token }),
    logger: { error: () => undefined, warn: () => undefined, info: () => undefined },
  });
  await router.ready;
  const app = express();
  app.set('trust proxy', 'loopback');
  app.use('/backend', router);
  const server: Server = createAppServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    router,
    primary,
    replica,
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/backend`,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await router.close();
      await primary.destroy();
      await replica.destroy();
    },
  };
}

/** A request as `user` from its own address: status and JSON body. */
async function call(instance: Instance, user: string, method: string, urlPath: string, body?: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(`${instance.baseUrl}${urlPath}`, {
    method,
    headers: { authorization: user, 'x-forwarded-for': ADDRESSES[user]!, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

/** Statements that reached the replica about records (not the lag monitor's own). */
function recordStatements(proxy: CountingProxy): string[] {
  return proxy.sent.map((s) => s.text).filter((text) => /"(posts|members|tags)"/.test(text));
}

async function until(what: string, probe: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * Reads keep the lag sampled; once the replica has caught up the instance says `replica`, and
 * once it has replayed every earlier write no caller is fenced (an earlier test's writer would
 * otherwise still read from the primary, rightly).
 */
async function untilOnReplica(instance: Instance): Promise<void> {
  await until('the instance reads from the replica', async () => {
    await call(instance, 'carol', 'GET', '/api/collections/tags/records');
    const status = instance.router.replicaStatus();
    return status?.state === 'replica' && status.fencedCallers === 0;
  });
}

describe('readReplica on the embedded engine', () => {
  test('is refused at once: the embedded engine has no replicas', async () => {
    const replica = knexFactory({ client: 'pg', connection: 'postgres://nobody@127.0.0.1:1/none', pool: { min: 0, max: 1 } });
    try {
      expect(() => resolveOptions({ collections: [], readReplica: replica }, {})).toThrow(/readReplica needs `database`/);
    } finally {
      await replica.destroy();
    }
  });
});

describe('reads from a read replica', () => {
  let pair: PrimaryWithReplica;
  let proxy: CountingProxy;
  let a: Instance;
  let b: Instance;
  let dataDir: string;
  let postId: string;
  let aliceMembership: string;

  beforeAll(async () => {
    pair = await startPrimaryWithReplica();
    proxy = await startCountingProxy({ host: '127.0.0.1', port: pair.replica.port });
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'rb-replica-'));
    a = await startInstance(pair, proxy, path.join(dataDir, 'a'));
    b = await startInstance(pair, proxy, path.join(dataDir, 'b'));
    const tag = await call(a, 'root', 'POST', '/api/collections/tags/records', { name: 'news' });
    aliceMembership = (await call(a, 'root', 'POST', '/api/collections/members/records', { user: 'alice' })).body.id;
    await call(a, 'root', 'POST', '/api/collections/members/records', { user: 'bob' });
    postId = (await call(a, 'root', 'POST', '/api/collections/posts/records', { title: 'first', owner: 'root', tag: tag.body.id })).body.id;
    await pair.waitForReplay();
  }, TIMEOUT_MS);

  afterEach(async () => {
    await pair?.resumeReplay().catch(() => undefined);
  }, TIMEOUT_MS);

  afterAll(async () => {
    await a?.close();
    await b?.close();
    await proxy?.close();
    await pair?.destroy();
    if (dataDir) await fs.rm(dataDir, { recursive: true, force: true });
  }, TIMEOUT_MS);

  test('lists, counts, views and expands go to the replica; a write and its rule never do', async () => {
    await untilOnReplica(a);
    proxy.reset();
    const list = await call(a, 'alice', 'GET', '/api/collections/posts/records?expand=tag');
    expect(list.status).toBe(200);
    expect(list.body.totalItems).toBe(1);
    expect(list.body.items[0].expand.tag.name).toBe('news');
    expect((await call(a, 'alice', 'GET', `/api/collections/posts/records/${postId}`)).status).toBe(200);
    const onReplica = recordStatements(proxy);
    expect(onReplica.some((text) => /FROM "posts"/.test(text) && /LIMIT/i.test(text))).toBe(true); // the page
    expect(onReplica.some((text) => /count\(\*\)/.test(text))).toBe(true); // its count
    expect(onReplica.some((text) => /FROM "tags"/.test(text))).toBe(true); // the expansion

    proxy.reset();
    const created = await call(a, 'alice', 'POST', '/api/collections/posts/records', { title: 'mine', owner: 'alice' });
    expect(created.status).toBe(200);
    const refused = await call(a, 'alice', 'POST', '/api/collections/posts/records', { title: 'not mine', owner: 'bob' });
    expect(refused.status).toBe(403);
    // The rule read members; the insert and its check ran on the primary: nothing of either reached the replica.
    expect(recordStatements(proxy)).toEqual([]);
  }, TIMEOUT_MS);

  test('attack: a revoked membership stops showing through the lagging replica within maxLagMs', async () => {
    await pair.waitForReplay();
    await untilOnReplica(a);
    await pair.pauseReplay();
    const revokeSent = performance.now();
    expect((await call(a, 'root', 'DELETE', `/api/collections/members/records/${aliceMembership}`)).status).toBe(204);
    const revoked = performance.now();
    // The revoke is on the primary at once.
    expect((await call(a, 'root', 'GET', `/api/collections/members/records?filter=${encodeURIComponent("user='alice'")}`)).body.totalItems).toBe(0);
    const reads: { startedAt: number; status: number; saw: number }[] = [];
    while (performance.now() - revoked < MAX_LAG_MS + 1000) {
      const startedAt = performance.now();
      const response = await call(a, 'alice', 'GET', '/api/collections/posts/records');
      reads.push({ startedAt, status: response.status, saw: response.body.totalItems });
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(reads.every((read) => read.status === 200)).toBe(true);
    // Stale reads did happen through the replica (the bound is what limits them)...
    expect(reads.some((read) => read.saw > 0)).toBe(true);
    // ...and none started later than maxLagMs after the revoke committed (it committed before `revoked`).
    const lastStale = Math.max(...reads.filter((read) => read.saw > 0).map((read) => read.startedAt));
    expect(lastStale - revokeSent).toBeLessThanOrEqual(MAX_LAG_MS);
    expect(reads.filter((read) => read.startedAt > revoked + MAX_LAG_MS).every((read) => read.saw === 0)).toBe(true);
    expect(a.router.replicaStatus()).toMatchObject({ state: 'lagging' });
    await pair.resumeReplay();
    await pair.waitForReplay();
  }, TIMEOUT_MS);

  test("read-your-writes: a caller's write is read at once on both instances with replay paused; another caller still reads the replica", async () => {
    await untilOnReplica(a);
    await untilOnReplica(b);
    await pair.pauseReplay();
    const created = await call(a, 'bob', 'POST', '/api/collections/posts/records', { title: 'fresh', owner: 'bob' });
    expect(created.status).toBe(200);
    const id = created.body.id as string;
    // The write is on the primary only: the replica does not have it.
    await pair.waitForReceive();
    proxy.reset();
    // Same instance, then the other one, at once.
    expect((await call(a, 'bob', 'GET', `/api/collections/posts/records/${id}`)).status).toBe(200);
    expect((await call(b, 'bob', 'GET', `/api/collections/posts/records/${id}`)).status).toBe(200);
    const bobsList = await call(b, 'bob', 'GET', `/api/collections/posts/records?filter=${encodeURIComponent(`id='${id}'`)}`);
    expect(bobsList.body.totalItems).toBe(1);
    // Bob's reads went to the primary: none of them reached the replica.
    expect(recordStatements(proxy)).toEqual([]);
    // Carol (another caller, a member too: see the grant below) reads the replica meanwhile: she does not see bob's post yet.
    const carol = await call(b, 'carol', 'GET', '/api/collections/tags/records');
    expect(carol.status).toBe(200);
    expect(recordStatements(proxy).some((text) => /FROM "tags"/.test(text))).toBe(true);
    const aliceList = await call(b, 'alice', 'GET', `/api/collections/members/records?filter=${encodeURIComponent(`user='bob'`)}`);
    expect(aliceList.status).toBe(200);
    expect(recordStatements(proxy).filter((text) => /FROM "members"/.test(text)).length).toBeGreaterThan(0);
    expect(a.router.replicaStatus()!.fencedCallers).toBeGreaterThan(0);
    await pair.resumeReplay();
    await pair.waitForReplay();
  }, TIMEOUT_MS);

  test('a replica stopped mid-load: every read answers from the primary and the status says so; started again it takes reads again', async () => {
    await untilOnReplica(a);
    let stop = false;
    const statuses: number[] = [];
    const load = Array.from({ length: 4 }, async () => {
      while (!stop) {
        statuses.push((await call(a, 'bob', 'GET', '/api/collections/posts/records?expand=tag')).status);
        statuses.push((await call(a, 'carol', 'GET', '/api/collections/tags/records')).status);
      }
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    await pair.stopReplica();
    await until('the status says the replica fails', () => a.router.replicaStatus()!.state === 'failing');
    const failedAt = statuses.length;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(statuses.length).toBeGreaterThan(failedAt);
    await pair.startReplica();
    await pair.waitForReplay();
    await until('the replica takes reads again', () => a.router.replicaStatus()!.state === 'replica');
    proxy.reset();
    await new Promise((resolve) => setTimeout(resolve, 200));
    stop = true;
    await Promise.all(load);
    expect(statuses.filter((status) => status !== 200)).toEqual([]);
    expect(recordStatements(proxy).length).toBeGreaterThan(0);
  }, TIMEOUT_MS);
});
