import type { CollectionDefinition } from '../../lib/index.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';
import { OPEN_RULES } from '../support/open-rules.js';


function collections(): CollectionDefinition[] {
  return [
    {
      name: 'people',
      fields: [
        { name: 'name', type: 'text' },
        { name: 'bio', type: 'text' },
        { name: 'private', type: 'bool' },
        { name: 'boss', type: 'relation', collection: 'people' },
      ],
      // private people are visible to their own identity only
      rules: { ...OPEN_RULES, view: 'private = false || id = @request.auth.id' },
    },
    { name: 'vault', fields: [{ name: 'code', type: 'text' }], rules: { create: '' } },
    {
      name: 'articles',
      fields: [
        { name: 'title', type: 'text' },
        { name: 'body', type: 'text' },
        { name: 'author', type: 'relation', collection: 'people' },
        { name: 'reviewers', type: 'relation', collection: 'people', maxSelect: 5 },
        { name: 'safe', type: 'relation', collection: 'vault' },
        { name: 'ghost', type: 'relation', collection: 'people', hidden: true },
      ],
      rules: OPEN_RULES,
    },
    {
      name: 'notes',
      fields: [
        { name: 'text', type: 'text' },
        { name: 'article', type: 'relation', collection: 'articles' },
      ],
      rules: OPEN_RULES,
    },
  ];
}

