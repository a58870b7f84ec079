import path from 'node:path';
import type { CollectionDefinition } from '../../lib/index.js';
import { listFilesUnder } from '../support/file-fixtures.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { ALICE } from '../support/query-fixtures.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/** POST /api/batch over raw HTTP: malformed bodies, limits, the switch, timeouts and concurrent batches. */

const collections = (): CollectionDefinition[] => [
  { name: 'items', fields: [{ name: 'name', type: 'text' }, { name: 'n', type: 'number' }, { name: 'doc', type: 'file' }], rules: OPEN_RULES },
];
const create = (name: string) => ({ method: 'POST', url: '/api/collections/items/records', body: { name } });

describe.each(testEngines({ pooler: true }))('batch requests on %s', (engine) => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp(engine, {
      collections: collections(),
      batch: { maxRequests: 5, timeoutMs: 2000 },
      hooks: { items: { beforeCreate: async (e) => void (e.data.name === 'slow' && (await new Promise((resolve) => setTimeout(resolve, 600)))) } },
    });
  });
  afterAll(async () => {
    await app?.close();
  });

  const rows = async () => Number((await app.database.db('items').count({ n: '*' }).first())!.n);
  const batch = () => app.http.post('/backend/api/batch');

  test('plain JSON {"requests": [...]} works, answering in request order', async () => {
    const res = await batch().send({ requests: [create('a'), create('b')] });
    expect(res.status).toBe(200);
    expect(res.body.map((r: { status: number; body: { name: string } }) => [r.status, r.body.name])).toEqual([
      [200, 'a'],
      [200, 'b'],
    ]);
  });

  test.each([
    ['not an object', [1, 2], /body must be a JSON object/],
    ['requests missing', { nope: [] }, /"requests" must be an array/],
    ['requests not an array', { requests: 'all of them' }, /"requests" must be an array/],
    ['an empty list', { requests: [] }, /"requests" is empty/],
    ['a request that is not an object', { requests: [create('ok'), 'GET /'] }, /request 1 must be an object/],
    ['an unknown method', { requests: [create('ok'), { method: 'GET', url: '/api/collections/items/records' }] }, /request 1: method "GET" is not POST, PUT, PATCH or DELETE/],
    ['a url outside records', { requests: [{ method: 'POST', url: '/api/health' }] }, /request 0: url "\/api\/health" is not \/api\/collections/],
    ['a url to another host', { requests: [{ method: 'POST', url: 'http://evil/api/collections/items/records' }] }, /request 0: url/],
    ['a PATCH without an id', { requests: [{ method: 'PATCH', url: '/api/collections/items/records', body: {} }] }, /request 0: PATCH needs a record id/],
    ['a body that is an array', { requests: [{ method: 'POST', url: '/api/collections/items/records', body: [1] }] }, /request 0: body must be an object/],
    ['too many requests', { requests: Array.from({ length: 6 }, (_, i) => create(`n${i}`)) }, /at most 5 requests, got 6/],
  ])('%s is a 400 and stores nothing', async (_label, body, message) => {
    const before = await rows();
    const res = await batch().send(body as object);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ status: 400, message: expect.stringMatching(message), data: {} });
    expect(await rows()).toBe(before);
  });

  test('a file part for a request that does not exist is a 400; nothing stored, nothing spooled', async () => {
    const before = { rows: await rows(), files: listFilesUnder(path.join(app.dataDir, 'storage')) };
    const res = await batch()
      .attach('requests.3.doc', Buffer.from('stray'), 'stray.txt')
      .field('@jsonPayload', JSON.stringify({ requests: [create('with a stray file')] }));
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/file part "requests.3.doc" is for request 3, which does not exist/);
    expect(await rows()).toBe(before.rows);
    expect(listFilesUnder(path.join(app.dataDir, 'storage'))).toEqual(before.files);
    expect(listFilesUnder(path.join(app.dataDir, 'uploads-tmp'))).toEqual([]);
  });

  test('requests[N].field names are accepted too', async () => {
    const res = await batch()
      .attach('requests[0].doc', Buffer.from('bracketed'), 'b.txt')
      .field('@jsonPayload', JSON.stringify({ requests: [create('bracket')] }));
    expect(res.status).toBe(200);
    expect(res.body[0].body.doc).toMatch(/^b_[a-z0-9]{10}\.txt$/);
  });

  test('an unknown collection fails its request (404 inside), not the parsing', async () => {
    const res = await batch().send({ requests: [create('x'), { method: 'POST', url: '/api/collections/nope/records', body: {} }] });
    expect(res.status).toBe(400);
    expect(res.body.data.requests[1].response).toMatchObject({ status: 404 });
  });

  test('a batch over its time is given up and rolled back: a 400 saying so, nothing kept', async () => {
    const before = await rows();
    const res = await batch().send({ requests: [create('slow'), create('slow'), create('slow'), create('slow'), create('slow')] }).set(ALICE);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ status: 400, message: 'Batch transaction failed: it took longer than 2000 ms; nothing was kept.', data: {} });
    expect(await rows()).toBe(before);
  });

  test('a body over the batch size limit is a 413', async () => {
    const small = await startTestApp(engine, { collections: collections(), batch: { maxBodySize: 2000 } });
    try {
      const json = await small.http.post('/backend/api/batch').send({ requests: [{ ...create('x'.repeat(3000)) }] });
      expect(json.status).toBe(413);
      const multipart = await small.http.post('/backend/api/batch').attach('requests.0.doc', Buffer.alloc(3000), 'big.bin').field('@jsonPayload', JSON.stringify({ requests: [create('x')] }));
      expect(multipart.status).toBe(413);
      expect(Number((await small.database.db('items').count({ n: '*' }).first())!.n)).toBe(0);
    } finally {
      await small.close();
    }
  });

  test('batch: false answers 403 "Batch requests are not allowed."', async () => {
    const off = await startTestApp(engine, { collections: collections(), batch: false });
    try {
      const res = await off.http.post('/backend/api/batch').send({ requests: [create('x')] });
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ status: 403, message: 'Batch requests are not allowed.', data: {} });
      expect(Number((await off.database.db('items').count({ n: '*' }).first())!.n)).toBe(0);
    } finally {
      await off.close();
    }
  });

  test('concurrent batches touching the same records in opposite orders all finish: none hangs, none is half applied', async () => {
    const a = (await batch().send({ requests: [create('A')] })).body[0].body.id as string;
    const b = (await batch().send({ requests: [create('B')] })).body[0].body.id as string;
    const bump = (id: string) => ({ method: 'PATCH', url: `/api/collections/items/records/${id}`, body: { 'n+': 1 } });
    const started = Date.now();
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) => batch().send({ requests: i % 2 === 0 ? [bump(a), bump(b)] : [bump(b), bump(a)] })),
    );
    expect(Date.now() - started).toBeLessThan(20_000);
    const ok = answers.filter((res) => res.status === 200).length;
    // A batch that lost its deadlocks (Postgres detects one after a second) more often than it may
    // retry answers 400, either with the 409 inside or because its time ran out: answered, not hung.
    for (const res of answers.filter((r) => r.status !== 200)) {
      expect(res.status).toBe(400);
      const inner = res.body.data.requests ? Object.values(res.body.data.requests as Record<string, { response: { status: number } }>)[0]!.response.status : undefined;
      expect(inner === 409 || res.body.message.startsWith('Batch transaction failed: it took longer than')).toBe(true);
    }
    const counts = await app.database.db('items').whereIn('id', [a, b]).select('id', 'n');
    // every batch applied both of its bumps, or neither
    expect(counts.map((row: { n: number | null }) => row.n ?? 0)).toEqual([ok, ok]);
  });
});
