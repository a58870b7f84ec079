import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import supertest from 'supertest';
import { createAppServer, createRecordsRouter, type RecordsRouter } from '../../lib/index.js';
import { makePng } from '../support/file-fixtures.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { openSse, type SseConnection } from '../support/sse-reader.js';
import { createMemoryLogger, engineOptions } from '../support/test-app.js';
import { openTestDatabase, testEngines, type TestDatabase } from '../support/test-database.js';
import { describeExported, pointsOf, registerTestTelemetry, type TestTelemetry } from '../support/telemetry-sdk.js';

/*
 * Issue 44, attack: nothing a client sends reaches telemetry. Distinctive markers go in a token,
 * a cookie, a filter, record values, a record id, a file name, X-Forwarded-For and the client's
 * address; every exported span name, attribute, event, link, status and resource, every metric
 * label, and every line the router's logger got, are searched for them. An unknown collection
 * named in a URL is no label either (cardinality stays bounded).
 */

const MARKERS = {
  token: 'mktokenqz81',
  identity: 'mkidentqz82',
  cookie: 'mkcookieqz83',
  filter: 'mkfilterqz84',
  value: 'mkvalueqz85',
  recordId: 'mkrecordqz86aaa',
  fileName: 'mkfileqz87',
  forwardedFor: '203.0.113.88',
  batchValue: 'mkbatchqz92',
  realtimeFilter: 'mkrtfilterqz93',
  clientAddress: '127.0.0.1',
  unknownCollection: 'mkunknownqz90',
  /** A title a before-hook fails on (a 500) and one an after-hook fails on (logged, the write kept). */
  failingValue: 'mkfailqz94',
  afterFailingValue: 'mkafterqz95',
};

const collections = [
  {
    name: 'posts',
    fields: [
      { name: 'title', type: 'text' as const },
      { name: 'body', type: 'text' as const },
      { name: 'image', type: 'file' as const, maxSelect: 1 },
    ],
    rules: OPEN_RULES,
  },
];

