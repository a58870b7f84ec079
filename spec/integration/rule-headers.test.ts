import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type NextFunction, type Request, type Response } from 'express';
import supertest from 'supertest';
import { createAppServer, type CollectionDefinition } from '../../lib/index.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { ALICE, BOB, ROOT } from '../support/query-fixtures.js';
import { openSse, type SseConnection } from '../support/sse-reader.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/**
 * Issue 41, finding 4: `@request.headers.*` is what the host's middleware left in `req.headers`,
 * not the bytes the client sent; and a subscription's `options.headers`, which the client writes,
 * can be turned off (`realtime.subscriptionHeaders: false`), so that header rules fail closed on
 * realtime. Both engines.
 */

const api = (path: string) => `/backend/api/collections/${path}`;

/** Each tenant's documents: a rule on the header the host sets from its own session. */
const TENANT_RULE = '@request.headers.x_tenant = tenant';
const collections: CollectionDefinition[] = [
  {
    name: 'docs',
    fields: [{ name: 'title', type: 'text' }, { name: 'tenant', type: 'text' }],
    rules: { ...OPEN_RULES, list: TENANT_RULE, view: TENANT_RULE, create: '@request.headers.x_tenant = @request.body.tenant' },
  },
  { name: 'marks', fields: [{ name: 'name', type: 'text' }], rules: OPEN_RULES },
  { name: 'echoes', fields: [{ name: 'name', type: 'text' }], rules: { ...OPEN_RULES, list: '@request.headers.x_echo = name' } },
];

/** The tenant of each token in the host's own sessions; a guest has none. */
const TENANTS: Record<string, string> = { 'token-alice': 'acme', 'token-bob': 'globex' };

/**
 * The host's middleware: `X-Tenant` is the session's tenant, whatever the client sent under that
 * name (removed for a guest); `X-Echo` is left as the client sent it, or set under a mixed-case
 * name when the client asks for it, as a careless host might.
 */
function setTenant(req: Request, _res: Response, next: NextFunction): void {
  const tenant = TENANTS[req.headers.authorization ?? ''];
  if (tenant === undefined) delete req.headers['x-tenant'];
  else req.headers['x-tenant'] = tenant;
  if (req.query.mixedCase === '1') req.headers['X-Echo'] = 'from the host';
  next();
}

