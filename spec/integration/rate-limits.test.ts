import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { createAppServer } from '../../lib/index.js';
import type { RateLimitRuleOption } from '../../lib/index.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/**
 * Issue 44, part 3: rate limits in PocketBase's shape, attacked. Each collection below has a rule
 * of its own, so the tests share one router without sharing a counter. The router is mounted by
 * two host apps: one that trusts no proxy, one with `trust proxy` 1 (one proxy in front).
 */

const NAMES = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'p', 'q'];
const collections = NAMES.map((name) => ({ name, fields: [{ name: 'name', type: 'text' as const }], rules: OPEN_RULES }));
const rules: RateLimitRuleOption[] = [
  { label: 'a:list', maxRequests: 3, duration: 60 },
  { label: 'b:list', maxRequests: 3, duration: 60 },
  { label: 'c:list', maxRequests: 2, duration: 60 },
  { label: '*:create', maxRequests: 60, duration: 60 },
  { label: 'POST /api/realtime', maxRequests: 3, duration: 60 },
  { label: 'e:list', maxRequests: 3, duration: 60 },
  { label: 'f:list', maxRequests: 2, duration: 60, audience: '@auth' },
  { label: 'g:list', maxRequests: 1, duration: 60 },
  { label: 'h:list', maxRequests: 1, duration: 60 },
  { label: '/api/collections/p/', maxRequests: 2, duration: 60 },
  { label: 'q:list', maxRequests: 4, duration: 60 },
  { label: 'GET /api/collections/h/records/special', maxRequests: 1, duration: 60 },
];

