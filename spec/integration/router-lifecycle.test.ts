import { mkdtemp, rm } from 'node:fs/promises';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Server } from 'node:http';
import express from 'express';
import knexFactory, { type Knex } from 'knex';
import ClientPgLite from 'knex-pglite';
import supertest from 'supertest';
import { createRecordsRouter, SchemaError, type RecordsRouter } from '../../lib/index.js';
import { resolveOptions } from '../../lib/options.js';
import { openMemoryDatabase } from '../../lib/db/engine/open-embedded-database.js';
import { createMemoryLogger } from '../support/test-app.js';
import { testKnexLog } from '../support/test-database.js';

const notes = [{ name: 'notes', fields: [{ name: 'text', type: 'text' as const }], rules: { list: '', view: '', create: '' } }];

/** One list request through `router`, mounted in a throwaway server: what a client sees. */
async function listThrough(router: RecordsRouter): Promise<{ status: number; body: { message: string } }> {
  const { http, server } = await serve(router);
  try {
    const res = await http.get('/backend/api/collections/notes/records');
    return { status: res.status, body: res.body };
  } finally {
    server.close();
  }
}

async function serve(router: RecordsRouter, prefix = '/backend'): Promise<{ http: supertest.Agent; server: Server }> {
  const app = express();
  app.use(prefix, router);
  app.get('/host-route', (_req, res) => void res.json({ host: true }));
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const address = server.address() as { port: number };
  return { http: supertest.agent(`http://127.0.0.1:${address.port}`), server };
}

