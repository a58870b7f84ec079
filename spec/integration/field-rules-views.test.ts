import type { CollectionDefinition } from '../../lib/index.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/**
 * Issue 46 in view collections (DESIGN 24, docs/collections.md "Field rules"): a view column that
 * copies a guarded field keeps its view rule where the rule compiles against the view, read on the
 * view's row; where it does not (it names what the view lacks), the copy is hidden, never shown
 * without its rule. A computed column over a guarded field is hidden as one over a hidden field is.
 */
const ALICE = 'aliceaaaaaaaaaa';
const BOB = 'bobbbbbbbbbbbbb';
const OWN = 'id = @request.auth.id';
const READ = { list: '', view: '' };

function collections(): CollectionDefinition[] {
  return [
    {
      name: 'people',
      fields: [
        { name: 'nick', type: 'text' },
        { name: 'email', type: 'email', rules: { view: OWN } },
        // Write rules only: anyone reads it, and a view takes no writes, so its copy is plain.
        { name: 'motto', type: 'text', rules: { create: null, update: 'owner = @request.auth.id' } },
        { name: 'owner', type: 'relation', collection: 'people' },
      ],
      rules: READ,
    },
    {
      name: 'notes',
      fields: [
        { name: 'owner', type: 'relation', collection: 'people' },
        { name: 'text', type: 'text' },
        { name: 'secret', type: 'text', rules: { view: 'owner = @request.auth.id' } },
      ],
      rules: READ,
    },
    // The view's id is the person's: the copied rule reads it on the view's row.
    { name: 'cards', type: 'view', viewQuery: 'SELECT p.id, p.nick, p.email, p.motto FROM people p', rules: READ },
    // The view's id is the nick: `id = @request.auth.id` compiles but fails closed.
    { name: 'by_nick', type: 'view', viewQuery: 'SELECT p.nick AS id, p.email FROM people p', rules: READ },
    // No `owner` on the view: the rule cannot be read here, so the copy is hidden.
    { name: 'note_texts', type: 'view', viewQuery: 'SELECT n.id, n.text, n.secret FROM notes n', rules: READ },
    // With `owner` the rule fits.
    { name: 'owned_notes', type: 'view', viewQuery: 'SELECT n.id, n.owner, n.secret FROM notes n', rules: READ },
    // A computed column over a guarded field may carry its value.
    { name: 'mail_hints', type: 'view', viewQuery: 'SELECT p.id, lower(p.email) AS mail, upper(p.nick) AS shout FROM people p', rules: READ },
    { name: 'shown_hints', type: 'view', viewQuery: 'SELECT p.id, lower(p.email) AS mail FROM people p', shownColumns: ['mail'], rules: READ },
  ];
}

type Who = 'guest' | 'alice' | 'bob' | 'root';

const byId = (a: { id: unknown }, b: { id: unknown }) => String(a.id).localeCompare(String(b.id));

