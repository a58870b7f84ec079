import type { CollectionDefinition } from '../../lib/index.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { openSse, type SseConnection } from '../support/sse-reader.js';
import { startSiblingRouter, startTestApp, TEST_IDENTITIES, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/** DESIGN 12 over a listening server: the wire format, rules, every kind of write, limits. */

const alice = TEST_IDENTITIES['token-alice']!;
const bob = TEST_IDENTITIES['token-bob']!;
const api = (p: string) => `/backend/api/collections/${p}`;

function collections(): CollectionDefinition[] {
  return [
    { name: 'tags', fields: [{ name: 'name', type: 'text' }], rules: { ...OPEN_RULES, view: "name != 'hidden'" } },
    {
      name: 'posts',
      id: 'pbc_posts000001',
      fields: [
        { name: 'title', type: 'text' },
        { name: 'n', type: 'number' },
        { name: 'secret', type: 'text', hidden: true },
        { name: 'tag', type: 'relation', collection: 'tags' },
      ],
      rules: OPEN_RULES,
    },
    { name: 'keyed', fields: [{ name: 'title', type: 'text' }], rules: { ...OPEN_RULES, list: '@request.query.key = "k1"' } },
    {
      name: 'owned',
      fields: [
        { name: 'owner', type: 'text' },
        { name: 'title', type: 'text' },
      ],
      rules: { ...OPEN_RULES, list: 'owner = @request.auth.id', view: 'owner = @request.auth.id' },
    },
    { name: 'viewonly', fields: [{ name: 'title', type: 'text' }], rules: { ...OPEN_RULES, list: null, view: '' } },
    { name: 'parents', fields: [{ name: 'name', type: 'text' }], rules: OPEN_RULES },
    { name: 'children', fields: [{ name: 'name', type: 'text' }, { name: 'parent', type: 'relation', collection: 'parents', cascadeDelete: true }], rules: OPEN_RULES },
    { name: 'events', fields: [{ name: 'name', type: 'text' }, { name: 'starts', type: 'date' }], rules: { ...OPEN_RULES, view: 'starts <= @now' } },
    { name: 'tickets', fields: [{ name: 'seat', type: 'text' }, { name: 'event', type: 'relation', collection: 'events' }], rules: OPEN_RULES },
  ];
}

describe.each(testEngines({ pooler: true }))('realtime on %s', (engine) => {
  let app: TestApp;
  const open: SseConnection[] = [];
  beforeAll(async () => {
    app = await startTestApp(engine, { collections: collections(), realtime: { heartbeatMs: 300, maxClientsPerAddress: 1_000 } });
  });
  afterEach(() => {
    for (const c of open.splice(0)) c.close();
  });
  afterAll(async () => {
    await app?.router.close();
    await app?.close();
  });

  /** Opens a stream and subscribes it; returns it with its clientId. */
  async function subscribe(subscriptions: string[], token?: string): Promise<SseConnection & { id: string; token?: string }> {
    const sse = await openSse(`${app.baseUrl}/backend/api/realtime`);
    open.push(sse);
    const id = await sse.clientId();
    const req = app.http.post('/backend/api/realtime');
    if (token) req.set('Authorization', token);
    const res = await req.send({ clientId: id, subscriptions });
    expect(res.status).toBe(204);
    return Object.assign(sse, { id, token });
  }
  const create = (collection: string, body: object, token?: string) => {
    const req = app.http.post(api(`${collection}/records`));
    if (token) req.set('Authorization', token);
    return req.send(body);
  };
  /** A create after which every earlier change has surely been delivered: a marker on a subscription of its own. */
  async function settle(sse: SseConnection & { id: string; token?: string }, subscriptions: string[]): Promise<void> {
    const marker = `marker-${Math.random().toString(36).slice(2)}`;
    const post = app.http.post('/backend/api/realtime');
    if (sse.token) post.set('Authorization', sse.token);
    const res = await post.send({ clientId: sse.id, subscriptions: [...subscriptions, 'parents/*'] });
    expect(res.status).toBe(204);
    await create('parents', { name: marker });
    await sse.next((e) => e.event === 'parents/*' && e.data!.includes(marker));
  }

  test('GET answers an event stream and PB_CONNECT with the id line at once', async () => {
    const sse = await openSse(`${app.baseUrl}/backend/api/realtime`);
    open.push(sse);
    expect(sse.status).toBe(200);
    expect(sse.headers['content-type']).toBe('text/event-stream');
    expect(sse.headers['cache-control']).toBe('no-store, no-transform');
    expect(sse.headers['x-accel-buffering']).toBe('no');
    const id = await sse.clientId();
    expect(id).toMatch(/^[A-Za-z0-9]{40}$/);
    expect(sse.text().startsWith(`id:${id}\nevent:PB_CONNECT\ndata:{"clientId":"${id}"}\n\n`)).toBe(true);
  });

  test('a heartbeat comment comes every heartbeatMs', async () => {
    const sse = await openSse(`${app.baseUrl}/backend/api/realtime`);
    open.push(sse);
    await sse.clientId();
    await sse.next((e) => e.comment === '', { timeoutMs: 3000 });
    expect(sse.text()).toContain('\n\n:\n\n');
  });

  test('create, update and delete reach posts/* with the id line, byte-exact event and action', async () => {
    const sse = await subscribe(['posts/*']);
    const created = await create('posts', { title: 'hello', n: 1 });
    expect(created.status).toBe(200);
    const id = created.body.id as string;
    expect((await app.http.patch(api(`posts/records/${id}`)).send({ n: 2 })).status).toBe(200);
    expect((await app.http.delete(api(`posts/records/${id}`))).status).toBe(204);
    await sse.next((e) => e.event === 'posts/*' && e.data!.includes('"delete"'));
    const messages = sse.messages('posts/*');
    expect(messages.map((m) => [m.id, m.data.action, m.data.record.id, m.data.record.n])).toEqual([
      [sse.id, 'create', id, 1],
      [sse.id, 'update', id, 2],
      [sse.id, 'delete', id, 2],
    ]);
    expect(messages[0].data.record).toEqual(created.body);
    expect(sse.text()).toContain(`id:${sse.id}\nevent:posts/*\ndata:{"action":"create","record":{`);
  });

  test('topics by collection id and by record id; one message per matching subscription, events echoed byte for byte', async () => {
    const other = await create('posts', { title: 'other' });
    const target = await create('posts', { title: 'target' });
    const options = `?options=${encodeURIComponent(JSON.stringify({ query: { fields: 'id,title' } }))}`;
    const subs = ['pbc_posts000001/*', `posts/${target.body.id}`, `posts/*${options}`, 'PB_CONNECT', 'nosuch/*'];
    const sse = await subscribe(subs);
    expect((await app.http.patch(api(`posts/records/${target.body.id}`)).send({ n: 5 })).status).toBe(200);
    expect((await app.http.patch(api(`posts/records/${other.body.id}`)).send({ n: 6 })).status).toBe(200);
    await settle(sse, subs);
    const seen = sse.messages().filter((m) => m.event !== 'parents/*');
    expect(seen.map((m) => [m.event, m.data.record.id])).toEqual([
      ['pbc_posts000001/*', target.body.id],
      [`posts/${target.body.id}`, target.body.id],
      [`posts/*${options}`, target.body.id],
      ['pbc_posts000001/*', other.body.id],
      [`posts/*${options}`, other.body.id],
    ]);
    expect(seen[2].data.record).toEqual({ id: target.body.id, title: 'target' });
  });

  test('options: a filter, expand through the view rule, fields, and other query keys read by the rule', async () => {
    const shown = await create('tags', { name: 'shown' });
    const hidden = await create('tags', { name: 'hidden' });
    const withOptions = (query: object, topic = 'posts/*') => `${topic}?options=${encodeURIComponent(JSON.stringify({ query, headers: { 'X-Token': 'abc' } }))}`;
    const filtered = withOptions({ filter: 'n > 10', expand: 'tag', fields: 'id,n,expand' });
    const wrongKey = withOptions({ key: 'nope' }, 'keyed/*');
    const rightKey = withOptions({ key: 'k1' }, 'keyed/*');
    const sse = await subscribe([filtered, wrongKey, rightKey]);
    await create('posts', { title: 'small', n: 1, tag: shown.body.id });
    const big = await create('posts', { title: 'big', n: 11, tag: shown.body.id });
    const bigHidden = await create('posts', { title: 'big2', n: 12, tag: hidden.body.id });
    for (const title of ['small', 'big', 'big2']) await create('keyed', { title });
    await settle(sse, [filtered, wrongKey, rightKey]);
    expect(sse.messages(filtered).map((m) => m.data.record)).toEqual([
      { id: big.body.id, n: 11, expand: { tag: { ...shown.body } } },
      { id: bigHidden.body.id, n: 12 },
    ]);
    expect(sse.messages(wrongKey)).toEqual([]);
    expect(sse.messages(rightKey).map((m) => m.data.record.title)).toEqual(['small', 'big', 'big2']);
  });

  test('hidden fields only for superusers', async () => {
    const guest = await subscribe(['posts/*']);
    const root = await subscribe(['posts/*'], 'token-root');
    await create('posts', { title: 's', secret: 'psst' });
    const [g] = [await guest.next((e) => e.event === 'posts/*')];
    const r = await root.next((e) => e.event === 'posts/*');
    expect(JSON.parse(g.data!).record.secret).toBeUndefined();
    expect(JSON.parse(r.data!).record.secret).toBe('psst');
  });

  test('an owner rule: each identity receives only its own records; the list rule for c/*, the view rule for c/id', async () => {
    const a = await subscribe(['owned/*'], 'token-alice');
    const b = await subscribe(['owned/*'], 'token-bob');
    const g = await subscribe(['owned/*']);
    await create('owned', { owner: alice.id, title: 'for alice' });
    await create('owned', { owner: bob.id, title: 'for bob' });
    await settle(a, ['owned/*']);
    await settle(b, ['owned/*']);
    await settle(g, ['owned/*']);
    expect(a.messages('owned/*').map((m) => m.data.record.title)).toEqual(['for alice']);
    expect(b.messages('owned/*').map((m) => m.data.record.title)).toEqual(['for bob']);
    expect(g.messages('owned/*')).toEqual([]);

    const record = await create('viewonly', { title: 'v' });
    const v = await subscribe(['viewonly/*', `viewonly/${record.body.id}`]);
    expect((await app.http.patch(api(`viewonly/records/${record.body.id}`)).send({ title: 'v2' })).status).toBe(200);
    await settle(v, ['viewonly/*', `viewonly/${record.body.id}`]);
    expect(v.messages().filter((m) => m.event !== 'parents/*').map((m) => m.event)).toEqual([`viewonly/${record.body.id}`]);
  });

  test("a relation hop's target view rule that reads @now is read at each change, not frozen at the first (issue 30 bug 3)", async () => {
    const soon = new Date(Date.now() + 1_500).toISOString();
    const event = await create('events', { name: 'gig', starts: soon });
    const topic = `tickets/*?options=${encodeURIComponent(JSON.stringify({ query: { filter: "event.name = 'gig'" } }))}`;
    const sse = await subscribe([topic]);
    // The first change compiles (and before issue 29, froze) the subscription's conditions: the event has not started.
    await create('tickets', { seat: 'early', event: event.body.id });
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const late = await create('tickets', { seat: 'late', event: event.body.id });
    await sse.next((e) => e.event === topic && e.data!.includes(late.body.id as string));
    expect(sse.messages(topic).map((m) => m.data.record.seat)).toEqual(['late']);
  });

  test('a delete is checked against the row as it was', async () => {
    const a = await subscribe(['owned/*'], 'token-alice');
    const mine = await create('owned', { owner: alice.id, title: 'gone soon' });
    expect((await app.http.delete(api(`owned/records/${mine.body.id}`))).status).toBe(204);
    const e = await a.next((x) => x.event === 'owned/*' && x.data!.includes('"delete"'));
    expect(JSON.parse(e.data!).record).toMatchObject({ id: mine.body.id, owner: alice.id, title: 'gone soon' });
  });

  test('cascade deletes, bulk delete, batch and the server API all emit; a failed batch and a failed write emit nothing', async () => {
    const subs = ['children/*', 'posts/*'];
    const sse = await subscribe(subs);
    const parent = await create('parents', { name: 'p' });
    const kids = [await create('children', { name: 'k1', parent: parent.body.id }), await create('children', { name: 'k2', parent: parent.body.id })];
    expect((await app.http.delete(api(`parents/records/${parent.body.id}`))).status).toBe(204);
    await create('posts', { title: 'bulk', n: 900 });
    await create('posts', { title: 'bulk', n: 901 });
    expect((await app.http.delete(api('posts/records')).query({ filter: 'n >= 900' })).status).toBe(200);
    const batch = await app.http.post('/backend/api/batch').send({
      requests: [
        { method: 'POST', url: '/api/collections/posts/records', body: { title: 'batched', n: 1 } },
        { method: 'POST', url: '/api/collections/posts/records', body: { title: 'batched', n: 2 } },
      ],
    });
    expect(batch.status).toBe(200);
    const failed = await app.http.post('/backend/api/batch').send({
      requests: [
        { method: 'POST', url: '/api/collections/posts/records', body: { title: 'rolled back' } },
        { method: 'PATCH', url: '/api/collections/posts/records/nosuchrecord00', body: { title: 'x' } },
      ],
    });
    expect(failed.status).toBe(400);
    expect((await create('posts', { title: 'bad', n: 'not a number' })).status).toBe(422);
    await app.router.api.collection('posts').create({ title: 'server api' });
    await settle(sse, subs);
    const seen = sse.messages().filter((m) => m.event !== 'parents/*');
    expect(seen.map((m) => `${m.event} ${m.data.action} ${m.data.record.name ?? m.data.record.title}`)).toEqual([
      'children/* create k1',
      'children/* create k2',
      'children/* delete k1',
      'children/* delete k2',
      'posts/* create bulk',
      'posts/* create bulk',
      'posts/* delete bulk',
      'posts/* delete bulk',
      'posts/* create batched',
      'posts/* create batched',
      'posts/* create server api',
    ]);
    expect(kids.map((k) => k.status)).toEqual([200, 200]);
  });

  test('1,200 rows of one statement (another program writing directly) arrive once each, in the order written, across pages', async () => {
    const sse = await subscribe(['tags/*']);
    await app.database.db.raw(
      "INSERT INTO tags (id, name, created, updated) SELECT 'bulk' || lpad(i::text, 11, '0'), 'n' || i, now(), now() FROM generate_series(1, 1200) AS i ORDER BY i",
    );
    await sse.next((e) => e.event === 'tags/*' && e.data!.includes('"n1200"'), { timeoutMs: 15_000 });
    const names = sse.messages('tags/*').map((m) => m.data.record.name);
    expect(names).toEqual(Array.from({ length: 1200 }, (_, i) => `n${i + 1}`));
  });

  test('POST errors: 400 without clientId, 404 unknown client, 400 for too many, too long or bad subscriptions', async () => {
    const post = (body: object) => app.http.post('/backend/api/realtime').send(body);
    const missing = await post({ subscriptions: [] });
    expect(missing.status).toBe(400);
    expect(missing.body.data).toEqual({ clientId: { code: 'validation_required', message: 'Missing required value.' } });
    const unknown = await post({ clientId: 'nosuchclient', subscriptions: [] });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ status: 404, message: 'Missing or invalid client id.', data: {} });
    const sse = await openSse(`${app.baseUrl}/backend/api/realtime`);
    open.push(sse);
    const clientId = await sse.clientId();
    expect((await post({ clientId, subscriptions: Array.from({ length: 1001 }, () => 'posts/*') })).status).toBe(400);
    expect((await post({ clientId, subscriptions: [`posts/${'x'.repeat(2500)}`] })).status).toBe(400);
    const badFilter = `posts/*?options=${encodeURIComponent(JSON.stringify({ query: { filter: 'nosuchfield = 1' } }))}`;
    const bad = await post({ clientId, subscriptions: [badFilter] });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toContain(JSON.stringify(badFilter.slice(0, 200)));
    expect((await post({ clientId, subscriptions: ['posts/*\nevent:forged'] })).status).toBe(400);
    expect((await post({ clientId, subscriptions: ['posts/*?options=%7Bnot json'] })).status).toBe(400);
    expect((await post({ clientId, subscriptions: 'posts/*' })).status).toBe(400);
    expect((await post({ clientId, subscriptions: [] })).status).toBe(204);
  });

  test('the identity lock: guest to signed-in is allowed, then another identity or none is 403', async () => {
    const sse = await openSse(`${app.baseUrl}/backend/api/realtime`);
    open.push(sse);
    const clientId = await sse.clientId();
    const post = (token?: string) => {
      const req = app.http.post('/backend/api/realtime');
      if (token) req.set('Authorization', token);
      return req.send({ clientId, subscriptions: ['posts/*'] });
    };
    expect((await post()).status).toBe(204);
    expect((await post('token-alice')).status).toBe(204);
    expect((await post('token-alice')).status).toBe(204);
    const other = await post('token-bob');
    expect(other.status).toBe(403);
    expect(other.body.message).toBe("The current and the previous request authorization don't match.");
    expect((await post()).status).toBe(403);
  });

  test('a closed stream is gone: its clientId answers 404', async () => {
    const sse = await openSse(`${app.baseUrl}/backend/api/realtime`);
    const clientId = await sse.clientId();
    sse.close();
    for (let i = 0; i < 50; i++) {
      const res = await app.http.post('/backend/api/realtime').send({ clientId, subscriptions: [] });
      if (res.status === 404) return;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    throw new Error('the closed client still answers 204');
  });

  test('rule checks are batched: 200 subscribers with an owner rule cost a handful of statements per change', async () => {
    const identities = Array.from({ length: 200 }, (_, i) => `user${String(i).padStart(11, '0')}`);
    const streams: (SseConnection & { id: string })[] = [];
    for (const id of identities) {
      TEST_IDENTITIES[`token-${id}`] = { id };
      streams.push(await subscribe(['owned/*'], `token-${id}`));
    }
    const db = app.database.db;
    let statements = 0;
    const count = () => void statements++;
    db.on('query', count);
    try {
      const before = statements;
      const target = identities[123];
      const res = await create('owned', { owner: target, title: 'for one' });
      expect(res.status).toBe(200);
      await streams[123].next((e) => e.event === 'owned/*');
      await new Promise((resolve) => setTimeout(resolve, 200));
      const used = statements - before;
      // The create itself (a handful) + reading the outbox (2-3) + one rule statement for 200 subscribers.
      expect(used).toBeLessThan(20);
      expect(streams.filter((s) => s.messages('owned/*').length > 0).map((s) => s.id)).toEqual([streams[123].id]);
    } finally {
      db.off('query', count);
      for (const id of identities) delete TEST_IDENTITIES[`token-${id}`];
    }
  });
});