describe.each(testEngines())('telemetry records nothing a client sent, on %s', (engine) => {
  let telemetry: TestTelemetry;
  let database: TestDatabase;
  let router: RecordsRouter;
  let server: Server;
  let http: supertest.Agent;
  let dataDir: string;
  let baseUrl: string;
  const logger = createMemoryLogger();

  beforeAll(async () => {
    telemetry = registerTestTelemetry();
    database = await openTestDatabase(engine);
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'rb-telemetry-'));
    router = createRecordsRouter({
      ...engineOptions(database, { collections }),
      auth: (token) => (token === MARKERS.token ? { id: MARKERS.identity } : null),
      logger,
      // Hooks with bugs: the failures' log lines must name no record, value or path.
      hooks: {
        posts: {
          beforeUpdate: ({ data }) => {
            if (data.title === MARKERS.failingValue) throw new Error('a before-hook bug');
          },
          afterCreate: ({ record }) => {
            if (record.title === MARKERS.afterFailingValue) throw new Error('an after-hook bug');
          },
        },
      },
      dataDir,
      fileSweep: false,
      thumbnailWorkers: 1,
      fileTokenSecret: 'telemetry-test-secret-0123456789abcdef',
      database: database.db,
    });
    await router.ready;
    const app = express();
    // The proxy in front is trusted (loopback): X-Forwarded-For then decides req.ip.
    app.set('trust proxy', 'loopback');
    app.use('/backend', router);
    server = createAppServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    http = supertest.agent(baseUrl);
  }, 90_000);

  afterAll(async () => {
    await new Promise<void>((resolve) => server?.close(() => resolve()));
    await router?.close();
    await database?.destroy();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    await telemetry?.stop();
  });

  /** A request carrying every header marker. */
  const marked = (test: supertest.Test) => test.set('Authorization', `Bearer ${MARKERS.token}`).set('Cookie', `session=${MARKERS.cookie}`).set('X-Forwarded-For', MARKERS.forwardedFor);

  it('sends every marker through records, files, thumbnails, a batch, realtime, a 404 and failing hooks (a 500), and finds none in spans, metrics or log lines', async () => {
    const base = '/backend/api/collections/posts/records';
    // A realtime subscriber whose topic's filter holds a marker, so every write below is delivered (and traced) too.
    const stream: SseConnection = await openSse(`${baseUrl}/backend/api/realtime`, { Authorization: MARKERS.token, Cookie: `session=${MARKERS.cookie}`, 'X-Forwarded-For': MARKERS.forwardedFor });
    const clientId = await stream.clientId();
    const topic = `posts/*?options=${encodeURIComponent(JSON.stringify({ query: { filter: `title != "${MARKERS.realtimeFilter}"` } }))}`;
    await marked(http.post('/backend/api/realtime')).send({ clientId, subscriptions: [topic, `posts/${MARKERS.recordId}`] }).expect(204);
    await marked(http.post(base)).send({ id: MARKERS.recordId, title: MARKERS.value, body: `${MARKERS.value} body` }).expect(200);
    const filter = encodeURIComponent(`title = "${MARKERS.filter}" || body ~ "${MARKERS.value}"`);
    expect((await marked(http.get(`${base}?filter=${filter}`)).expect(200)).body.totalItems).toBe(1);
    await marked(http.get(`${base}/${MARKERS.recordId}`)).expect(200);
    const updated = await marked(http.patch(`${base}/${MARKERS.recordId}`)).field('title', `${MARKERS.value}2`).attach('image', makePng(64, 64), `${MARKERS.fileName}.png`).expect(200);
    const stored = updated.body.image as string;
    expect(stored).toContain(MARKERS.fileName);
    await marked(http.get(`/backend/api/files/posts/${MARKERS.recordId}/${stored}`)).expect(200);
    await marked(http.get(`/backend/api/files/posts/${MARKERS.recordId}/${stored}?thumb=16x16`)).expect(200);
    // An image the renderer refuses (a PNG whose pixel data is cut short): the original is served, and a warning logged.
    const broken = makePng(64, 64).subarray(0, 60);
    const brokenStored = (await marked(http.patch(`${base}/${MARKERS.recordId}`)).attach('image', broken, `${MARKERS.fileName}.png`).expect(200)).body.image as string;
    await marked(http.get(`/backend/api/files/posts/${MARKERS.recordId}/${brokenStored}?thumb=20x20`)).expect(200);
    for (let i = 0; i < 100 && !logger.lines.some((line) => line.includes('thumbnail')); i++) await new Promise((r) => setTimeout(r, 10));
    expect(logger.lines.filter((line) => line.includes('thumbnail'))).not.toEqual([]);
    await marked(http.get(`/backend/api/collections/${MARKERS.unknownCollection}/records?filter=${encodeURIComponent(`x="${MARKERS.filter}"`)}`)).expect(404);
    await marked(http.get(`/backend/api/collections/${MARKERS.unknownCollection}/records/${MARKERS.recordId}`)).expect(404);
    const batched = await marked(http.post('/backend/api/batch')).send({ requests: [{ method: 'PATCH', url: `/api/collections/posts/records/${MARKERS.recordId}?fields=id,title`, body: { title: MARKERS.batchValue } }] });
    expect({ status: batched.status, body: batched.body }).toEqual({ status: 200, body: [{ status: 200, body: { id: MARKERS.recordId, title: MARKERS.batchValue } }] });
    try {
      await stream.next((event) => event.data?.includes(MARKERS.batchValue) === true);
    } finally {
      stream.close();
    }
    // A 500 (a before-hook's bug) on a path with the record's id and a query with a filter, and an
    // after-hook's failure: both logged (so the search below has lines to search), by route and hook.
    await marked(http.patch(`${base}/${MARKERS.recordId}?filter=${filter}`)).send({ title: MARKERS.failingValue }).expect(500);
    const afterFailed = await marked(http.post(base)).send({ title: MARKERS.afterFailingValue }).expect(200);
    expect(logger.lines).toEqual(expect.arrayContaining(['PATCH /api/collections/:collection/records/:id failed', 'the afterCreate hook of "posts" failed (the write is committed)']));
    await marked(http.delete(`${base}/${afterFailed.body.id as string}`)).expect(204);
    await marked(http.delete(`${base}/${MARKERS.recordId}`)).expect(204);
    await marked(http.get(`${base}/${MARKERS.recordId}`)).expect(404);
    // A request's span ends when its response closes, possibly just after the client read it.
    for (let i = 0; i < 100 && telemetry.spans.getFinishedSpans().filter((s) => s.name.startsWith('GET /api/') || s.name.startsWith('DELETE')).length < 8; i++) await new Promise((r) => setTimeout(r, 10));

    const spans = telemetry.spans.getFinishedSpans();
    const collected = await telemetry.collectMetrics();
    // What is recorded is there (the search below must not pass on nothing).
    const names = new Set(spans.map((span) => span.name));
    expect([...names]).toEqual(
      expect.arrayContaining([
        'POST /api/collections/{collection}/records',
        'GET /api/collections/{collection}/records',
        'GET /api/collections/{collection}/records/{id}',
        'PATCH /api/collections/{collection}/records/{id}',
        'DELETE /api/collections/{collection}/records/{id}',
        'GET /api/files/{collection}/{recordId}/{filename}',
        'storage write',
        'thumbnail render',
        'POST /api/batch',
        'POST /api/realtime',
        'realtime deliver',
      ]),
    );
    expect(spans.some((span) => span.attributes['db.system.name'] === 'postgresql' && span.attributes['db.collection.name'] === 'posts')).toBe(true);
    expect(pointsOf(collected, 'http.server.request.duration').length).toBeGreaterThan(3);

    const exported = describeExported(spans, collected).toLowerCase();
    const logged = logger.lines.join('\n').toLowerCase();
    for (const [what, marker] of Object.entries(MARKERS)) {
      expect({ what, inTelemetry: exported.includes(marker.toLowerCase()) }).toEqual({ what, inTelemetry: false });
      expect({ what, inLog: logged.includes(marker.toLowerCase()) }).toEqual({ what, inLog: false });
    }
  });

  it('labels a request for a collection that does not exist with no collection at all', async () => {
    telemetry.spans.reset();
    await http.get('/backend/api/collections/mkanothernameqz91/records').expect(404);
    await http.get('/backend/api/collections/posts/records').expect(200);
    for (let i = 0; i < 100 && telemetry.spans.getFinishedSpans().filter((s) => s.name.startsWith('GET /api/')).length < 2; i++) await new Promise((r) => setTimeout(r, 10));
    const [unknown, known] = telemetry.spans.getFinishedSpans().filter((s) => s.name.startsWith('GET /api/'));
    expect(unknown!.attributes).toEqual({ 'http.request.method': 'GET', 'http.route': '/api/collections/{collection}/records', 'http.response.status_code': 404 });
    expect(known!.attributes).toEqual({ 'http.request.method': 'GET', 'http.route': '/api/collections/{collection}/records', 'http.response.status_code': 200, 'recordbase.collection': 'posts' });
    const labels = pointsOf(await telemetry.collectMetrics(), 'http.server.request.duration').map((point) => point.attributes);
    expect(labels.every((attributes) => attributes['recordbase.collection'] === undefined || attributes['recordbase.collection'] === 'posts')).toBe(true);
    expect(JSON.stringify(labels)).not.toContain('mkanothernameqz91');
  });
});