describe.each(testEngines())('rule headers on %s', (engine) => {
  let app: TestApp;
  let server: Server;
  let host: supertest.Agent;
  const ids: Record<string, string> = {};
  beforeAll(async () => {
    app = await startTestApp(engine, { collections });
    // The same router behind the host's middleware, as a host app mounts it.
    const hostApp = express();
    hostApp.use(setTenant);
    hostApp.use('/backend', app.router);
    server = createAppServer(hostApp);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    host = supertest.agent(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    for (const tenant of ['acme', 'globex']) {
      const res = await app.http.post(api('docs/records')).set(ROOT).send({ title: `${tenant}'s plans`, tenant });
      expect(res.status).toBe(200);
      ids[tenant] = res.body.id;
    }
    expect((await app.http.post(api('echoes/records')).set(ROOT).send({ name: 'from the host' })).status).toBe(200);
    expect((await app.http.post(api('marks/records')).set(ROOT).send({ name: 'm' })).status).toBe(200);
  });
  afterAll(async () => {
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
    await app?.close();
  });

  test("a client's X-Tenant does not replace the one the host's middleware set: Bob sending acme's sees only globex's", async () => {
    const list = await host.get(api('docs/records')).set(BOB).set('X-Tenant', 'acme');
    expect(list.status).toBe(200);
    expect(list.body.items.map((item: { tenant: string }) => item.tenant)).toEqual(['globex']);
    const view = await host.get(api(`docs/records/${ids.acme}`)).set(BOB).set('X-Tenant', 'acme');
    expect(view.status).toBe(404);
    expect(view.body).toEqual({ status: 404, message: "The requested record wasn't found.", data: {} });
    // The control: Alice, whose session is acme's.
    expect((await host.get(api(`docs/records/${ids.acme}`)).set(ALICE)).body.title).toBe("acme's plans");
  });

  test('a header the host removed reads as absent: a guest sending X-Tenant sees nothing', async () => {
    const list = await host.get(api('docs/records')).set('X-Tenant', 'acme');
    expect(list.status).toBe(200);
    expect(list.body.items).toEqual([]);
    expect((await host.get(api('docs/records')).query({ filter: '@request.headers.x_tenant:isset = false' }).set('X-Tenant', 'acme')).body.items).toEqual([]);
  });

  test("a batch's requests read the host's headers too", async () => {
    const requests = [{ method: 'POST', url: '/api/collections/docs/records', body: { title: 'planted', tenant: 'acme' } }];
    const refused = await host.post('/backend/api/batch').set(BOB).set('X-Tenant', 'acme').send({ requests });
    expect(refused.status).toBe(400);
    expect(await app.database.db('docs').where({ title: 'planted' }).pluck('id')).toEqual([]);
    const allowed = await host.post('/backend/api/batch').set(BOB).send({ requests: [{ ...requests[0], body: { title: 'own', tenant: 'globex' } }] });
    expect(allowed.status).toBe(200);
  });

  test("a repeated header reads as Node joins it in req.headers ('a, b'), so a copy cannot stand in front of the host's", async () => {
    const echoed = async (values: string[]) => {
      const res = await host.get(api('echoes/records')).set('X-Echo', values as unknown as string);
      expect(res.status).toBe(200);
      return res.body.items.length as number;
    };
    expect(await echoed(['from the host'])).toBe(1);
    expect(await echoed(['from the host', 'from the client'])).toBe(0);
    const joined = await host.get(api('marks/records')).query({ filter: "@request.headers.x_echo = 'a, b'" }).set('X-Echo', ['a', 'b'] as unknown as string);
    expect(joined.body.items).toHaveLength(1);
  });

  test("a name the host set in mixed case next to the client's is read by neither: the rule sees no header", async () => {
    const res = await host.get(api('echoes/records')).query({ mixedCase: '1' }).set('X-Echo', 'from the host');
    expect(res.status).toBe(200);
    expect(res.body.items).toEqual([]);
    // Alone, the host's mixed-case name is read under its lower-case name.
    expect((await host.get(api('echoes/records')).query({ mixedCase: '1' })).body.items).toHaveLength(1);
  });
});

describe.each(testEngines())('subscription headers on %s', (engine) => {
  const apps: TestApp[] = [];
  const open: SseConnection[] = [];
  afterEach(() => {
    for (const c of open.splice(0)) c.close();
  });
  afterAll(async () => {
    for (const app of apps) await app.close();
  });

  /** A guest's stream subscribed to acme's documents by writing acme's X-Tenant in options.headers, and to marks. */
  async function subscribeAsAcme(app: TestApp): Promise<SseConnection> {
    const sse = await openSse(`${app.baseUrl}/backend/api/realtime`);
    open.push(sse);
    const clientId = await sse.clientId();
    const forged = `docs/*?options=${encodeURIComponent(JSON.stringify({ headers: { 'X-Tenant': 'acme' } }))}`;
    expect((await app.http.post('/backend/api/realtime').send({ clientId, subscriptions: [forged, 'marks/*'] })).status).toBe(204);
    return sse;
  }

  test("on (PocketBase's default): options.headers stand in for the header a proxy would set, so acme's documents reach the guest", async () => {
    const app = await startTestApp(engine, { collections });
    apps.push(app);
    const sse = await subscribeAsAcme(app);
    expect((await app.http.post(api('docs/records')).set(ROOT).send({ title: 'acme secret', tenant: 'acme' })).status).toBe(200);
    await sse.next((e) => e.event?.startsWith('docs/*') === true && e.data!.includes('acme secret'));
  });

  test('off: header rules see no headers on realtime, so acme\'s documents never reach the guest (the stream itself still delivers)', async () => {
    const app = await startTestApp(engine, { collections, realtime: { subscriptionHeaders: false } });
    apps.push(app);
    const sse = await subscribeAsAcme(app);
    expect((await app.http.post(api('docs/records')).set(ROOT).send({ title: 'acme secret', tenant: 'acme' })).status).toBe(200);
    expect((await app.http.post(api('docs/records')).set(ROOT).send({ title: 'nobody', tenant: '' })).status).toBe(200);
    // Written after acme's: once these two messages are here, acme's would have been.
    expect((await app.http.post(api('marks/records')).set(ROOT).send({ name: 'after' })).status).toBe(200);
    await sse.next((e) => e.event === 'marks/*');
    await sse.next((e) => e.event?.startsWith('docs/*') === true && e.data!.includes('nobody'));
    const delivered = sse.messages().filter((m) => m.event.startsWith('docs/*'));
    // An empty header equals an empty tenant: the rule reads "", as for a request without the header.
    expect(delivered.map((m) => m.data.record.title)).toEqual(['nobody']);
    // Over HTTP the headers are read as before.
    expect((await app.http.get(api('docs/records')).set('X-Tenant', 'acme')).body.items.map((i: { title: string }) => i.title)).toEqual(['acme secret']);
  });
});
