import type { CollectionDefinition } from '../../lib/index.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/**
 * A client filter or sort that goes through a relation sees only the related records that pass
 * the related collection's view rule (for non-superusers), so it cannot be used as an oracle to
 * probe records the caller may not view. Rules themselves and superusers see everything.
 */
const SELF = 'id = @request.auth.id';

function collections(): CollectionDefinition[] {
  return [
    {
      name: 'users',
      fields: [
        { name: 'email', type: 'email' },
        { name: 'team', type: 'text' },
      ],
      rules: { list: SELF, view: SELF },
    },
    // superusers only (every rule null)
    { name: 'vaults', fields: [{ name: 'code', type: 'text' }] },
    {
      name: 'posts',
      fields: [
        { name: 'title', type: 'text' },
        { name: 'draft', type: 'bool' },
        { name: 'author', type: 'relation', collection: 'users' },
        { name: 'editors', type: 'relation', collection: 'users', maxSelect: 5 },
        { name: 'vault', type: 'relation', collection: 'vaults' },
      ],
      // the list rule goes through `author` into users: rules are not limited by users' view rule
      rules: { list: 'draft = false || author.team = @request.auth.role', view: '' },
    },
    {
      name: 'comments',
      fields: [
        { name: 'text', type: 'text' },
        { name: 'post', type: 'relation', collection: 'posts' },
        { name: 'by', type: 'relation', collection: 'users' },
      ],
      rules: { list: 'by = @request.auth.id', view: 'by = @request.auth.id' },
    },
  ];
}

const ALICE = 'aliceaaaaaaaaaa';
const BOB = 'bobbbbbbbbbbbbb';
const ADMIN = 'adminaaaaaaaaaa';
// post ids sort opposite to their authors' emails (admin@ < alice@ < bob@), so an order that
// leaked the hidden emails would differ from the id order of "all empty"
const P1 = 'postccccccccccc'; // by admin
const P2 = 'postbbbbbbbbbbb'; // by alice
const P3 = 'postaaaaaaaaaaa'; // by bob, in the vault, edited by admin and alice
const P4 = 'postddddddddddd'; // a draft by bob

type Who = 'guest' | 'alice' | 'bob' | 'root';