describe.each(testEngines())('rate limits under attack on %s', (engine) => {
  let app: TestApp;
  /** The router behind a host that trusts no proxy, and behind one that trusts one hop. */
  let direct: string;
  let proxied: string;
  const servers: Server[] = [];

  beforeAll(async () => {
    app = await startTestApp(engine, { collections, rateLimits: { rules: rules, excludedIps: ['198.51.100.0/24'] } });
    const serve = async (trust: number | undefined) => {
      const host = express();
      if (trust !== undefined) host.set('trust proxy', trust);
      host.use('/backend', app.router);
      const server = createAppServer(host);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      servers.push(server);
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}/backend`;
    };
    direct = await serve(undefined);
    proxied = await serve(1);
  });
  afterAll(async () => {
    for (const server of servers) await new Promise<void>((resolve) => server.close(() => resolve()));
    await app?.close();
  });

  const list = (base: string, collection: string, headers: Record<string, string> = {}) => fetch(`${base}/api/collections/${collection}/records?perPage=1`, { headers });
  const statuses = async (n: number, send: (i: number) => Promise<Response>) => {
    const out: number[] = [];
    for (let i = 0; i < n; i++) out.push((await send(i)).status);
    return out;
  };

  test('over the limit: 429 with Retry-After (whole seconds to the window\'s end) and PocketBase\'s body', async () => {
    expect(await statuses(3, () => list(direct, 'a'))).toEqual([200, 200, 200]);
    const refused = await list(direct, 'a');
    expect(refused.status).toBe(429);
    const seconds = Number(refused.headers.get('retry-after'));
    expect(Number.isInteger(seconds) && seconds >= 1 && seconds <= 60).toBe(true);
    expect(await refused.json()).toEqual({ status: 429, message: 'Too Many Requests.', data: {} });
  });

  test('X-Forwarded-For rotation without trust proxy does not escape: the socket\'s address is the client', async () => {
    const sent = await statuses(6, (i) => list(direct, 'b', { 'X-Forwarded-For': `203.0.113.${i + 1}` }));
    expect(sent).toEqual([200, 200, 200, 429, 429, 429]);
  });

  test('with trust proxy 1 only the trusted hop is read: rotating what the client wrote before it does not escape', async () => {
    const sent = await statuses(5, (i) => list(proxied, 'b', { 'X-Forwarded-For': `10.9.9.${i + 1}, 203.0.113.50` }));
    expect(sent).toEqual([200, 200, 200, 429, 429]);
    // Another address at the trusted hop is another client.
    expect((await list(proxied, 'b', { 'X-Forwarded-For': '10.9.9.9, 203.0.113.51' })).status).toBe(200);
  });

  test('an honest client beside a limited one keeps its answers: the attacker\'s flood spends only its own counter', async () => {
    const attacker = { 'X-Forwarded-For': '203.0.113.70' };
    const honest = { 'X-Forwarded-For': '203.0.113.71' };
    const flood = Promise.all(Array.from({ length: 40 }, () => list(proxied, 'q', attacker).then((res) => res.status)));
    const honestStatuses = await statuses(4, () => list(proxied, 'q', honest));
    const attackerStatuses = await flood;
    expect(honestStatuses).toEqual([200, 200, 200, 200]);
    expect(attackerStatuses.filter((status) => status === 200).length).toBe(4);
    expect(attackerStatuses.filter((status) => status === 429).length).toBe(36);
    expect((await list(proxied, 'q', honest)).status).toBe(429);
  });

  test('IPv6: one /64 is one client (and an IPv4-mapped address is its IPv4 one)', async () => {
    const sent = await statuses(3, (i) => list(proxied, 'c', { 'X-Forwarded-For': ['2001:db8:1:2::1', '2001:db8:1:2:ffff:ffff:ffff:9', '2001:0db8:0001:0002:0::77'][i]! }));
    expect(sent).toEqual([200, 200, 429]);
    expect((await list(proxied, 'c', { 'X-Forwarded-For': '2001:db8:1:3::1' })).status).toBe(200);
    expect(await statuses(3, (i) => list(proxied, 'c', { 'X-Forwarded-For': ['203.0.113.77', '::ffff:203.0.113.77', '::ffff:cb00:714d'][i]! }))).toEqual([200, 200, 429]);
  });

  test('a batch of 50 counts 50 against its requests\' rule: the rest of the window has 10 creates left', async () => {
    const batch = (n: number) =>
      fetch(`${direct}/api/batch`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ requests: Array.from({ length: n }, (_, i) => ({ method: 'POST', url: '/api/collections/d/records', body: { name: `n${i}` } })) }),
      });
    expect((await batch(50)).status).toBe(200);
    const refused = await batch(11);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const create = () => fetch(`${direct}/api/collections/d/records`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"name":"x"}' });
    expect(await statuses(11, create)).toEqual([...Array<number>(10).fill(200), 429]);
    // *:create counts per collection, as in PocketBase: another collection's creates have their own.
    expect((await fetch(`${direct}/api/collections/e/records`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"name":"x"}' })).status).toBe(200);
  });

  test('realtime subscription POSTs count', async () => {
    const post = () => fetch(`${direct}/api/realtime`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ clientId: 'nobody', subscriptions: ['a'] }) });
    const sent = await statuses(5, post);
    expect(sent.slice(0, 3).every((status) => status !== 429)).toBe(true);
    expect(sent.slice(3)).toEqual([429, 429]);
  });

  test('switching between guest and a token does not reset a limit keyed by address', async () => {
    expect(await statuses(3, () => list(direct, 'e'))).toEqual([200, 200, 200]);
    expect((await list(direct, 'e', { Authorization: 'token-alice' })).status).toBe(429);
    // A token auth() refuses: still this address's count (its 401 comes after the limit).
    expect((await list(direct, 'e', { Authorization: 'forged' })).status).toBe(429);
    expect((await list(direct, 'e')).status).toBe(429);
  });

  test('an @auth rule counts per identity, whatever the address; guests are not its audience', async () => {
    expect(await statuses(3, (i) => list(proxied, 'f', { Authorization: 'token-alice', 'X-Forwarded-For': `203.0.113.${100 + i}` }))).toEqual([200, 200, 429]);
    expect((await list(proxied, 'f', { Authorization: 'token-bob', 'X-Forwarded-For': '203.0.113.100' })).status).toBe(200);
    expect(await statuses(4, () => list(proxied, 'f', { 'X-Forwarded-For': '203.0.113.100' }))).toEqual([200, 200, 200, 200]);
  });

  test('a superuser and an excluded address are not limited (as in PocketBase)', async () => {
    expect(await statuses(3, () => list(direct, 'g', { Authorization: 'token-root' }))).toEqual([200, 200, 200]);
    expect(await statuses(2, () => list(direct, 'g'))).toEqual([200, 429]);
    expect(await statuses(3, () => list(proxied, 'h', { 'X-Forwarded-For': '198.51.100.7' }))).toEqual([200, 200, 200]);
    expect(await statuses(2, () => list(proxied, 'h', { 'X-Forwarded-For': '192.0.2.7' }))).toEqual([200, 429]);
  });

  test('a label that names one record counts only that record\'s path', async () => {
    const view = (id: string) => fetch(`${direct}/api/collections/h/records/${id}`);
    expect(await statuses(2, () => view('special'))).toEqual([404, 429]);
    expect(await statuses(3, (i) => view(i === 1 ? 'special' : 'other'))).toEqual([404, 429, 404]);
  });

  test('auth() runs once per request: the limit and the route share its answer', async () => {
    const calls: string[] = [];
    const counted = await startTestApp(engine, {
      collections,
      auth: (token) => {
        calls.push(token);
        return token === 'good' ? { id: 'someoneeeeeeeee' } : null;
      },
      rateLimits: { rules: [{ label: '/api/', maxRequests: 100, duration: 60, audience: '@auth' }] },
    });
    try {
      const auth = { Authorization: 'good', 'Content-Type': 'application/json' };
      expect((await counted.http.get('/backend/api/collections/a/records').set(auth)).status).toBe(200);
      expect((await counted.http.post('/backend/api/collections/a/records').set(auth).send({ name: 'x' })).status).toBe(200);
      expect((await counted.http.post('/backend/api/batch').set(auth).send({ requests: [{ method: 'POST', url: '/api/collections/a/records', body: {} }] })).status).toBe(200);
      expect(calls).toEqual(['good', 'good', 'good']);
    } finally {
      await counted.close();
    }
  });

  test('a path label counts the path the route reads: other case, a %-escape and a trailing slash are the same path', async () => {
    const paths = ['/api/collections/p/records', '/API/Collections/p/records/', '/api/collections/%70/records'];
    expect(await statuses(3, (i) => fetch(`${direct}${paths[i]}`))).toEqual([200, 200, 429]);
  });
});