describe.each(testEngines({ pooler: true }).filter((e) => e !== 'pglite'))('realtime across connections and routers on %s', (engine) => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp(engine, { collections: collections() });
  });
  afterAll(async () => {
    await app?.router.close();
    await app?.close();
  });

  async function stream(subscriptions: string[], via = app.http) {
    const sse = await openSse(`${app.baseUrl}/backend/api/realtime`);
    const clientId = await sse.clientId();
    expect((await via.post('/backend/api/realtime').send({ clientId, subscriptions })).status).toBe(204);
    return sse;
  }

  test('two interleaved transactions, the later-started committing first: both delivered once each, per-record order kept', async () => {
    const sse = await stream(['parents/*', 'posts/*']);
    const db = app.database.db;
    const first = await db.transaction();
    const second = await db.transaction();
    try {
      await first.raw("INSERT INTO posts (id, title, created, updated) VALUES ('txfirst00000001', 'first', now(), now())");
      await first.raw("UPDATE posts SET n = 1 WHERE id = 'txfirst00000001'");
      await second.raw("INSERT INTO posts (id, title, created, updated) VALUES ('txsecond0000001', 'second', now(), now())");
      await second.commit();
      await first.raw("UPDATE posts SET n = 2 WHERE id = 'txfirst00000001'");
      await first.commit();
    } catch (err) {
      await first.rollback().catch(() => undefined);
      await second.rollback().catch(() => undefined);
      throw err;
    }
    await db('posts').where('id', 'txfirst00000001').update({ n: 3 });
    await sse.next((e) => e.event === 'posts/*' && e.data!.includes('"n":3'));
    // Two safety polls later nothing came twice.
    await new Promise((resolve) => setTimeout(resolve, 4500));
    const seen = sse.messages('posts/*').map((m) => `${m.data.action} ${m.data.record.id} ${m.data.record.n}`);
    expect(seen.filter((x) => x.includes('txsecond'))).toEqual(['create txsecond0000001 null']);
    expect(seen.filter((x) => x.includes('txfirst'))).toEqual(['create txfirst00000001 null', 'update txfirst00000001 1', 'update txfirst00000001 2', 'update txfirst00000001 3']);
    sse.close();
  });

  test('a POST through another router reaches the stream here; writes through either router are delivered', async () => {
    const sibling = await startSiblingRouter(app, { collections: collections() });
    try {
      const sse = await stream(['posts/*'], sibling.http);
      const created = await sibling.http.post(api('posts/records')).send({ title: 'via sibling' });
      expect(created.status).toBe(200);
      const e = await sse.next((x) => x.event === 'posts/*');
      expect(JSON.parse(e.data!).record.id).toBe(created.body.id);
      const clientId = await sse.clientId();
      const lock = await sibling.http.post('/backend/api/realtime').set('Authorization', 'token-alice').send({ clientId, subscriptions: ['posts/*'] });
      expect(lock.status).toBe(204);
      const mismatch = await sibling.http.post('/backend/api/realtime').set('Authorization', 'token-bob').send({ clientId, subscriptions: ['posts/*'] });
      expect(mismatch.status).toBe(403);
      sse.close();
    } finally {
      await sibling.close();
    }
  });
});

