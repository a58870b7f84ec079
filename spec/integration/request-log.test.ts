import { createRecordsRouter } from '../../lib/index.js';
import type { RequestLogEntry } from '../../lib/logger.js';
import { createMemoryLogger, startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';
import { OPEN_RULES } from '../support/open-rules.js';

const APP_START_TIMEOUT = 90_000;
const ALICE_ID = 'aliceaaaaaaaaaa';
const collections = [
  {
    name: 'docs',
    fields: [
      { name: 'title', type: 'text' as const },
      { name: 'file', type: 'file' as const, protected: true },
    ],
    rules: OPEN_RULES,
  },
];

/** The entries logged so far, once `count` have arrived (an entry is handed over when the response ends, possibly just after the client read it). */
async function waitForEntries(entries: RequestLogEntry[], count: number): Promise<RequestLogEntry[]> {
  for (let i = 0; i < 200 && entries.length < count; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  return entries;
}

describe.each(testEngines())('the request log on %s', (engine) => {
  let app: TestApp;
  const entries: RequestLogEntry[] = [];

  beforeAll(async () => {
    app = await startTestApp(engine, { collections, onRequest: (entry) => void entries.push(entry) });
  }, APP_START_TIMEOUT);
  afterAll(async () => {
    await app?.close();
  });

  it('logs a list, a create and a 404 with route, path, status, duration, collection and caller', async () => {
    entries.length = 0;
    await app.http.get('/backend/api/collections/docs/records?filter=title%3D%22x%22&page=1').expect(200);
    const created = await app.http.post('/backend/api/collections/docs/records').set('Authorization', 'token-alice').send({ title: 'a' }).expect(200);
    await app.http.get('/backend/api/collections/docs/records/zzzzzzzzzzzzzzz').set('Authorization', 'Bearer token-alice').expect(404);
    await app.http.get('/backend/api/nothing-here').expect(404);
    const [list, create, missing, unserved] = await waitForEntries(entries, 4);
    expect(list).toEqual({ method: 'GET', route: '/api/collections/:collection/records', path: '/backend/api/collections/docs/records', status: 200, durationMs: expect.any(Number), collection: 'docs', completed: true });
    expect(create).toMatchObject({ method: 'POST', route: '/api/collections/:collection/records', status: 200, collection: 'docs', callerId: ALICE_ID });
    expect(missing).toMatchObject({ method: 'GET', route: '/api/collections/:collection/records/:id', path: '/backend/api/collections/docs/records/zzzzzzzzzzzzzzz', status: 404, callerId: ALICE_ID });
    expect(unserved).toEqual({ method: 'GET', path: '/backend/api/nothing-here', status: 404, durationMs: expect.any(Number), completed: true });
    expect(list!.durationMs).toBeGreaterThanOrEqual(0);
    expect(created.body.id).toEqual(expect.any(String));
    expect(JSON.stringify(entries)).not.toContain('token-alice');
    expect(entries).toHaveLength(4);
  });

  it('logs a protected download by ?token= with the caller, but neither the token nor the query', async () => {
    const record = await app.http
      .post('/backend/api/collections/docs/records')
      .set('Authorization', 'token-alice')
      .field('title', 'with file')
      .attach('file', Buffer.from('hello'), 'hello.txt')
      .expect(200);
    const fileToken = (await app.http.post('/backend/api/files/token').set('Authorization', 'token-alice').expect(200)).body.token as string;
    entries.length = 0;
    const path = `/backend/api/files/docs/${record.body.id}/${record.body.file}`;
    await app.http.get(`${path}?token=${encodeURIComponent(fileToken)}&download=1`).expect(200);
    const [download] = await waitForEntries(entries, 1);
    expect(download).toMatchObject({ method: 'GET', route: '/api/files/:collection/:recordId/:filename', path, status: 200, collection: 'docs', callerId: ALICE_ID });
    const logged = JSON.stringify(entries);
    expect(logged).not.toContain(fileToken);
    expect(logged).not.toContain('token=');
  });

  it('leaves paths the router passes on to the host unlogged', async () => {
    entries.length = 0;
    await app.http.get('/backend/not-ours').expect(404);
    await app.http.get('/backend/api/health').expect(200);
    const logged = await waitForEntries(entries, 1);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(logged.map((e) => e.path)).toEqual(['/backend/api/health']);
  });
});

describe.each(testEngines())('a failing request log on %s', (engine) => {
  it('answers every request anyway and reports the failure to the logger once', async () => {
    const logger = createMemoryLogger();
    let calls = 0;
    const app = await startTestApp(engine, {
      collections,
      logger,
      onRequest: (entry) => {
        calls++;
        if (entry.method === 'GET') throw new Error('log sink on fire');
        return Promise.reject(new Error('async log sink on fire'));
      },
    });
    try {
      await app.http.get('/backend/api/collections/docs/records').expect(200);
      await app.http.get('/backend/api/collections/docs/records').expect(200);
      await app.http.post('/backend/api/collections/docs/records').send({ title: 'x' }).expect(200);
      for (let i = 0; i < 200 && calls < 3; i++) await new Promise((resolve) => setTimeout(resolve, 10));
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(calls).toBe(3);
      const reports = logger.lines.filter((line) => line.includes('onRequest failed'));
      expect(reports).toHaveLength(1);
      expect(reports[0]).toContain('log sink on fire');
    } finally {
      await app.close();
    }
  }, APP_START_TIMEOUT);

  it('refuses an onRequest that is not a function when the router is created', () => {
    expect(() => createRecordsRouter({ collections, onRequest: 'yes' as never })).toThrow('onRequest must be a function');
  });
});
