/**
 * The round trips of each write plan (lib/records/write-plan.ts), as Postgres receives them: the
 * app's pool connects through a proxy that reads the wire protocol (spec/support/counting-proxy.ts),
 * so the count does not depend on which library or send path builds a statement. A plain update
 * is two statements and no transaction; a plain create (JSON or with a file) and a plain delete
 * are one; a write that needs a unit (a before-hook, a create rule, back-relations) is a
 * transaction. Postgres only: the embedded engine has no wire (statement-counts.test.ts counts
 * both engines at the driver).
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { randomBytes } from 'node:crypto';
import express from 'express';
import knexFactory, { type Knex } from 'knex';
import { createRecordsRouter, type CollectionDefinition, type RecordsRouter } from '../../lib/index.js';
import { startCountingProxy, type CountingProxy } from '../support/counting-proxy.js';
import { makePng } from '../support/file-fixtures.js';
import { createMemoryLogger } from '../support/test-app.js';
import { testEngines, testKnexLog } from '../support/test-database.js';

const OPEN = { list: '', view: '', create: '', update: '', delete: '' };
const collections: CollectionDefinition[] = [
  { name: 'users', fields: [{ name: 'name', type: 'text' }], rules: OPEN },
  {
    name: 'posts',
    fields: [
      { name: 'title', type: 'text', required: true },
      { name: 'views', type: 'number' },
      { name: 'author', type: 'relation', collection: 'users' },
      { name: 'cover', type: 'file', maxSize: 1024 * 1024, mimeTypes: ['image/png'] },
    ],
    rules: OPEN,
  },
  // A create rule with conditions: checked on a row built from the write, inside a unit.
  { name: 'guarded', fields: [{ name: 'title', type: 'text' }], rules: { ...OPEN, create: "@request.body.title != 'no'" } },
  // A beforeUpdate hook: the update runs in a unit (the hook may write through it).
  { name: 'hooked', fields: [{ name: 'title', type: 'text' }], rules: OPEN },
];

const REPEAT = 5;
const postgres = testEngines().includes('postgres');
const maybe = postgres ? describe : describe.skip;

maybe('write round trips on Postgres, counted on the wire', () => {
  let proxy: CountingProxy;
  let db: Knex;
  let router: RecordsRouter;
  let server: Server;
  let base: string;
  const schema = `rbtest_trips_${randomBytes(6).toString('hex')}`;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'rb-write-trips-'));
  const userIds: string[] = [];

  const json = (method: string, body: unknown): RequestInit => ({ method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  /** Sends a request and returns the statements Postgres received for it (a new connection's session setup left out). */
  async function statementsOf(send: () => Promise<Response>, status = 200): Promise<string[]> {
    proxy.reset();
    const res = await send();
    const body = await res.text();
    expect({ status: res.status, body: res.status === status ? '' : body }).toEqual({ status, body: '' });
    return proxy.sent.map((s) => s.text.trim()).filter((text) => !/^set search_path to /i.test(text));
  }

  async function create(collection: string, body: Record<string, unknown>): Promise<string> {
    const res = await fetch(`${base}/${collection}/records`, json('POST', body));
    expect(res.status).toBe(200);
    return ((await res.json()) as { id: string }).id;
  }

  beforeAll(async () => {
    const url = new URL(process.env.RB_TEST_POSTGRES!);
    const admin = knexFactory({ client: 'pg', connection: url.href, pool: { min: 0, max: 1 }, log: testKnexLog });
    await admin.raw(`CREATE SCHEMA "${schema}"`);
    await admin.destroy();
    proxy = await startCountingProxy({ host: url.hostname, port: Number(url.port || 5432) });
    url.hostname = '127.0.0.1';
    url.port = String(proxy.port);
    db = knexFactory({ client: 'pg', connection: url.href, searchPath: [schema], pool: { min: 0, max: 5 }, log: testKnexLog });
    router = createRecordsRouter({
      database: db,
      dataDir,
      collections,
      fileSweep: false,
      realtime: false,
      logger: createMemoryLogger(),
      hooks: { hooked: { beforeUpdate: () => undefined } },
    });
    await router.ready;
    const app = express();
    app.use('/backend', router);
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/backend/api/collections`;
    for (let i = 0; i < 3; i++) userIds.push(await create('users', { name: `user ${i}` }));
    // The pool's connections are opened (and their session set up) before anything is counted.
    await Promise.all(Array.from({ length: 8 }, () => fetch(`${base}/posts/records?perPage=1`).then((r) => r.arrayBuffer())));
  }, 60_000);

  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
    await router?.close();
    await db?.raw(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
    await db?.destroy();
    await proxy?.close();
    rmSync(dataDir, { recursive: true, force: true });
  }, 60_000);

  test('a plain update (plan versioned): 2 statements, no transaction', async () => {
    for (let i = 0; i < REPEAT; i++) {
      const id = await create('posts', { title: `post ${i}`, author: userIds[0] });
      const sent = await statementsOf(() => fetch(`${base}/posts/records/${id}`, json('PATCH', { title: `updated ${i}`, 'views+': 1 })));
      expect(sent).toHaveLength(2);
      expect(sent.filter((text) => /^(begin|commit|rollback)/i.test(text))).toEqual([]);
    }
  });

  test('a plain create (plan autocommit): 1 statement, JSON or with a file', async () => {
    const png = makePng(8, 8);
    for (let i = 0; i < REPEAT; i++) {
      expect(await statementsOf(() => fetch(`${base}/posts/records`, json('POST', { title: `created ${i}`, author: userIds[i % 3] })))).toHaveLength(1);
      const form = new FormData();
      form.append('title', `upload ${i}`);
      form.append('cover', new Blob([png], { type: 'image/png' }), 'up.png');
      expect(await statementsOf(() => fetch(`${base}/posts/records`, { method: 'POST', body: form }))).toHaveLength(1);
    }
  });

  test('a plain delete (plan autocommit): 1 statement', async () => {
    for (let i = 0; i < REPEAT; i++) {
      const id = await create('posts', { title: `doomed ${i}` });
      expect(await statementsOf(() => fetch(`${base}/posts/records/${id}`, { method: 'DELETE' }), 204)).toHaveLength(1);
    }
  });

  test('a write that needs a unit is one transaction: a before-hook, a create rule, back-relations', async () => {
    const hooked = await create('hooked', { title: 'x' });
    const user = await create('users', { name: 'doomed' });
    const writes: [string, () => Promise<Response>, number][] = [
      ['update with a beforeUpdate hook', () => fetch(`${base}/hooked/records/${hooked}`, json('PATCH', { title: 'y' })), 200],
      ['create under a create rule', () => fetch(`${base}/guarded/records`, json('POST', { title: 'yes' })), 200],
      ['delete of a record that posts point at', () => fetch(`${base}/users/records/${user}`, { method: 'DELETE' }), 204],
    ];
    for (const [name, send, status] of writes) {
      const sent = await statementsOf(send, status);
      expect({ name, first: sent[0], last: sent.at(-1) }).toEqual({ name, first: expect.stringMatching(/^begin/i), last: expect.stringMatching(/^commit/i) });
    }
  });
});
