import { EventSource } from 'eventsource';
import PocketBase from 'pocketbase';
import type { CollectionDefinition } from '../../lib/index.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { openSse, type SseConnection } from '../support/sse-reader.js';
import { startTestApp, TEST_IDENTITIES, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/**
 * Issue 46, DESIGN 24 in realtime: each subscriber's message leaves out the fields whose view
 * rule refuses it on that record, in the shared path and in a client's lane (a filter with `~`,
 * an expand), for creates, updates and deletes; no message shaped for one caller reaches another.
 */

const alice = TEST_IDENTITIES['token-alice']!;
const bob = TEST_IDENTITIES['token-bob']!;
const api = (p: string) => `/backend/api/collections/${p}`;
const options = (query: object) => `?options=${encodeURIComponent(JSON.stringify({ query }))}`;

const collections = (): CollectionDefinition[] => [
  {
    name: 'members',
    fields: [
      { name: 'name', type: 'text' },
      { name: 'email', type: 'text', rules: { view: 'id = @request.auth.id' } },
    ],
    rules: OPEN_RULES,
  },
  {
    name: 'notes',
    fields: [
      { name: 'owner', type: 'text' },
      { name: 'title', type: 'text' },
      { name: 'secret', type: 'text', rules: { view: 'owner = @request.auth.id' } },
      { name: 'author', type: 'relation', collection: 'members' },
    ],
    rules: OPEN_RULES,
  },
  { name: 'markers', fields: [{ name: 'name', type: 'text' }], rules: OPEN_RULES },
];

type Stream = SseConnection & { id: string; token?: string; subscriptions: string[] };

describe.each(testEngines())('field view rules in realtime on %s', (engine) => {
  let app: TestApp;
  const open: SseConnection[] = [];
  beforeAll(async () => {
    app = await startTestApp(engine, { collections: collections(), realtime: { heartbeatMs: 1000 } });
    const members = app.router.api.collection('members');
    await members.create({ id: alice.id, name: 'Alice', email: 'alice@example.com' }, { as: 'superuser' });
    await members.create({ id: bob.id, name: 'Bob', email: 'bob@example.com' }, { as: 'superuser' });
  });
  afterEach(() => {
    for (const c of open.splice(0)) c.close();
  });
  afterAll(async () => {
    await app?.router.close();
    await app?.close();
  });

  async function subscribe(subscriptions: string[], token?: string): Promise<Stream> {
    const sse = await openSse(`${app.baseUrl}/backend/api/realtime`);
    open.push(sse);
    const id = await sse.clientId();
    const req = app.http.post('/backend/api/realtime');
    if (token) req.set('Authorization', token);
    expect((await req.send({ clientId: id, subscriptions: [...subscriptions, 'markers/*'] })).status).toBe(204);
    return Object.assign(sse, { id, token, subscriptions });
  }
  /** Resolves once every change before it has reached every stream (a marker after them, delivered in order). */
  async function settle(streams: Stream[]): Promise<void> {
    const marker = `marker-${Math.random().toString(36).slice(2)}`;
    expect((await app.http.post(api('markers/records')).send({ name: marker })).status).toBe(200);
    for (const sse of streams) await sse.next((e) => e.event === 'markers/*' && e.data!.includes(marker));
  }
  const records = (sse: Stream, event: string) => sse.messages(event).map((m) => [m.data.action, m.data.record] as const);

  test('two identities on one topic (`*` and a record id) each get their own shape; guests none, superusers all', async () => {
    const topics = ['members/*', `members/${bob.id}`];
    const [asAlice, asBob, asGuest, asRoot] = [await subscribe(topics, 'token-alice'), await subscribe(topics, 'token-bob'), await subscribe(topics), await subscribe(topics, 'token-root')];
    expect((await app.http.patch(api(`members/records/${bob.id}`)).set('Authorization', 'token-root').send({ name: 'Bob 2' })).status).toBe(200);
    await settle([asAlice, asBob, asGuest, asRoot]);
    for (const topic of topics) {
      expect(records(asAlice, topic)).toEqual([['update', expect.objectContaining({ id: bob.id, name: 'Bob 2' })]]);
      expect(records(asAlice, topic)[0]![1]).not.toHaveProperty('email');
      expect(records(asBob, topic)).toEqual([['update', expect.objectContaining({ id: bob.id, email: 'bob@example.com' })]]);
      expect(records(asGuest, topic)[0]![1]).not.toHaveProperty('email');
      expect(records(asRoot, topic)[0]![1]).toHaveProperty('email', 'bob@example.com');
    }
    expect(asAlice.text()).not.toContain('bob@example.com');
    expect(asGuest.text()).not.toContain('bob@example.com');
  });

  test('creates, updates and deletes: a rule on another field of the record (owner) decides each version', async () => {
    const [asAlice, asBob] = [await subscribe(['notes/*'], 'token-alice'), await subscribe(['notes/*'], 'token-bob')];
    const created = await app.http.post(api('notes/records')).set('Authorization', 'token-root').send({ owner: bob.id, title: 't', secret: 'bob-secret' });
    const id = created.body.id as string;
    await app.http.patch(api(`notes/records/${id}`)).set('Authorization', 'token-root').send({ owner: alice.id, secret: 'alice-secret' });
    await app.http.delete(api(`notes/records/${id}`)).set('Authorization', 'token-root');
    await settle([asAlice, asBob]);
    const secrets = (sse: Stream) => records(sse, 'notes/*').map(([action, record]) => [action, 'secret' in record ? record.secret : '-']);
    expect(secrets(asAlice)).toEqual([
      ['create', '-'],
      ['update', 'alice-secret'],
      ['delete', 'alice-secret'],
    ]);
    expect(secrets(asBob)).toEqual([
      ['create', 'bob-secret'],
      ['update', '-'],
      ['delete', '-'],
    ]);
  });

  test("in a client's lane (a `~` filter, an expand) each message is shaped for its own caller", async () => {
    const filtered = `notes/*${options({ filter: "title ~ 'lane'" })}`;
    const expanded = `notes/*${options({ expand: 'author' })}`;
    const [asAlice, asBob] = [await subscribe([filtered, expanded], 'token-alice'), await subscribe([filtered, expanded], 'token-bob')];
    await app.http.post(api('notes/records')).set('Authorization', 'token-root').send({ owner: bob.id, title: 'lane', secret: 'lane-secret', author: bob.id });
    await settle([asAlice, asBob]);
    const [[, aliceFiltered]] = records(asAlice, filtered) as [readonly [string, Record<string, any>]];
    const [[, aliceExpanded]] = records(asAlice, expanded) as [readonly [string, Record<string, any>]];
    expect(aliceFiltered).not.toHaveProperty('secret');
    expect(aliceExpanded).not.toHaveProperty('secret');
    expect(aliceExpanded.expand.author).toMatchObject({ id: bob.id });
    expect(aliceExpanded.expand.author).not.toHaveProperty('email');
    const [[, bobExpanded]] = records(asBob, expanded) as [readonly [string, Record<string, any>]];
    expect(bobExpanded).toMatchObject({ secret: 'lane-secret', expand: { author: { email: 'bob@example.com' } } });
    expect(records(asBob, filtered)[0]![1]).toHaveProperty('secret', 'lane-secret');
  });

  test('the SDK: each identity receives its own shape', async () => {
    const previous = (globalThis as { EventSource?: unknown }).EventSource;
    (globalThis as { EventSource?: unknown }).EventSource = EventSource;
    const clients = ['token-alice', 'token-bob'].map((token) => {
      const pb = new PocketBase(`${app.baseUrl}/backend`);
      pb.autoCancellation(false);
      pb.authStore.save(token, null);
      return pb;
    });
    try {
      const heard: Record<string, unknown>[][] = [[], []];
      for (const [i, pb] of clients.entries()) await pb.collection('members').subscribe(alice.id, (event) => void heard[i]!.push(event.record));
      await clients[1]!.collection('members').update(alice.id, { name: 'Alice 2' });
      const deadline = Date.now() + 10_000;
      while (heard.some((list) => list.length === 0) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(heard[0]).toEqual([expect.objectContaining({ name: 'Alice 2', email: 'alice@example.com' })]);
      expect(heard[1]).toHaveLength(1);
      expect(heard[1]![0]).toHaveProperty('name', 'Alice 2');
      expect(heard[1]![0]).not.toHaveProperty('email');
    } finally {
      for (const pb of clients) await pb.realtime.unsubscribe().catch(() => undefined);
      (globalThis as { EventSource?: unknown }).EventSource = previous;
    }
  });
});
