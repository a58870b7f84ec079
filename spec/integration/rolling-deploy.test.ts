import { afterEach, beforeAll, beforeEach, describe, expect, test } from '@jest/globals';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import type { Knex } from 'knex';
import { createRecordsRouter, diskStorage, SchemaError, type RecordsRouter } from '../../lib/index.js';
import type { CollectionDefinition } from '../../lib/schema/definitions.js';
import { buildSchemaRegistry } from '../../lib/schema/collection-schema.js';
import { embeddedDatabaseDir, openEmbeddedDatabase } from '../../lib/db/engine/open-embedded-database.js';
import { planDatabaseSync } from '../../lib/db/schema/sync-database-schema.js';
import { sweepUnreferencedFiles } from '../../lib/files/sweep-files.js';
import { ensureBuilt } from '../support/built-package.js';
import { startInstances, type Instance } from '../support/multi-instance.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { openSse, type SseConnection } from '../support/sse-reader.js';
import { createMemoryLogger, TEST_IDENTITIES } from '../support/test-app.js';
import { openTestDatabase, testEngines, testKnexLog, type Engine, type TestDatabase } from '../support/test-database.js';

/** The release before: notes with a title. */
const OLD: CollectionDefinition[] = [{ name: 'notes', fields: [{ name: 'title', type: 'text' }], rules: OPEN_RULES }];

/** The release after: a field of every storage kind added to notes, and a new collection. */
const NEW: CollectionDefinition[] = [
  {
    name: 'notes',
    fields: [
      { name: 'title', type: 'text' }, { name: 'rating', type: 'number' }, { name: 'done', type: 'bool' }, { name: 'due', type: 'date' },
      { name: 'meta', type: 'json' }, { name: 'labels', type: 'select', values: ['a', 'b'], maxSelect: 2 }, { name: 'place', type: 'geoPoint' },
      { name: 'summary', type: 'text' }, { name: 'attachment', type: 'file', maxSelect: 1 },
    ],
    rules: OPEN_RULES,
  },
  { name: 'tags', fields: [{ name: 'label', type: 'text' }], rules: OPEN_RULES },
];

/** The newer fields' values a test writes, and reads back as written. */
const NEWER_VALUES = { rating: 4, done: true, due: '2025-01-02 03:04:05.000Z', meta: { k: [1, 2] }, labels: ['a', 'b'], place: { lon: 2.5, lat: 48.5 }, summary: 'newer' };
const NEWER_FIELDS = [...Object.keys(NEWER_VALUES), 'attachment'];

type Json = Record<string, any>;

