import { createMemoryLogger, startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';
import { OPEN_RULES } from '../support/open-rules.js';

/**
 * What a newcomer meets first: every path under /api/ answers JSON (health, and 404s that say
 * what recordbase does not serve), a bad response-shaping parameter on a write stores nothing,
 * and a broken auth() shows up in the host's log.
 */
describe.each(testEngines())('the API surface on %s', (engine) => {
  let app: TestApp;
  const logger = createMemoryLogger();
  let authCalls = 0;

  beforeAll(async () => {
    app = await startTestApp(engine, {
      collections: [{ name: 'posts', fields: [{ name: 'title', type: 'text' }], rules: OPEN_RULES }],
      logger,
      auth: (token) => {
        authCalls++;
        if (token === 'token-throws') throw new Error('sessions table is missing');
        if (token === 'token-bad-shape') return { name: 'no id' } as never;
        return null;
      },
    });
  });
  afterAll(async () => {
    await app?.close();
  });

  const count = async () => Number((await app.database.db('posts').count({ n: '*' }))[0]!.n);

  test("GET /api/health is 200 with PocketBase's `code` and this API's `status`", async () => {
    const res = await app.http.get('/backend/api/health');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ code: 200, status: 200, message: 'API is healthy.', data: {} });
  });

  test.each([
    ['POST', '/api/collections/users/auth-with-password', /does not serve sign-in: authentication belongs to the host application/],
    ['POST', '/api/collections/users/auth-refresh', /does not serve sign-in/],
    ['POST', '/api/collections/users/request-password-reset', /does not serve sign-in/],
    ['GET', '/api/collections', /does not serve the collections API: collections are declared in code/],
    ['GET', '/api/collections/posts', /does not serve the collections API/],
    ['GET', '/api/settings', /does not serve PocketBase's admin endpoints/],
    ['GET', '/api/logs/stats', /admin endpoints/],
    ['GET', '/api/nothing/here', /^The requested endpoint does not exist\.$/],
    ['GET', '/api/files', /^The requested endpoint does not exist\.$/],
    ['DELETE', '/api/collections/posts/records/a/b', /^The requested endpoint does not exist\.$/],
  ])('%s %s is a JSON 404 that says why', async (method, path, message) => {
    const res = await app.http[method.toLowerCase() as 'get'](`/backend${path}`);
    expect(res.status).toBe(404);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toEqual({ status: 404, message: expect.stringMatching(message), data: {} });
  });

  test('a path outside /api/ is left to the host (Express answers it, not recordbase)', async () => {
    const res = await app.http.get('/backend/not-api');
    expect(res.status).toBe(404);
    expect(res.headers['content-type']).not.toMatch(/json/);
  });

  test.each([
    ['a bad fields modifier', { fields: 'title:upper' }],
    ['a bad excerpt', { fields: 'title:excerpt(0)' }],
  ])('a create with %s is a 400 before anything is stored (a retry makes no duplicate)', async (_label, query) => {
    const before = await count();
    const res = await app.http.post('/backend/api/collections/posts/records').query(query).send({ title: 'once' });
    expect(res.status).toBe(400);
    expect(await count()).toBe(before);
  });

  test('an update with a bad fields parameter changes nothing', async () => {
    const created = await app.http.post('/backend/api/collections/posts/records').send({ title: 'before' });
    const res = await app.http.patch(`/backend/api/collections/posts/records/${created.body.id}`).query({ fields: 'title:upper' }).send({ title: 'after' });
    expect(res.status).toBe(400);
    expect((await app.database.db('posts').where({ id: created.body.id }).first()).title).toBe('before');
  });

  test('an auth() that throws (or returns no id) is a 401 for the client and one log line per cause for the host', async () => {
    logger.lines.length = 0;
    for (let i = 0; i < 5; i++) {
      const res = await app.http.get('/backend/api/collections/posts/records').set('Authorization', 'token-throws');
      expect(res.status).toBe(401);
      expect(res.body.message).toBe('The authentication token is invalid or expired.');
      expect(JSON.stringify(res.body)).not.toContain('sessions table');
    }
    for (let i = 0; i < 3; i++) {
      expect((await app.http.get('/backend/api/collections/posts/records').set('Authorization', 'token-bad-shape')).status).toBe(401);
    }
    const reports = logger.lines.filter((line) => line.startsWith('auth() failed'));
    expect(reports).toHaveLength(2);
    expect(reports[0]).toContain('sessions table is missing');
    expect(reports[1]).toContain('must return null or an object with a string "id"');
    expect(authCalls).toBeGreaterThanOrEqual(8);
  });
});