describe.each(testEngines())('relation hops in filter and sort apply target view rules on %s', (engine) => {
  let app: TestApp;
  const api = (path: string) => `/backend/api/collections/${path}`;

  async function create(collection: string, body: Record<string, unknown>) {
    const res = await app.http.post(api(`${collection}/records`)).set('Authorization', 'token-root').send(body);
    expect(res.status).toBe(200);
    return res.body.id as string;
  }

  async function list(who: Who, query: { filter?: string; sort?: string }): Promise<string[]> {
    let req = app.http.get(api('posts/records')).query({ perPage: 50, sort: 'id', ...query });
    if (who !== 'guest') req = req.set('Authorization', `token-${who}`);
    const res = await req;
    expect(res.status).toBe(200);
    return (res.body.items as { id: string }[]).map((item) => item.id);
  }

  beforeAll(async () => {
    app = await startTestApp(engine, { collections: collections() });
    await create('users', { id: ALICE, email: 'alice@example.com', team: 'x' });
    await create('users', { id: BOB, email: 'bob@example.com', team: 'editor' });
    await create('users', { id: ADMIN, email: 'admin@corp.example', team: 'ops' });
    const vault = await create('vaults', { code: 'secret' });
    await create('posts', { id: P1, title: 'By admin', author: ADMIN });
    await create('posts', { id: P2, title: 'By alice', author: ALICE });
    await create('posts', { id: P3, title: 'By bob', author: BOB, vault, editors: [ADMIN, ALICE] });
    await create('posts', { id: P4, title: 'Draft by bob', author: BOB, draft: true });
    await create('comments', { text: 'bob secret', post: P1, by: BOB });
    await create('comments', { text: 'alice note', post: P1, by: ALICE });
  });
  afterAll(async () => {
    await app?.close();
  });

  test('a guest cannot probe the email of a user he may not view; alice sees her own; root sees all', async () => {
    const probe = "author.email ~ 'admin@'";
    expect(await list('guest', { filter: probe })).toEqual([]);
    expect(await list('alice', { filter: probe })).toEqual([]);
    expect(await list('bob', { filter: probe })).toEqual([]);
    expect(await list('root', { filter: probe })).toEqual([P1]);
    expect(await list('alice', { filter: "author.email ~ 'alice@'" })).toEqual([P2]);
    expect(await list('bob', { filter: "author.email ~ 'alice@'" })).toEqual([]);
    expect(await list('root', { filter: "author.email ~ '@example.com'" })).toEqual([P3, P2, P4]);
  });

  test('a hidden target reads as a missing one: its fields are empty', async () => {
    expect(await list('alice', { filter: "author.email = ''" })).toEqual([P3, P1, P4]);
    expect(await list('guest', { filter: "author.email = ''" })).toEqual([P3, P2, P1]);
    expect(await list('root', { filter: "author.email = ''" })).toEqual([]);
  });

  test('the record\'s own relation field is not restricted', async () => {
    expect(await list('guest', { filter: `author = '${ADMIN}'` })).toEqual([P1]);
    expect(await list('alice', { filter: "vault != ''" })).toEqual([P3]);
  });

  test('a target with a null view rule is seen by nobody but superusers', async () => {
    for (const who of ['guest', 'alice', 'bob'] as const) {
      expect(await list(who, { filter: "vault.code = 'secret'" })).toEqual([]);
      expect(await list(who, { filter: "vault.code ~ 's'" })).toEqual([]);
    }
    expect(await list('root', { filter: "vault.code = 'secret'" })).toEqual([P3]);
  });

  test('multi-valued relations and back-relations see only viewable records', async () => {
    expect(await list('alice', { filter: "editors.email ?~ 'admin@'" })).toEqual([]);
    expect(await list('alice', { filter: "editors.email ?~ 'alice@'" })).toEqual([P3]);
    expect(await list('root', { filter: "editors.email ?~ 'admin@'" })).toEqual([P3]);

    expect(await list('guest', { filter: "comments_via_post.text ?~ 'secret'" })).toEqual([]);
    expect(await list('alice', { filter: "comments_via_post.text ?~ 'secret'" })).toEqual([]);
    expect(await list('bob', { filter: "comments_via_post.text ?~ 'secret'" })).toEqual([P1]);
    expect(await list('alice', { filter: "comments_via_post.text ?~ 'note'" })).toEqual([P1]);
    expect(await list('alice', { filter: 'comments_via_post:length = 2' })).toEqual([]);
    expect(await list('alice', { filter: 'comments_via_post:length = 1' })).toEqual([P1]);
    expect(await list('root', { filter: 'comments_via_post:length = 2' })).toEqual([P1]);
  });

  test('the list rule of the main collection still applies, and is itself not limited by target rules', async () => {
    // alice's role is "editor", the team of bob, whom she cannot view: the rule still sees him
    expect(await list('alice', {})).toEqual([P3, P2, P1, P4]);
    expect(await list('bob', {})).toEqual([P3, P2, P1]);
    expect(await list('guest', {})).toEqual([P3, P2, P1]);
    expect(await list('guest', { filter: "title ~ 'Draft'" })).toEqual([]);
    // ...but alice's own filter through the same hop is limited
    expect(await list('alice', { filter: "author.team = 'editor'" })).toEqual([]);
    expect(await list('root', { filter: "author.team = 'editor'" })).toEqual([P3, P4]);
  });

  test('sorting through a relation sorts hidden targets as empty (no order leak)', async () => {
    // every author hidden from a guest: all keys equal, so the order is the id tie-breaker
    expect(await list('guest', { sort: 'author.email' })).toEqual([P3, P2, P1]);
    expect(await list('guest', { sort: '-author.email' })).toEqual([P1, P2, P3]);
    // alice sees only herself: hidden authors sort as '' (first), in id order
    expect(await list('alice', { sort: 'author.email' })).toEqual([P3, P1, P4, P2]);
    expect(await list('root', { sort: 'author.email' })).toEqual([P1, P2, P3, P4]);
    // null view rule: the vault code sorts as empty for everyone but root
    expect(await list('alice', { sort: 'vault.code' })).toEqual([P3, P2, P1, P4]);
    expect(await list('root', { sort: 'vault.code' })).toEqual([P2, P1, P4, P3]);
  });
});
