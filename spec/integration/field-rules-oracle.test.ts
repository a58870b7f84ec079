import type { CollectionDefinition } from '../../lib/index.js';
import { openSse, type SseConnection } from '../support/sse-reader.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/**
 * Issue 46's oracle attacks: a non-superuser's filter or sort reads a field whose own view rule
 * fails for them as the field's empty value, record by record (DESIGN 24), so neither which
 * records match nor their order tells what such a field holds; on the record itself, through
 * relation paths, back-relations, modifiers and function arguments. Rules read every field.
 */
const ALICE = 'aliceaaaaaaaaaa';
const BOB = 'bobbbbbbbbbbbbb';
// Carol's id sorts first and her e-mail last, so an order that leaked e-mails differs from the id order of "all empty".
const CAROL = 'abcarolcccccccc';
const OWN = 'id = @request.auth.id';

function collections(): CollectionDefinition[] {
  return [
    {
      name: 'people',
      fields: [
        { name: 'nick', type: 'text' },
        { name: 'email', type: 'email', rules: { view: OWN } },
        { name: 'roles', type: 'select', values: ['a', 'b', 'c'], maxSelect: 3, rules: { view: OWN } },
        { name: 'born', type: 'date', rules: { view: OWN } },
        { name: 'boss', type: 'relation', collection: 'people', rules: { view: OWN } },
        { name: 'secret', type: 'text', rules: { view: null } },
      ],
      rules: { list: '', view: '' },
    },
    {
      name: 'posts',
      fields: [
        { name: 'title', type: 'text' },
        { name: 'author', type: 'relation', collection: 'people' },
      ],
      // A rule reads every field, the guarded ones too: every post whose author has an e-mail is listed.
      rules: { list: "author.email ~ '@example.com'", view: '' },
    },
    {
      name: 'notes',
      fields: [
        { name: 'text', type: 'text' },
        { name: 'owner', type: 'relation', collection: 'people', rules: { view: 'owner = @request.auth.id' } },
      ],
      rules: { list: '', view: '' },
    },
  ];
}

type Who = 'guest' | 'alice' | 'bob' | 'root';