describe.each(testEngines())('expand and fields on %s', (engine) => {
  let app: TestApp;
  const api = (path: string) => `/backend/api/collections/${path}`;
  const ids: Record<string, string> = {};

  async function create(collection: string, body: Record<string, unknown>, headers: Record<string, string> = {}) {
    const res = await app.http.post(api(`${collection}/records`)).set(headers).send(body);
    expect(res.status).toBe(200);
    return res.body.id as string;
  }

  beforeAll(async () => {
    app = await startTestApp(engine, { collections: collections() });
    // a chain of bosses 8 deep: p0 <- p1 <- ... <- p7 (p7's boss is p6, ...)
    let boss = '';
    for (let i = 0; i < 8; i++) {
      boss = await create('people', { id: `person${String(i).padStart(9, '0')}`, name: `P${i}`, boss });
      ids[`p${i}`] = boss;
    }
    ids.hidden = await create('people', { id: 'aliceaaaaaaaaaa', name: 'Private Alice', private: true });
    ids.vault = await create('vault', { code: 'x' });
    ids.a1 = await create('articles', {
      title: 'First',
      body: '<p>Hello <b>world</b>, this is a long body</p>',
      author: ids.p1,
      reviewers: [ids.p3, ids.hidden, ids.p2],
      safe: ids.vault,
      ghost: ids.p4,
    });
    ids.a2 = await create('articles', { title: 'Second', author: ids.p1, reviewers: [] });
    ids.a3 = await create('articles', { title: 'Third', author: ids.hidden });
    ids.n1 = await create('notes', { text: 'n1', article: ids.a1 });
    ids.n2 = await create('notes', { text: 'n2', article: ids.a1 });
    ids.n3 = await create('notes', { text: 'n3', article: ids.a2 });
  });
  afterAll(async () => {
    await app?.close();
  });

  test('a single relation expands to an object, a multiple one to an array in stored order', async () => {
    const res = await app.http.get(api(`articles/records/${ids.a1}?expand=author,reviewers`));
    expect(res.status).toBe(200);
    expect(res.body.expand.author).toMatchObject({ id: ids.p1, name: 'P1', collectionName: 'people' });
    expect(res.body.expand.reviewers.map((r: { id: string }) => r.id)).toEqual([ids.p3, ids.p2]);
    expect(res.body.reviewers).toEqual([ids.p3, ids.hidden, ids.p2]);
  });

  test('related records failing their view rule are left out; the owner sees them', async () => {
    const guest = await app.http.get(api(`articles/records/${ids.a3}?expand=author`));
    expect(guest.body.author).toBe(ids.hidden);
    expect(guest.body).not.toHaveProperty('expand');
    const alice = await app.http.get(api(`articles/records/${ids.a3}?expand=author`)).set('Authorization', 'token-alice');
    expect(alice.body.expand.author.name).toBe('Private Alice');
  });

  test('a target whose view rule is null expands for superusers only', async () => {
    const guest = await app.http.get(api(`articles/records/${ids.a1}?expand=safe`));
    expect(guest.body).not.toHaveProperty('expand');
    const root = await app.http.get(api(`articles/records/${ids.a1}?expand=safe`)).set('Authorization', 'token-root');
    expect(root.body.expand.safe.code).toBe('x');
  });

  test('back-relations expand to arrays; unknown names and hidden relations are ignored', async () => {
    const res = await app.http.get(api(`articles/records?expand=notes_via_article,nope,ghost,author.nope&sort=created`));
    expect(res.status).toBe(200);
    const [a1, a2, a3] = res.body.items;
    expect(a1.expand.notes_via_article.map((n: { text: string }) => n.text)).toEqual(['n1', 'n2']);
    expect(a2.expand.notes_via_article.map((n: { text: string }) => n.text)).toEqual(['n3']);
    expect(a3).not.toHaveProperty('expand');
    expect(a1.expand).not.toHaveProperty('ghost');
    const root = await app.http.get(api(`articles/records/${ids.a1}?expand=ghost`)).set('Authorization', 'token-root');
    expect(root.body.expand.ghost.id).toBe(ids.p4);
  });

  test('nested expansion is cut at the sixth level', async () => {
    const res = await app.http.get(api(`people/records/${ids.p7}?expand=boss.boss.boss.boss.boss.boss.boss.boss`));
    let node = res.body;
    let depth = 0;
    while (node.expand?.boss) {
      node = node.expand.boss;
      depth++;
    }
    expect(depth).toBe(6);
    expect(node.id).toBe(ids.p1);
  });

  test('one query per relation level, however many records', async () => {
    const queries: string[] = [];
    const listener = (q: { sql: string }) => queries.push(q.sql);
    app.database.db.on('query', listener);
    try {
      const res = await app.http.get(api('articles/records?expand=author.boss,reviewers,notes_via_article&skipTotal=1'));
      expect(res.status).toBe(200);
      expect(res.body.items).toHaveLength(3);
    } finally {
      app.database.db.removeListener('query', listener);
    }
    // page + author + author.boss + reviewers + notes_via_article
    expect(queries).toHaveLength(5);
  });

  test('fields picks, excludes, reaches into expand and makes excerpts', async () => {
    const picked = await app.http.get(api(`articles/records/${ids.a1}?fields=id,title`));
    expect(picked.body).toEqual({ id: ids.a1, title: 'First' });
    const nested = await app.http.get(api(`articles/records/${ids.a1}?expand=author&fields=title,expand.author.name`));
    expect(nested.body).toEqual({ title: 'First', expand: { author: { name: 'P1' } } });
    const excluded = await app.http.get(api(`articles/records/${ids.a1}?fields=-body,-reviewers`));
    expect(excluded.body).not.toHaveProperty('body');
    expect(excluded.body).toHaveProperty('title', 'First');
    const short = await app.http.get(api(`articles/records/${ids.a1}?fields=body:excerpt(11,true)`));
    expect(short.body).toEqual({ body: 'Hello world...' });
    const unknown = await app.http.get(api(`articles/records/${ids.a1}?fields=title,nope`));
    expect(unknown.body).toEqual({ title: 'First' });
  });

  test('fields on a list applies to each item and keeps the paging keys', async () => {
    const res = await app.http.get(api('articles/records?fields=title&perPage=2&sort=created'));
    expect(res.body).toEqual({ page: 1, perPage: 2, totalItems: 3, totalPages: 2, items: [{ title: 'First' }, { title: 'Second' }] });
  });

  test('expand and fields apply to create and update responses', async () => {
    const created = await app.http.post(api('notes/records?expand=article&fields=text,expand.article.title')).send({ text: 'n4', article: ids.a2 });
    expect(created.status).toBe(200);
    expect(created.body).toEqual({ text: 'n4', expand: { article: { title: 'Second' } } });
    const noteId = (await app.http.get(api('notes/records?filter=text="n4"&fields=id'))).body.items[0].id;
    const updated = await app.http.patch(api(`notes/records/${noteId}?expand=article.author&fields=expand.article.expand.author.name`)).send({ article: ids.a1 });
    expect(updated.body).toEqual({ expand: { article: { expand: { author: { name: 'P1' } } } } });
  });

  test('a malformed fields modifier is a 400', async () => {
    const res = await app.http.get(api(`articles/records/${ids.a1}?fields=body:excerpt(x)`));
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ status: 400, message: expect.any(String), data: {} });
  });
});