describe.each(testEngines({ pooler: true }))('realtime limits and switches on %s', (engine) => {
  test('realtime: false answers 404 on both routes', async () => {
    const app = await startTestApp(engine, { collections: collections(), realtime: false });
    try {
      expect((await app.http.get('/backend/api/realtime')).status).toBe(404);
      expect((await app.http.post('/backend/api/realtime').send({ clientId: 'x', subscriptions: [] })).status).toBe(404);
    } finally {
      await app.close();
    }
  });

  test('maxClients: one more stream is a 503; close() ends every stream', async () => {
    const app = await startTestApp(engine, { collections: collections(), realtime: { maxClients: 2 } });
    const streams: SseConnection[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        const sse = await openSse(`${app.baseUrl}/backend/api/realtime`);
        streams.push(sse);
        await sse.clientId();
      }
      const third = await app.http.get('/backend/api/realtime');
      expect(third.status).toBe(503);
      expect(third.body.message).toMatch(/Too many realtime clients/);
      await app.router.close();
      await Promise.all(streams.map((s) => s.endedPromise));
    } finally {
      await app.close();
    }
    expect(streams.every((s) => s.ended())).toBe(true);
  });

  test('a client that does not read is dropped once its buffer is over the bound', async () => {
    const app = await startTestApp(engine, { collections: collections(), realtime: { maxClientBufferBytes: 64 * 1024 } });
    try {
      const slow = await openSse(`${app.baseUrl}/backend/api/realtime`);
      const clientId = await slow.clientId();
      expect((await app.http.post('/backend/api/realtime').send({ clientId, subscriptions: ['posts/*'] })).status).toBe(204);
      slow.pause();
      // The socket buffers of loopback take a few MB before the server's own buffer grows: keep
      // writing until the server gives the client up (its clientId then answers 404).
      const big = 'x'.repeat(200_000);
      let status = 204;
      for (let i = 0; i < 400 && status !== 404; i++) {
        expect((await app.http.post(api('posts/records')).send({ title: big })).status).toBe(200);
        if (i % 10 === 9) status = (await app.http.post('/backend/api/realtime').send({ clientId, subscriptions: ['posts/*'] })).status;
      }
      for (let i = 0; i < 50 && status !== 404; i++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        status = (await app.http.post('/backend/api/realtime').send({ clientId, subscriptions: [] })).status;
      }
      expect(status).toBe(404);
    } finally {
      await app.router.close();
      await app.close();
    }
  });
});