describe('router lifecycle', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rb-lifecycle-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test('without a database it uses the embedded engine under dataDir/db, and data survives a restart', async () => {
    const first = createRecordsRouter({ collections: notes, dataDir: dir, logger: createMemoryLogger() });
    const a = await serve(first, '/any/prefix');
    // sent before `ready` resolved: it waits instead of failing
    const created = await a.http.post('/any/prefix/api/collections/notes/records').send({ text: 'persisted' });
    expect(created.status).toBe(200);
    expect((await a.http.get('/host-route')).body).toEqual({ host: true });
    a.server.close();
    await first.close();

    const second = createRecordsRouter({ collections: notes, dataDir: dir, logger: createMemoryLogger() });
    await second.ready;
    const b = await serve(second);
    const view = await b.http.get(`/backend/api/collections/notes/records/${created.body.id}`);
    expect(view.status).toBe(200);
    expect(view.body.text).toBe('persisted');
    b.server.close();
    await second.close();
  });

  test('a database that cannot be reached: ready rejects and every request is a 503 carrying the reason', async () => {
    const logger = createMemoryLogger();
    const database = knexFactory({ client: 'pg', connection: 'postgres://postgres@127.0.0.1:1/none', pool: { min: 0, max: 1 }, acquireConnectionTimeout: 2000, log: testKnexLog });
    const router = createRecordsRouter({ collections: notes, database, logger });
    await expect(router.ready).rejects.toThrow();
    const { http, server } = await serve(router);
    const res = await http.get('/backend/api/collections/notes/records');
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ status: 503, message: expect.stringContaining('recordbase could not start'), data: {} });
    expect(res.body.message).toMatch(/ECONNREFUSED|connect/);
    expect(logger.lines.join('\n')).toContain('initialisation failed');
    server.close();
    await router.close();
    await database.destroy();
  });

  test('a Knex without connection settings (DATABASE_URL unset): ready rejects saying so, requests get it as 503', async () => {
    const database = knexFactory({ client: 'pg', connection: process.env.RB_UNSET_DATABASE_URL });
    const router = createRecordsRouter({ collections: notes, database, logger: createMemoryLogger() });
    const reason = 'The Knex instance given as `database` has no connection settings (its `connection` is undefined; is DATABASE_URL set?)';
    await expect(router.ready).rejects.toThrow(reason);
    await expect(listThrough(router)).resolves.toMatchObject({ status: 503, body: { message: expect.stringContaining(`recordbase could not start: ${reason}`) } });
    await router.close();
    await database.destroy();
  });

  test('a Postgres dialect whose connections cannot LISTEN (knex-pglite): with realtime on, ready rejects saying so; with realtime: false it serves', async () => {
    // knex-pglite's connections are PGlite instances, not node-postgres clients: realtime's
    // listener cannot subscribe on them. Before, ready failed with "next.on is not a function".
    const open = (folder: string) =>
      knexFactory({ client: ClientPgLite as unknown as typeof Knex.Client, dialect: 'postgres', connection: { filename: join(dir, folder) } as Knex.StaticConnectionConfig });
    const withRealtime = open('pglite-realtime');
    const logger = createMemoryLogger();
    const refused = createRecordsRouter({ collections: notes, database: withRealtime, logger });
    const reason = 'realtime listens for changes over a node-postgres connection';
    await expect(refused.ready).rejects.toThrow(reason);
    await expect(refused.ready).rejects.toThrow('realtime: false');
    await expect(listThrough(refused)).resolves.toMatchObject({ status: 503, body: { message: expect.stringContaining(reason) } });
    await refused.close();
    await withRealtime.destroy();

    const withoutRealtime = open('pglite-plain');
    const served = createRecordsRouter({ collections: notes, database: withoutRealtime, realtime: false, logger: createMemoryLogger() });
    await served.ready;
    const { http, server } = await serve(served);
    try {
      const created = await http.post('/backend/api/collections/notes/records').send({ text: 'kept' });
      expect(created.status).toBe(200);
      const listed = await http.get('/backend/api/collections/notes/records');
      expect(listed.body.items.map((item: { text: string }) => item.text)).toEqual(['kept']);
    } finally {
      server.close();
      await served.close();
      await withoutRealtime.destroy();
    }
  }, 60_000);

  test('an unsafe schema change: ready rejects with a message naming collection and field; requests get it as 503', async () => {
    const first = createRecordsRouter({ collections: notes, dataDir: dir, logger: createMemoryLogger() });
    await first.ready;
    await first.close();
    const changed = [{ name: 'notes', fields: [{ name: 'text', type: 'number' as const }] }];
    const second = createRecordsRouter({ collections: changed, dataDir: dir, logger: createMemoryLogger() });
    await expect(second.ready).rejects.toThrow(SchemaError);
    const { http, server } = await serve(second);
    const res = await http.get('/backend/api/collections/notes/records');
    expect(res.status).toBe(503);
    expect(res.body.message).toContain('collection "notes", field "text"');
    server.close();
    await second.close();
  });

  test('invalid definitions throw at creation, naming what is wrong', () => {
    expect(() => createRecordsRouter({ collections: [{ name: 'Bad Name', fields: [] }], dataDir: dir })).toThrow(/collection "Bad Name"/);
    expect(() => createRecordsRouter({ collections: [{ name: 'a', fields: [{ name: 'id', type: 'text' }] }], dataDir: dir })).toThrow(/field "id": the id field needs "pattern"/);
    expect(() =>
      createRecordsRouter({ collections: [{ name: 'a', fields: [{ name: 'r', type: 'relation', collection: 'missing' }] }], dataDir: dir }),
    ).toThrow(/collection "a", field "r": relation target "missing"/);
    expect(() => createRecordsRouter({ collections: [{ name: 'a', fields: [{ name: 's', type: 'select', values: [] }] }], dataDir: dir })).toThrow(/values/);
    expect(() => createRecordsRouter({ collections: [{ name: 'a', fields: [] }, { name: 'a', fields: [] }], dataDir: dir })).toThrow(/used by/);
  });

  test.each([
    [{ thumbs: ['100X100'] }, /field "f": thumbs entry "100X100"/],
    [{ thumbs: ['0x0'] }, /thumbs entry "0x0"/],
    [{ thumbs: ['3000x10'] }, /thumbs entry "3000x10"/],
    [{ thumbs: '100x100' }, /thumbs must be an array/],
    [{ maxSize: -1 }, /maxSize must be a positive integer/],
    [{ maxSize: 1.5 }, /maxSize must be a positive integer/],
    [{ mimeTypes: ['png'] }, /mimeTypes must be an array of MIME types/],
  ])('file field options are checked at creation: %j', (options, message) => {
    const field = { name: 'f', type: 'file', ...options } as never;
    expect(() => createRecordsRouter({ collections: [{ name: 'a', fields: [field] }], dataDir: dir })).toThrow(message);
  });

  test('valid file field options are accepted', () => {
    const field = { name: 'f', type: 'file' as const, maxSize: 10, mimeTypes: ['image/png', 'application/vnd.ms-excel'], thumbs: ['100x100', '0x50', '50x0', '20x20t', '20x20b', '20x20f'] };
    expect(() => createRecordsRouter({ collections: [{ name: 'a', fields: [field] }], dataDir: dir, logger: createMemoryLogger() }).close()).not.toThrow();
  });

  test('file options are checked: multipartUpdate, fileTokenSecret, thumbnail, thumbnailWorkers, fileSweep', () => {
    expect(() => resolveOptions({ collections: [], multipartUpdate: 'patch' as never }, {})).toThrow(/multipartUpdate must be "replace" or "merge"/);
    expect(() => resolveOptions({ collections: [], fileTokenSecret: 'short' }, {})).toThrow(/at least 32 characters/);
    expect(() => resolveOptions({ collections: [], thumbnail: 'jimp' as never }, {})).toThrow(/thumbnail must be a function/);
    expect(() => resolveOptions({ collections: [], thumbnailWorkers: 0 }, {})).toThrow(/thumbnailWorkers/);
    expect(() => resolveOptions({ collections: [], fileSweep: { intervalMs: -5 } }, {})).toThrow(/fileSweep.intervalMs/);
    const defaults = resolveOptions({ collections: [] }, {});
    expect(defaults).toMatchObject({ multipartUpdate: 'replace', fileSweep: { intervalMs: 6 * 3600_000, minAgeMs: 24 * 3600_000 } });
    expect(defaults.thumbnailWorkers).toBe(Math.min(os.availableParallelism(), 4));
    expect(resolveOptions({ collections: [], fileSweep: false }, {}).fileSweep).toBe(false);
  });

  test('limits come from the environment unless given, and malformed values are refused', () => {
    expect(resolveOptions({ collections: [] }, {}).limits).toEqual({
      maxFileSize: 5 * 1024 * 1024,
      maxBodySize: 10 * 1024 * 1024,
      maxPerPage: 1000,
      maxExpandRecords: 10_000,
      maxExpandBytes: 16 * 1024 * 1024,
      maxAggregateGroups: 1000,
      maxThumbnailQueue: 100,
      maxThumbnailPixels: 24_000_000,
      maxThumbnailsPerFile: 10,
      // without `database`: the embedded engine on disk (database-fairness.test.ts has every engine's)
      statementTimeoutMs: 250,
      acquireTimeoutMs: 3000,
      maxWaitingPerClient: 32,
    });
    expect(resolveOptions({ collections: [] }, { SERVICE_MAX_FILE_SIZE: '100', SERVICE_MAX_BODY_SIZE: '200' }).limits).toMatchObject({ maxFileSize: 100, maxBodySize: 200 });
    expect(resolveOptions({ collections: [], limits: { maxBodySize: 7 } }, { SERVICE_MAX_BODY_SIZE: '200' }).limits.maxBodySize).toBe(7);
    expect(() => resolveOptions({ collections: [] }, { SERVICE_MAX_FILE_SIZE: '5MB' })).toThrow(/SERVICE_MAX_FILE_SIZE/);
    expect(() => resolveOptions({ collections: [], limits: { maxPerPage: 0 } }, {})).toThrow(/maxPerPage/);
    for (const name of ['maxExpandRecords', 'maxExpandBytes', 'maxAggregateGroups', 'maxThumbnailQueue', 'maxThumbnailPixels', 'maxThumbnailsPerFile'] as const) {
      expect(() => resolveOptions({ collections: [], limits: { [name]: 0 } }, {})).toThrow(`limits.${name} must be a positive integer`);
      expect(() => resolveOptions({ collections: [], limits: { [name]: 1.5 } }, {})).toThrow(`limits.${name} must be a positive integer`);
      expect(resolveOptions({ collections: [], limits: { [name]: 3 } }, {}).limits[name]).toBe(3);
    }
    expect(() => resolveOptions({ collections: [], limits: { statementTimeoutMs: 0 } }, {})).toThrow(/limits.statementTimeoutMs must be a positive integer/);
    expect(() => resolveOptions({ collections: [], limits: { acquireTimeoutMs: 2 ** 31 } }, {})).toThrow(/limits.acquireTimeoutMs must be at most 2147483647 milliseconds/);
  });

  test('close() is idempotent and leaves a database passed in open', async () => {
    const database = openMemoryDatabase();
    const router = createRecordsRouter({ collections: notes, database, logger: createMemoryLogger() });
    await router.ready;
    await router.close();
    await router.close();
    expect((await database.raw('select count(*)::int as n from notes')).rows[0].n).toBe(0);
    await database.destroy();
  });
});