describe.each(testEngines())('field rules in view collections on %s', (engine) => {
  let app: TestApp;
  const api = (path: string) => `/backend/api/collections/${path}`;
  const notes: Record<string, string> = {};

  async function create(collection: string, body: Record<string, unknown>): Promise<string> {
    const res = await app.http.post(api(`${collection}/records`)).set('Authorization', 'token-root').send(body);
    expect(res.status).toBe(200);
    return res.body.id as string;
  }

  async function list(who: Who, collection: string, query: Record<string, string> = {}): Promise<Record<string, unknown>[]> {
    let req = app.http.get(api(`${collection}/records`)).query({ perPage: 50, sort: 'id', ...query });
    if (who !== 'guest') req = req.set('Authorization', `token-${who}`);
    const res = await req;
    expect({ status: res.status, body: res.status === 200 ? undefined : res.body }).toEqual({ status: 200, body: undefined });
    return res.body.items as Record<string, unknown>[];
  }

  /** Each item's id and the named keys it has (absent keys left out, as the caller sees them). */
  async function shapes(who: Who, collection: string, keys: string[], query: Record<string, string> = {}) {
    const items = await list(who, collection, query);
    return items.map((item) => Object.fromEntries([['id', item.id], ...keys.filter((k) => k in item).map((k) => [k, item[k]])]));
  }

  beforeAll(async () => {
    app = await startTestApp(engine, { collections: collections(), openapi: true });
    await create('people', { id: ALICE, nick: 'alice', email: 'alice@example.com', motto: 'carpe' });
    await create('people', { id: BOB, nick: 'bob', email: 'bob@example.com', motto: 'diem' });
    notes.alice = await create('notes', { owner: ALICE, text: 'of alice', secret: 's-alice' });
    notes.bob = await create('notes', { owner: BOB, text: 'of bob', secret: 's-bob' });
  }, 120_000);

  afterAll(async () => {
    await app?.close();
  });

  test('a copy whose rule fits the view keeps it: the owner sees the e-mail, another user does not', async () => {
    expect(await shapes('alice', 'cards', ['email', 'motto'])).toEqual([
      { id: ALICE, email: 'alice@example.com', motto: 'carpe' },
      { id: BOB, motto: 'diem' },
    ]);
    expect(await shapes('bob', 'cards', ['email'])).toEqual([{ id: ALICE }, { id: BOB, email: 'bob@example.com' }]);
    expect(await shapes('guest', 'cards', ['email'])).toEqual([{ id: ALICE }, { id: BOB }]);
    expect(await shapes('root', 'cards', ['email'])).toEqual([
      { id: ALICE, email: 'alice@example.com' },
      { id: BOB, email: 'bob@example.com' },
    ]);
    // One record, and the filter oracle: the view's copy reads as empty where its rule fails.
    const one = await app.http.get(api(`cards/records/${BOB}`)).set('Authorization', 'token-alice');
    expect(one.status).toBe(200);
    expect(one.body).not.toHaveProperty('email');
    expect(await shapes('alice', 'cards', [], { filter: "email ~ 'bob'" })).toEqual([]);
    expect(await shapes('bob', 'cards', [], { filter: "email ~ 'bob'" })).toEqual([{ id: BOB }]);
    // With the names on the view, the owner of a note sees its secret there.
    expect(await shapes('alice', 'owned_notes', ['secret'])).toEqual([{ id: notes.alice, secret: 's-alice' }, { id: notes.bob }].sort(byId));
  });

  test('a rule read on the view\'s row fails closed where the row differs (the view\'s id is not the person\'s)', async () => {
    expect(await shapes('alice', 'by_nick', ['email'])).toEqual([{ id: 'alice' }, { id: 'bob' }]);
    expect(await shapes('root', 'by_nick', ['email'])).toEqual([
      { id: 'alice', email: 'alice@example.com' },
      { id: 'bob', email: 'bob@example.com' },
    ]);
  });

  test('a copy whose rule names what the view lacks is hidden: superusers only, and the router starts', async () => {
    // Even the owner: the view cannot tell who owns the row.
    expect(await shapes('alice', 'note_texts', ['text', 'secret'])).toEqual(
      [
        { id: notes.alice, text: 'of alice' },
        { id: notes.bob, text: 'of bob' },
      ].sort(byId),
    );
    expect(await shapes('root', 'note_texts', ['secret'])).toEqual(
      [
        { id: notes.alice, secret: 's-alice' },
        { id: notes.bob, secret: 's-bob' },
      ].sort(byId),
    );
    // Hidden: a client's filter cannot name it.
    const res = await app.http.get(api('note_texts/records')).query({ filter: "secret ~ 's'" }).set('Authorization', 'token-alice');
    expect(res.status).toBe(400);
  });

  test('a computed column over a guarded field is hidden, unless the view lists it in shownColumns', async () => {
    expect(await shapes('alice', 'mail_hints', ['mail', 'shout'])).toEqual([{ id: ALICE }, { id: BOB }]);
    expect(await shapes('root', 'mail_hints', ['mail'])).toEqual([
      { id: ALICE, mail: 'alice@example.com' },
      { id: BOB, mail: 'bob@example.com' },
    ]);
    expect(await shapes('guest', 'shown_hints', ['mail'])).toEqual([
      { id: ALICE, mail: 'alice@example.com' },
      { id: BOB, mail: 'bob@example.com' },
    ]);
  });

  test('the OpenAPI document shows the kept rule as optional and leaves the hidden copies out', async () => {
    const res = await app.http.get('/backend/api/openapi.json');
    expect(res.status).toBe(200);
    const schemas = res.body.components.schemas as Record<string, { required: string[]; properties: Record<string, unknown> }>;
    expect(schemas.CardsRecord.properties).toHaveProperty('email');
    expect(schemas.CardsRecord.required).not.toContain('email');
    expect(schemas.CardsRecord.required).toContain('motto');
    expect(Object.keys(schemas.NoteTextsRecord.properties)).not.toContain('secret');
    expect(Object.keys(schemas.MailHintsRecord.properties)).not.toContain('mail');
  });
});