describe.each(testEngines())('a field view rule leaves no oracle in filters and sorts on %s', (engine) => {
  let app: TestApp;
  const api = (path: string) => `/backend/api/collections/${path}`;

  async function create(collection: string, body: Record<string, unknown>): Promise<string> {
    const res = await app.http.post(api(`${collection}/records`)).set('Authorization', 'token-root').send(body);
    expect(res.status).toBe(200);
    return res.body.id as string;
  }

  async function ids(who: Who, collection: string, query: { filter?: string; sort?: string }): Promise<string[]> {
    let req = app.http.get(api(`${collection}/records`)).query({ perPage: 50, sort: 'id', ...query });
    if (who !== 'guest') req = req.set('Authorization', `token-${who}`);
    const res = await req;
    expect({ status: res.status, body: res.status === 200 ? undefined : res.body }).toEqual({ status: 200, body: undefined });
    return (res.body.items as { id: string }[]).map((item) => item.id);
  }

  let alicePost: string;
  let carolPost: string;
  beforeAll(async () => {
    app = await startTestApp(engine, { collections: collections() });
    await create('people', { id: CAROL, nick: 'carol', email: 'zed@example.com', roles: ['c'], born: '1970-05-01 00:00:00.000Z', secret: 's-carol' });
    await create('people', { id: BOB, nick: 'bob', email: 'bob@example.com', roles: ['b'], born: '1980-05-01 00:00:00.000Z', boss: CAROL, secret: 's-bob' });
    await create('people', { id: ALICE, nick: 'alice', email: 'alice@example.com', roles: ['a'], born: '1990-05-01 00:00:00.000Z', boss: CAROL, secret: 's-alice' });
    alicePost = await create('posts', { title: 'by alice', author: ALICE });
    carolPost = await create('posts', { title: 'by carol', author: CAROL });
    await create('notes', { text: 'note of bob', owner: BOB });
    await create('notes', { text: 'note of alice', owner: ALICE });
  }, 120_000);

  afterAll(async () => {
    await app?.close();
  });

  test('comparisons on the field match as if it were empty where its view rule fails', async () => {
    expect(await ids('alice', 'people', { filter: "email ~ 'zed%'" })).toEqual([]);
    expect(await ids('alice', 'people', { filter: "email ~ 'b'" })).toEqual([]);
    expect(await ids('alice', 'people', { filter: "email > 'm'" })).toEqual([]);
    expect(await ids('alice', 'people', { filter: "email:lower = 'zed@example.com'" })).toEqual([]);
    expect(await ids('alice', 'people', { filter: "email != 'zed@example.com'" })).toEqual([CAROL, ALICE, BOB]);
    // The caller's own record passes the rule: its value is read.
    expect(await ids('alice', 'people', { filter: "email ~ 'alice'" })).toEqual([ALICE]);
    // "As if empty": the records whose e-mail the caller may not read are the ones that match "".
    expect(await ids('alice', 'people', { filter: "email = ''" })).toEqual([CAROL, BOB]);
    expect(await ids('guest', 'people', { filter: "email = ''" })).toEqual([CAROL, ALICE, BOB]);
    // A null view rule: superusers only.
    expect(await ids('alice', 'people', { filter: "secret ~ 's-'" })).toEqual([]);
    expect(await ids('root', 'people', { filter: "secret ~ 's-'" })).toEqual([CAROL, ALICE, BOB]);
  });

  test('multi-valued fields, modifiers and function arguments read the empty value too', async () => {
    expect(await ids('alice', 'people', { filter: "roles ?= 'c'" })).toEqual([]);
    expect(await ids('alice', 'people', { filter: "roles ~ 'b'" })).toEqual([]);
    expect(await ids('alice', 'people', { filter: "roles:each = 'c'" })).toEqual([]);
    expect(await ids('alice', 'people', { filter: 'roles:length > 0' })).toEqual([ALICE]);
    expect(await ids('alice', 'people', { filter: "strftime('%Y', born) = '1970'" })).toEqual([]);
    expect(await ids('alice', 'people', { filter: "strftime('%Y', born) = '1990'" })).toEqual([ALICE]);
    expect(await ids('root', 'people', { filter: "roles ?= 'c'" })).toEqual([CAROL]);
  });

  test('relation paths and back-relations obey the target field rule', async () => {
    expect(await ids('alice', 'posts', { filter: "author.email ~ 'zed'" })).toEqual([]);
    expect(await ids('alice', 'posts', { filter: "author.email = 'alice@example.com'" })).toEqual([alicePost]);
    expect(await ids('root', 'posts', { filter: "author.email ~ 'zed'" })).toEqual([carolPost]);
    // A guarded relation field leads nowhere where its rule fails: Bob's boss is not Alice's to follow.
    expect(await ids('alice', 'people', { filter: "boss.nick = 'carol'" })).toEqual([ALICE]);
    expect(await ids('alice', 'people', { filter: "boss = 'abcarolcccccccc'" })).toEqual([ALICE]);
    expect(await ids('root', 'people', { filter: "boss.nick = 'carol'" })).toEqual([ALICE, BOB]);
    // A back-relation through a guarded relation field: a note whose owner Alice may not read points nowhere.
    expect(await ids('alice', 'people', { filter: "notes_via_owner.text ?= 'note of bob'" })).toEqual([]);
    expect(await ids('alice', 'people', { filter: 'notes_via_owner:length > 0' })).toEqual([ALICE]);
    expect(await ids('bob', 'people', { filter: 'notes_via_owner:length > 0' })).toEqual([BOB]);
    expect(await ids('root', 'people', { filter: 'notes_via_owner:length > 0' })).toEqual([ALICE, BOB]);
    // @collection stays a rule's: a client's filter cannot reach a field through it.
    const res = await app.http.get(api('posts/records')).query({ filter: "@collection.people.email = 'zed@example.com'" }).set('Authorization', 'token-alice');
    expect(res.status).toBe(400);
  });

  test('a realtime subscription filter reads the field as the subscriber may: no event tells another record\'s value', async () => {
    const topic = (filter: string) => `people/*?options=${encodeURIComponent(JSON.stringify({ query: { filter } }))}`;
    const probe = topic("email ~ 'zed'");
    const marker = topic("nick ~ 'marker'");
    const streams: SseConnection[] = [];
    const subscribe = async (token: string, subscriptions: string[]) => {
      const sse = await openSse(`${app.baseUrl}/backend/api/realtime`);
      streams.push(sse);
      const clientId = await sse.clientId();
      const res = await app.http.post('/backend/api/realtime').set('Authorization', token).send({ clientId, subscriptions });
      expect(res.status).toBe(204);
      return sse;
    };
    try {
      // Alice probes Carol's e-mail; the superuser's identical subscription is the control that the update is delivered.
      const alice = await subscribe('token-alice', [probe, marker]);
      const control = await subscribe('token-root', [probe]);
      expect((await app.http.patch(api(`people/records/${CAROL}`)).set('Authorization', 'token-root').send({ nick: 'carol2' })).status).toBe(200);
      await control.next((e) => e.event === probe, { timeoutMs: 10_000 });
      // One client's events come in order: once the marker's event is here, a probe event for the update before it would be too.
      expect((await app.http.patch(api(`people/records/${BOB}`)).set('Authorization', 'token-root').send({ nick: 'marker' })).status).toBe(200);
      await alice.next((e) => e.event === marker, { timeoutMs: 10_000 });
      expect(alice.messages().map((m) => m.event)).toEqual([marker]);
    } finally {
      for (const sse of streams) sse.close();
      await app.http.patch(api(`people/records/${BOB}`)).set('Authorization', 'token-root').send({ nick: 'bob' });
      await app.http.patch(api(`people/records/${CAROL}`)).set('Authorization', 'token-root').send({ nick: 'carol' });
    }
  });

  test('rules read every field: the posts list rule reads authors\' e-mails for a guest', async () => {
    expect(await ids('guest', 'posts', {})).toEqual([alicePost, carolPost].sort());
  });

  test('a sort by the field, or through a relation to it, orders by what the caller may read', async () => {
    // Alice reads only her own e-mail: the others sort as "" (first ascending), by id among themselves.
    expect(await ids('alice', 'people', { sort: 'email' })).toEqual([CAROL, BOB, ALICE]);
    expect(await ids('alice', 'people', { sort: '-email' })).toEqual([ALICE, BOB, CAROL]);
    // Each caller's own: Bob's sort right after Alice's reads his e-mail, not hers.
    expect(await ids('bob', 'people', { sort: 'email' })).toEqual([CAROL, ALICE, BOB]);
    expect(await ids('guest', 'people', { sort: '-email' })).toEqual([BOB, ALICE, CAROL]);
    expect(await ids('root', 'people', { sort: 'email' })).toEqual([ALICE, BOB, CAROL]);
    expect(await ids('root', 'people', { sort: '-email' })).toEqual([CAROL, BOB, ALICE]);
    const byAuthor = [alicePost, carolPost];
    // By the author's e-mail: Alice's post ("alice@") after Carol's (""), whatever their ids.
    expect(await ids('alice', 'posts', { sort: 'author.email' })).toEqual([carolPost, alicePost]);
    expect(await ids('root', 'posts', { sort: 'author.email' })).toEqual(byAuthor);
    expect(await ids('bob', 'posts', { sort: 'author.email,-id' })).toEqual([...byAuthor].sort().reverse());
  });
});