/** One request to a router mounted at `/backend` of `base`: the status and the parsed body. */
async function call(base: string, method: string, rest: string, body?: unknown): Promise<{ status: number; body: Json }> {
  const isForm = body instanceof FormData;
  const response = await fetch(`${base}/backend/api/${rest}`, {
    method,
    headers: body === undefined || isForm ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : isForm ? body : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text === '' ? {} : (JSON.parse(text) as Json) };
}

/** `call`, expecting a success (200, or 204 for realtime's POST). */
async function ok(base: string, method: string, rest: string, body?: unknown): Promise<Json> {
  const res = await call(base, method, rest, body);
  if (res.status !== 200 && res.status !== 204) throw new Error(`${method} ${rest}: HTTP ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** A multipart create of a note with the newer values and an attachment. */
function newerNoteForm(title: string): FormData {
  const form = new FormData();
  form.append('title', title);
  for (const [name, value] of Object.entries(NEWER_VALUES)) {
    if (Array.isArray(value)) for (const item of value) form.append(name, item);
    else form.append(name, typeof value === 'object' ? JSON.stringify(value) : String(value));
  }
  form.append('attachment', new Blob([Buffer.from('kept across releases')], { type: 'text/plain' }), 'kept.txt');
  return form;
}

/** Opens a realtime stream on `base`, subscribed to `notes`. */
async function subscribeToNotes(base: string, open: SseConnection[]): Promise<SseConnection> {
  const sse = await openSse(`${base}/backend/api/realtime`);
  open.push(sse);
  expect(sse.status).toBe(200);
  await ok(base, 'POST', 'realtime', { clientId: await sse.clientId(), subscriptions: ['notes'] });
  return sse;
}

/** The record of the first `notes` message on `sse` for record `id`. */
async function nextMessageFor(sse: SseConnection, id: string): Promise<Json> {
  const event = await sse.next((e) => e.event === 'notes' && (JSON.parse(e.data!) as Json).record.id === id, { timeoutMs: 15_000 });
  return (JSON.parse(event.data!) as Json).record as Json;
}

const sortedKeys = (record: Json) => Object.keys(record).sort();

describe.each(testEngines())('older code on a newer database, one release at a time, on %s', (engine: Engine) => {
  let dir: string;
  let database: TestDatabase | undefined;
  const running: Array<{ close(): Promise<void> }> = [];
  const open: SseConnection[] = [];

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'rb-rolling-'));
    // PGlite: each release opens the embedded database in the one data dir, as a restarted process would.
    if (engine === 'postgres') database = await openTestDatabase('postgres');
  });
  afterEach(async () => {
    for (const sse of open.splice(0)) sse.close();
    for (const app of running.splice(0)) await app.close();
    await database?.destroy();
    await fs.rm(dir, { recursive: true, force: true });
  });

  const storageRoot = () => path.join(dir, 'files');

  /** Starts a release's router on the one database and storage, listening; `close` stops it and frees the database. */
  async function release(collections: CollectionDefinition[]): Promise<{ base: string; router: RecordsRouter; lines: string[]; close(): Promise<void> }> {
    const logger = createMemoryLogger();
    const router = createRecordsRouter({
      collections,
      ...(database ? { database: database.db } : {}),
      dataDir: dir,
      storage: diskStorage({ root: storageRoot() }),
      logger,
      fileSweep: false,
      thumbnailWorkers: 1,
    });
    await router.ready;
    const app = express();
    app.use('/backend', router);
    const server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    let closed = false;
    const handle = {
      base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      router,
      lines: logger.lines,
      async close() {
        if (closed) return;
        closed = true;
        for (const sse of open.splice(0)) sse.close();
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        await router.close();
      },
    };
    running.push(handle);
    return handle;
  }

  /** Runs `fn` on the database while no release runs (PGlite: the data dir's embedded database, opened and closed). */
  async function direct<T>(fn: (db: Knex) => Promise<T>): Promise<T> {
    if (database) return fn(database.db);
    const db = openEmbeddedDatabase(embeddedDatabaseDir(dir), { log: testKnexLog });
    try {
      return await fn(db);
    } finally {
      await db.destroy();
    }
  }

  test('new -> old -> new: the older release serves without the newer fields, its writes leave them at their defaults, and the newer one finds everything as it left it', async () => {
    // The newer release: every newer field set, a file, and a record of the newer collection.
    const newer = await release(NEW);
    const n1 = await ok(newer.base, 'POST', 'collections/notes/records', newerNoteForm('n1'));
    const gone = await ok(newer.base, 'POST', 'collections/notes/records', newerNoteForm('gone'));
    const tag = await ok(newer.base, 'POST', 'collections/tags/records', { label: 'x' });
    await newer.close();
    // A leftover file: its record went without the request that would have removed it.
    await direct((db) => db('notes').where('id', gone.id).delete());

    // The older release starts on the newer database and says once what it leaves alone.
    const old = await release(OLD);
    const leftAlone = old.lines.filter((line) => line.includes('left alone'));
    expect(leftAlone).toHaveLength(1);
    expect(leftAlone[0]).toContain('table "tags"');
    for (const field of NEWER_FIELDS) expect(leftAlone[0]).toContain(`column "notes"."${field}"`);

    const o1 = await ok(old.base, 'POST', 'collections/notes/records', { title: 'o1' });
    const declaredKeys = sortedKeys(o1);
    expect(declaredKeys).not.toContain('rating');
    const stream = await subscribeToNotes(old.base, open);
    const updated = await ok(old.base, 'PATCH', `collections/notes/records/${n1.id}`, { title: 'n1 (old)' });
    expect(sortedKeys(updated)).toEqual(declaredKeys);
    // The outbox row holds every column of the table; the message carries the declared fields only.
    const message = await nextMessageFor(stream, n1.id);
    expect(sortedKeys(message)).toEqual(declaredKeys);
    expect(message.title).toBe('n1 (old)');
    expect(sortedKeys(await ok(old.base, 'GET', `collections/notes/records/${n1.id}`))).toEqual(declaredKeys);
    const list = await ok(old.base, 'GET', `collections/notes/records?filter=${encodeURIComponent('title ~ "n1"')}&sort=-created`);
    expect(list.items.map((r: Json) => r.id)).toEqual([n1.id]);
    expect(sortedKeys(list.items[0])).toEqual(declaredKeys);
    // A newer field is not the older release's to read: no filter, sort or fields on it, no expand through it.
    expect((await call(old.base, 'GET', `collections/notes/records?filter=${encodeURIComponent('rating > 1')}`)).status).toBe(400);
    expect((await call(old.base, 'GET', 'collections/notes/records?sort=rating')).status).toBe(400);
    expect((await ok(old.base, 'GET', 'collections/notes/records?fields=id,rating')).items.every((r: Json) => !('rating' in r))).toBe(true);
    // Nor is the newer collection.
    expect((await call(old.base, 'GET', `collections/tags/records/${tag.id}`)).status).toBe(404);
    await old.close();

    // The older release's file sweep: the newer field's file of a living record stays; the leftover goes.
    const swept = await direct((db) =>
      sweepUnreferencedFiles({ database: db, registry: buildSchemaRegistry(OLD), storage: diskStorage({ root: storageRoot() }), minAgeMs: 0, now: new Date(Date.now() + 60_000) }),
    );
    expect(swept).toMatchObject({ removed: 1, failed: 0, locked: true });

    // The newer release again: nothing to plan, nothing left alone, every value where it was.
    const again = await release(NEW);
    expect(again.lines.filter((line) => line.includes('left alone'))).toEqual([]);
    const n1Again = await ok(again.base, 'GET', `collections/notes/records/${n1.id}`);
    expect(n1Again).toMatchObject({ ...NEWER_VALUES, title: 'n1 (old)', attachment: n1.attachment });
    const file = await fetch(`${again.base}/backend/api/files/${n1.collectionId}/${n1.id}/${n1.attachment}`);
    expect(file.status).toBe(200);
    expect(await file.text()).toBe('kept across releases');
    // The older release's create left each newer column at the empty value the newer release gives a field it is not sent.
    const fresh = await ok(again.base, 'POST', 'collections/notes/records', { title: 'fresh' });
    const o1Again = await ok(again.base, 'GET', `collections/notes/records/${o1.id}`);
    for (const field of NEWER_FIELDS) expect([field, o1Again[field]]).toEqual([field, fresh[field]]);
    expect((await ok(again.base, 'GET', `collections/tags/records/${tag.id}`)).label).toBe('x');
    await again.close();
    await direct(async (db) => {
      const plan = await planDatabaseSync(db, buildSchemaRegistry(NEW).collections);
      expect(plan.statements).toEqual([]);
      expect(plan.applied.size).toBe(0);
    });
  });

  test('a declared field whose column holds another type refuses to start, naming collection, field and the way to change it', async () => {
    const newer = await release(NEW);
    await newer.close();
    const wrong: CollectionDefinition[] = [{ name: 'notes', fields: [{ name: 'title', type: 'text' }, { name: 'rating', type: 'text' }], rules: OPEN_RULES }];
    const router = createRecordsRouter({ collections: wrong, ...(database ? { database: database.db } : {}), dataDir: dir, logger: createMemoryLogger(), fileSweep: false });
    running.push(router);
    const error = await router.ready.then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(SchemaError);
    expect((error as Error).message).toContain('collection "notes", field "rating"');
    expect((error as Error).message).toContain('a migration (docs/collections.md, Changing your schema)');
  });
});

// Two processes at once need a server: PGlite belongs to one process.
const orders = testEngines().includes('postgres') ? (['older first', 'newer first', 'both at once'] as const) : [];
if (orders.length === 0) console.warn('Postgres is not reachable: the two-process rolling deploy suite does not run.');

describe.each(orders)('an older and a newer instance as two processes on one Postgres, started %s', (order) => {
  let database: TestDatabase;
  let storageRoot: string;
  const stops: Array<() => Promise<void>> = [];
  const open: SseConnection[] = [];

  beforeAll(async () => {
    await ensureBuilt();
  }, 180_000);
  beforeEach(async () => {
    database = await openTestDatabase('postgres');
    storageRoot = await fs.mkdtemp(path.join(os.tmpdir(), 'rb-rolling-storage-'));
  });
  afterEach(async () => {
    for (const sse of open.splice(0)) sse.close();
    for (const stop of stops.splice(0)) await stop();
    await database?.destroy();
    await fs.rm(storageRoot, { recursive: true, force: true });
  });

  async function start(collections: CollectionDefinition[]): Promise<Instance> {
    const schema = ((await database.db.raw('SELECT current_schema() AS s')) as { rows: { s: string }[] }).rows[0]!.s;
    const started = await startInstances({ count: 1, databaseUrl: process.env.RB_TEST_POSTGRES!, schema, storage: { kind: 'disk', root: storageRoot }, collections, identities: TEST_IDENTITIES });
    stops.push(started.stopAll);
    return started.instances[0]!;
  }

  test('both serve reads and writes; the older one never returns a newer field, its creates leave them at their defaults, and it restarts', async () => {
    let old: Instance;
    let newer: Instance;
    if (order === 'older first') {
      old = await start(OLD);
      newer = await start(NEW);
    } else if (order === 'newer first') {
      newer = await start(NEW);
      old = await start(OLD);
    } else {
      [old, newer] = await Promise.all([start(OLD), start(NEW)]);
    }
    const stream = await subscribeToNotes(old.url, open);

    const n1 = await ok(newer.url, 'POST', 'collections/notes/records', { title: 'n1', ...NEWER_VALUES });
    const o1 = await ok(old.url, 'POST', 'collections/notes/records', { title: 'o1' });
    const declaredKeys = sortedKeys(o1);
    expect(declaredKeys).not.toContain('rating');
    // A newer write reaches the older instance's stream with the declared fields only.
    expect(sortedKeys(await nextMessageFor(stream, n1.id))).toEqual(declaredKeys);

    // Each updates the other's record; neither loses what the other wrote.
    await ok(old.url, 'PATCH', `collections/notes/records/${n1.id}`, { title: 'n1 (old)' });
    await ok(newer.url, 'PATCH', `collections/notes/records/${o1.id}`, { rating: 2 });
    expect(await ok(newer.url, 'GET', `collections/notes/records/${n1.id}`)).toMatchObject({ ...NEWER_VALUES, title: 'n1 (old)' });
    const o1ByNewer = await ok(newer.url, 'GET', `collections/notes/records/${o1.id}`);
    const fresh = await ok(newer.url, 'POST', 'collections/notes/records', { title: 'fresh' });
    for (const field of NEWER_FIELDS.filter((f) => f !== 'rating')) expect([field, o1ByNewer[field]]).toEqual([field, fresh[field]]);
    expect(o1ByNewer.rating).toBe(2);

    // Lists and filters on both; the older one never shows a newer field.
    const oldList = await ok(old.url, 'GET', `collections/notes/records?filter=${encodeURIComponent('title ~ "n1" || title = "o1"')}&sort=title`);
    expect(oldList.items.map((r: Json) => r.title)).toEqual(['n1 (old)', 'o1']);
    for (const record of oldList.items) expect(sortedKeys(record)).toEqual(declaredKeys);
    const newList = await ok(newer.url, 'GET', `collections/notes/records?filter=${encodeURIComponent('rating >= 2')}&sort=rating`);
    expect(newList.items.map((r: Json) => r.id)).toEqual([o1.id, n1.id]);
    expect((await call(old.url, 'GET', `collections/notes/records?filter=${encodeURIComponent('rating >= 2')}`)).status).toBe(400);

    // The older one restarts after the newer one synced, and serves.
    await old.kill();
    const restarted = await start(OLD);
    const read = await ok(restarted.url, 'GET', `collections/notes/records/${n1.id}`);
    expect(sortedKeys(read)).toEqual(declaredKeys);
    expect(read.title).toBe('n1 (old)');
    await ok(restarted.url, 'POST', 'collections/notes/records', { title: 'o2' });
  }, 90_000);
});
