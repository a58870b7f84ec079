import PocketBase, { ClientResponseError, type ListResult, type RecordModel } from 'pocketbase';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';
import { ALICE, BOB, expectClientError, fixedId, idsOf, sdkClient, sdkCollections } from './sdk-fixtures.js';

const RECORD_DATE = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}Z$/;
/** Starting a PGlite app takes seconds; under a loaded full run, more. */
const APP_START_TIMEOUT = 90_000;

describe.each(testEngines())('the pocketbase SDK against %s', (engine) => {
  let app: TestApp;
  /** guest, alice, bob and the superuser */
  let guest: PocketBase;
  let alice: PocketBase;
  let bob: PocketBase;
  let root: PocketBase;

  const u = { ann: fixedId('userann', 0), ben: fixedId('userben', 0), cat: fixedId('usercat', 0) };
  const a = {
    quoted: fixedId('art', 1),
    quotedLow: fixedId('art', 2),
    unquoted: fixedId('art', 3),
    loud: fixedId('art', 4),
    backslash: fixedId('art', 5),
    newline: fixedId('art', 6),
  };
  const c = { first: fixedId('com', 1), second: fixedId('com', 2), other: fixedId('com', 3) };
  const d = { alicePublic: fixedId('draft', 1), alicePrivate: fixedId('draft', 2), bobPrivate: fixedId('draft', 3), bobPublic: fixedId('draft', 4) };
  const itemIds = Array.from({ length: 25 }, (_, i) => fixedId('item', i + 1));

  beforeAll(async () => {
    app = await startTestApp(engine, { collections: sdkCollections() });
    guest = sdkClient(app);
    alice = sdkClient(app, 'token-alice');
    bob = sdkClient(app, 'token-bob');
    root = sdkClient(app, 'token-root');

    // sequential creates with ascending ids: (created, id) order equals creation order
    const users = root.collection('users');
    await users.create({ id: u.ann, name: 'Ann' });
    await users.create({ id: u.ben, name: 'Ben' });
    await users.create({ id: u.cat, name: 'Cat' });

    const articles = root.collection('articles');
    await articles.create({
      id: a.quoted,
      title: `it's "quoted" indeed`,
      views: 5,
      published: true,
      publishedAt: '2024-05-01 10:00:00.000Z',
      tags: ['a', 'b'],
      meta: { level: 1 },
      author: u.ann,
      editors: [u.ben, u.cat],
    });
    await articles.create({ id: a.quotedLow, title: `it's "quoted"`, views: 2, published: false, publishedAt: '2024-04-30 23:59:59.999Z', tags: ['b'], author: u.ben });
    await articles.create({ id: a.unquoted, title: 'its quoted', views: 10, published: true, publishedAt: '2024-05-15T14:00:00+02:00', tags: ['c'], author: u.ann });
    await articles.create({ id: a.loud, title: `IT'S "QUOTED" LOUD`, views: 4, published: true });
    await articles.create({ id: a.backslash, title: 'C:\\temp\\new', views: 0, published: false, publishedAt: '2024-06-01' });
    await articles.create({ id: a.newline, title: 'line1\nline2', views: 7, published: true });

    const comments = root.collection('comments');
    await comments.create({ id: c.first, text: 'first!', article: a.quoted });
    await comments.create({ id: c.second, text: 'second', article: a.quoted });
    await comments.create({ id: c.other, text: 'elsewhere', article: a.unquoted });

    for (let i = 0; i < itemIds.length; i++) {
      await root.collection('items').create({ id: itemIds[i], n: i + 1, parity: (i + 1) % 2 === 1 ? 'odd' : 'even' });
    }

    const drafts = root.collection('drafts');
    await drafts.create({ id: d.alicePublic, title: 'alice public', owner: ALICE, published: true });
    await drafts.create({ id: d.alicePrivate, title: 'alice private', owner: ALICE, published: false });
    await drafts.create({ id: d.bobPrivate, title: 'bob private', owner: BOB, published: false });
    await drafts.create({ id: d.bobPublic, title: 'bob public', owner: BOB, published: true });
  }, APP_START_TIMEOUT);

  afterAll(async () => {
    await app?.close();
  });

  /** The paging keys of a list result: everything but `items`, which must be an array. */
  function paging(list: ListResult<RecordModel>): Omit<ListResult<RecordModel>, 'items'> {
    const { items, ...rest } = list;
    expect(Array.isArray(items)).toBe(true);
    return rest;
  }

  /** Every URL the client requested (query included), in order. */
  function recordUrls(pb: PocketBase): URL[] {
    const urls: URL[] = [];
    pb.afterSend = (response, data) => {
      urls.push(new URL(response.url));
      return data;
    };
    return urls;
  }

  test("pb.health.check() reads the SDK's HealthCheckResponse", async () => {
    const health = await guest.health.check();
    expect(health).toEqual(expect.objectContaining({ code: 200, message: 'API is healthy.', data: {} }));
  });

  describe('getList', () => {
    test('pb.filter with JSON-quoted text and a number; the page matches exactly', async () => {
      const filter = guest.filter('title ~ {:q} && views > {:n}', { q: `it's "quoted"`, n: 3 });
      expect(filter).toBe(`title ~ "it's \\"quoted\\"" && views > 3`);
      const list = await guest.collection('articles').getList(1, 10, { filter, sort: '-views' });
      expect(paging(list)).toEqual({ page: 1, perPage: 10, totalItems: 2, totalPages: 1 });
      // ~ is case-insensitive: the LOUD one matches too; views 2 and "its quoted" do not
      expect(idsOf(list.items)).toEqual([a.quoted, a.loud]);
      expect(list.items[0]).toMatchObject({ title: `it's "quoted" indeed`, views: 5, collectionName: 'articles' });
    });

    test('items of a list are the same records getOne returns', async () => {
      const list = await guest.collection('articles').getList(1, 2, { sort: 'created' });
      const one = await guest.collection('articles').getOne(a.quoted);
      expect(list.items[0]).toEqual(one);
      expect(one).toEqual({
        collectionId: expect.any(String),
        collectionName: 'articles',
        id: a.quoted,
        title: `it's "quoted" indeed`,
        views: 5,
        published: true,
        publishedAt: '2024-05-01 10:00:00.000Z',
        contact: '',
        tags: ['a', 'b'],
        meta: { level: 1 },
        author: u.ann,
        editors: [u.ben, u.cat],
        created: expect.stringMatching(RECORD_DATE),
        updated: expect.stringMatching(RECORD_DATE),
      });
    });

    test('a boolean parameter, paging metadata and a second page', async () => {
      const filter = guest.filter('published = {:p}', { p: true });
      expect(filter).toBe('published = true');
      const page2 = await guest.collection('articles').getList(2, 2, { filter, sort: 'views' });
      // published by views: loud 4, quoted 5, newline 7, unquoted 10
      expect(paging(page2)).toEqual({ page: 2, perPage: 2, totalItems: 4, totalPages: 2 });
      expect(idsOf(page2.items)).toEqual([a.newline, a.unquoted]);
      const page1 = await guest.collection('articles').getList(1, 2, { filter, sort: 'views' });
      expect(idsOf(page1.items)).toEqual([a.loud, a.quoted]);
      const beyond = await guest.collection('articles').getList(3, 2, { filter, sort: 'views' });
      expect(beyond).toEqual({ page: 3, perPage: 2, totalItems: 4, totalPages: 2, items: [] });
    });

    test('skipTotal answers -1 totals with the same items', async () => {
      const filter = guest.filter('published = {:p}', { p: false });
      const list = await guest.collection('articles').getList(1, 10, { filter, sort: 'title', skipTotal: true });
      expect(paging(list)).toEqual({ page: 1, perPage: 10, totalItems: -1, totalPages: -1 });
      // "C:\temp\new" < "it's \"quoted\""
      expect(idsOf(list.items)).toEqual([a.backslash, a.quotedLow]);
    });

    test('a null parameter matches empty values', async () => {
      const filter = guest.filter('publishedAt = {:none}', { none: null });
      expect(filter).toBe('publishedAt = null');
      const list = await guest.collection('articles').getList(1, 30, { filter });
      expect(list.totalItems).toBe(2);
      expect(idsOf(list.items)).toEqual([a.loud, a.newline]);
      const notNull = await guest.collection('articles').getList(1, 30, { filter: guest.filter('publishedAt != {:none}', { none: null }) });
      expect(idsOf(notNull.items)).toEqual([a.quoted, a.quotedLow, a.unquoted, a.backslash]);
    });

    test('Date parameters compare as instants to the millisecond', async () => {
      const from = new Date('2024-05-01T10:00:00Z');
      const to = new Date('2024-06-01T00:00:00Z');
      const filter = guest.filter('publishedAt >= {:from} && publishedAt < {:to}', { from, to });
      expect(filter).toBe('publishedAt >= "2024-05-01 10:00:00.000Z" && publishedAt < "2024-06-01 00:00:00.000Z"');
      const may = await guest.collection('articles').getList(1, 30, { filter, sort: 'publishedAt' });
      // 2024-04-30 23:59:59.999 and 2024-06-01 00:00:00.000 fall outside
      expect(idsOf(may.items)).toEqual([a.quoted, a.unquoted]);
      expect(may.items[1].publishedAt).toBe('2024-05-15 12:00:00.000Z');

      const exact = await guest.collection('articles').getList(1, 30, {
        filter: guest.filter('publishedAt = {:at}', { at: new Date('2024-04-30T23:59:59.999Z') }),
      });
      expect(idsOf(exact.items)).toEqual([a.quotedLow]);
      const created = await guest.collection('articles').getList(1, 30, {
        filter: guest.filter('created > {:past} && created < {:future}', { past: new Date('2000-01-01T00:00:00Z'), future: new Date(Date.now() + 3_600_000) }),
        skipTotal: true,
      });
      expect(created.items).toHaveLength(6);
    });

    test('JSON escapes in pb.filter strings: backslashes and newlines', async () => {
      const backslash = guest.filter('title = {:t}', { t: 'C:\\temp\\new' });
      expect(backslash).toBe('title = "C:\\\\temp\\\\new"');
      expect(idsOf((await guest.collection('articles').getList(1, 30, { filter: backslash })).items)).toEqual([a.backslash]);
      const newline = guest.filter('title = {:t}', { t: 'line1\nline2' });
      expect(newline).toBe('title = "line1\\nline2"');
      expect(idsOf((await guest.collection('articles').getList(1, 30, { filter: newline })).items)).toEqual([a.newline]);
    });

    test('fields selects the keys of every item and keeps the paging keys', async () => {
      const list = await guest.collection('articles').getList(1, 30, { filter: 'views >= 5', sort: 'views', fields: 'id,title,views' });
      expect(list).toEqual({
        page: 1,
        perPage: 30,
        totalItems: 3,
        totalPages: 1,
        items: [
          { id: a.quoted, title: `it's "quoted" indeed`, views: 5 },
          { id: a.newline, title: 'line1\nline2', views: 7 },
          { id: a.unquoted, title: 'its quoted', views: 10 },
        ],
      });
    });

    test('expand on a list, and fields reaching into expand', async () => {
      const filter = guest.filter('author = {:u}', { u: u.ann });
      const list = await guest.collection('articles').getList(1, 30, { filter, expand: 'author,editors' });
      expect(idsOf(list.items)).toEqual([a.quoted, a.unquoted]);
      expect(list.items[0].expand?.author).toMatchObject({ id: u.ann, name: 'Ann', collectionName: 'users' });
      expect(idsOf(list.items[0].expand?.editors)).toEqual([u.ben, u.cat]);
      expect(list.items[1].expand?.author).toMatchObject({ id: u.ann, name: 'Ann' });

      const slim = await guest.collection('articles').getList(1, 30, { filter, expand: 'author', fields: 'id,expand.author.name' });
      expect(slim.items).toEqual([
        { id: a.quoted, expand: { author: { name: 'Ann' } } },
        { id: a.unquoted, expand: { author: { name: 'Ann' } } },
      ]);
    });

    test('a filter through a relation and a back-relation', async () => {
      const byAuthor = await guest.collection('articles').getList(1, 30, { filter: guest.filter('author.name = {:n}', { n: 'Ben' }) });
      expect(idsOf(byAuthor.items)).toEqual([a.quotedLow]);
      const commented = await guest.collection('articles').getList(1, 30, { filter: 'comments_via_article.text ?= "second"' });
      expect(idsOf(commented.items)).toEqual([a.quoted]);
    });
  });

  describe('getFullList and getFirstListItem', () => {
    test('batches of 10 over 25 records: three requests, every id in order', async () => {
      const pb = sdkClient(app);
      const urls = recordUrls(pb);
      const all = await pb.collection('items').getFullList({ sort: '-n', batch: 10 });
      expect(idsOf(all)).toEqual([...itemIds].reverse());
      expect(urls.map((url) => [url.searchParams.get('page'), url.searchParams.get('perPage'), url.searchParams.get('skipTotal')])).toEqual([
        ['1', '10', '1'],
        ['2', '10', '1'],
        ['3', '10', '1'],
      ]);
    });

    test('a filtered full list without sort comes in created order', async () => {
      const pb = sdkClient(app);
      const urls = recordUrls(pb);
      const odd = await pb.collection('items').getFullList({ filter: pb.filter('parity = {:p}', { p: 'odd' }), batch: 5 });
      expect(idsOf(odd)).toEqual(itemIds.filter((_, i) => i % 2 === 0));
      expect(odd.map((r) => r.n)).toEqual([1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25]);
      expect(urls).toHaveLength(3);
    });

    test('a record count that is a multiple of the batch ends on an empty page', async () => {
      const pb = sdkClient(app);
      const urls = recordUrls(pb);
      const twenty = await pb.collection('items').getFullList({ filter: 'n <= 20', sort: 'n', batch: 10 });
      expect(idsOf(twenty)).toEqual(itemIds.slice(0, 20));
      expect(urls.map((url) => url.searchParams.get('page'))).toEqual(['1', '2', '3']);
    });

    test('the default batch of 1000 fetches everything in one request', async () => {
      const pb = sdkClient(app);
      const urls = recordUrls(pb);
      const all = await pb.collection('items').getFullList({ sort: 'n' });
      expect(idsOf(all)).toEqual(itemIds);
      expect(urls).toHaveLength(1);
      expect(urls[0].searchParams.get('perPage')).toBe('1000');
    });

    test('getFirstListItem finds the first match, or rejects with 404', async () => {
      const first = await guest.collection('items').getFirstListItem(guest.filter('n > {:n}', { n: 20 }), { sort: 'n' });
      expect(first).toMatchObject({ id: itemIds[20], n: 21, parity: 'odd' });
      const last = await guest.collection('items').getFirstListItem('n > 20', { sort: '-n' });
      expect(last.id).toBe(itemIds[24]);
      const missing = await expectClientError(guest.collection('items').getFirstListItem('n > 100'), 404, { fromServer: false });
      expect(missing.status).toBe(404);
    });

    test('getFirstListItem with a bad filter is the server 400', async () => {
      const err = await expectClientError(guest.collection('items').getFirstListItem('n >'), 400);
      expect(err.response.message).toMatch(/^Invalid filter: /);
    });
  });

  describe('getOne', () => {
    test('expands a single relation to an object, a multiple one and a back-relation to arrays', async () => {
      const article = await guest.collection('articles').getOne(a.quoted, { expand: 'author,editors,comments_via_article' });
      expect(article.author).toBe(u.ann);
      expect(article.expand?.author).toEqual({
        collectionId: expect.any(String),
        collectionName: 'users',
        id: u.ann,
        name: 'Ann',
        created: expect.stringMatching(RECORD_DATE),
        updated: expect.stringMatching(RECORD_DATE),
      });
      expect(Array.isArray(article.expand?.editors)).toBe(true);
      expect(article.expand?.editors.map((e: RecordModel) => e.name)).toEqual(['Ben', 'Cat']);
      expect(Array.isArray(article.expand?.comments_via_article)).toBe(true);
      expect(idsOf(article.expand?.comments_via_article).sort()).toEqual([c.first, c.second]);
      expect(article.expand?.comments_via_article.map((x: RecordModel) => x.collectionName)).toEqual(['comments', 'comments']);
    });

    test('nested expand through a back-relation', async () => {
      const article = await guest.collection('articles').getOne(a.unquoted, { expand: 'comments_via_article.article.author' });
      const [comment] = article.expand?.comments_via_article;
      expect(comment.id).toBe(c.other);
      expect(comment.expand.article.id).toBe(a.unquoted);
      expect(comment.expand.article.expand.author.name).toBe('Ann');
    });

    test('fields picks keys, including inside expand, and excludes', async () => {
      const picked = await guest.collection('articles').getOne(a.quoted, { fields: 'id,title' });
      expect(picked).toEqual({ id: a.quoted, title: `it's "quoted" indeed` });
      const nested = await guest.collection('articles').getOne(a.quoted, { expand: 'author,editors', fields: 'title,expand.author.name,expand.editors.id' });
      expect(nested).toEqual({ title: `it's "quoted" indeed`, expand: { author: { name: 'Ann' }, editors: [{ id: u.ben }, { id: u.cat }] } });
      const excluded = await guest.collection('articles').getOne(a.quoted, { fields: '-meta,-tags,-editors,-created,-updated,-collectionId' });
      expect(Object.keys(excluded).sort()).toEqual(['author', 'collectionName', 'contact', 'id', 'published', 'publishedAt', 'title', 'views']);
    });

    test('a missing record and a missing collection are 404', async () => {
      const err = await expectClientError(guest.collection('articles').getOne('nosuchrecord000'), 404);
      expect(err.response.data).toEqual({});
      await expectClientError(guest.collection('nope').getOne(a.quoted), 404);
      await expectClientError(guest.collection('nope').getList(1, 10), 404);
    });
  });

  describe('create, update, delete', () => {
    test('create with arrays, objects, null, booleans and a Date; getOne reads it back', async () => {
      const meta = { nested: { list: [1, 'two', null, true, { deep: false }] }, empty: {}, none: null };
      const created = await guest.collection('articles').create({
        title: 'Created through the SDK',
        views: 3,
        published: true,
        publishedAt: new Date('2024-05-01T10:00:00Z'),
        contact: null,
        tags: ['a', 'c'],
        meta,
        author: u.ben,
        editors: [u.ann, u.cat],
      });
      expect(created).toEqual({
        collectionId: expect.any(String),
        collectionName: 'articles',
        id: expect.stringMatching(/^[a-z0-9]{15}$/),
        title: 'Created through the SDK',
        views: 3,
        published: true,
        publishedAt: '2024-05-01 10:00:00.000Z',
        contact: '',
        tags: ['a', 'c'],
        meta,
        author: u.ben,
        editors: [u.ann, u.cat],
        created: expect.stringMatching(RECORD_DATE),
        updated: expect.stringMatching(RECORD_DATE),
      });
      expect(await guest.collection('articles').getOne(created.id)).toEqual(created);
    });

    test('create with a client-chosen id, and expand/fields on the create response', async () => {
      const id = 'clientchosen001';
      const created = await guest.collection('articles').create({ id, title: 'Mine', author: u.cat }, { expand: 'author', fields: 'id,title,expand.author.name' });
      expect(created).toEqual({ id, title: 'Mine', expand: { author: { name: 'Cat' } } });
      expect((await guest.collection('articles').getOne(id)).author).toBe(u.cat);
    });

    test('update changes only the fields sent; arrays, objects, null and false are written as sent', async () => {
      const created = await guest.collection('articles').create({
        title: 'Before',
        views: 3,
        published: true,
        publishedAt: '2024-05-01 10:00:00.000Z',
        tags: ['a', 'b'],
        meta: { keep: true },
        author: u.ann,
        editors: [u.ann, u.ben],
      });
      const updated = await guest.collection('articles').update(created.id, {
        title: 'After',
        published: false,
        meta: null,
        tags: [],
        editors: [u.cat],
        'views+': 4,
      });
      expect(updated).toEqual({
        ...created,
        title: 'After',
        published: false,
        meta: null,
        tags: [],
        editors: [u.cat],
        views: 7,
        updated: expect.stringMatching(RECORD_DATE),
      });
      expect(updated.updated >= created.updated).toBe(true);
      expect(await guest.collection('articles').getOne(created.id)).toEqual(updated);

      const again = await guest.collection('articles').update(created.id, { meta: { list: [null, 1], flag: false }, publishedAt: null, author: '' });
      expect(again).toMatchObject({ meta: { list: [null, 1], flag: false }, publishedAt: null, author: '', title: 'After', views: 7 });
    });

    test('update with expand and fields on the response', async () => {
      const created = await guest.collection('articles').create({ title: 'To relate' });
      const updated = await guest.collection('articles').update(created.id, { author: u.ben }, { expand: 'author', fields: 'id,author,expand.author.name' });
      expect(updated).toEqual({ id: created.id, author: u.ben, expand: { author: { name: 'Ben' } } });
    });

    test('delete resolves true; the record is gone afterwards', async () => {
      const created = await guest.collection('articles').create({ title: 'Doomed' });
      await expect(guest.collection('articles').delete(created.id)).resolves.toBe(true);
      await expectClientError(guest.collection('articles').getOne(created.id), 404);
      await expectClientError(guest.collection('articles').delete(created.id), 404);
      await expectClientError(guest.collection('articles').update(created.id, { title: 'Zombie' }), 404);
    });
  });

  describe('rules through the SDK', () => {
    test('the list rule hides records from getList, getFullList and the totals', async () => {
      expect(idsOf(await guest.collection('drafts').getFullList())).toEqual([d.alicePublic, d.bobPublic]);
      expect(idsOf(await alice.collection('drafts').getFullList())).toEqual([d.alicePublic, d.alicePrivate, d.bobPublic]);
      expect(idsOf(await bob.collection('drafts').getFullList())).toEqual([d.alicePublic, d.bobPrivate, d.bobPublic]);
      const guestPage = await guest.collection('drafts').getList(1, 1);
      expect(guestPage).toMatchObject({ page: 1, perPage: 1, totalItems: 2, totalPages: 2 });
      // a filter cannot widen what the rule allows
      const sneaky = await guest.collection('drafts').getList(1, 30, { filter: 'published = false' });
      expect(sneaky).toEqual({ page: 1, perPage: 30, totalItems: 0, totalPages: 0, items: [] });
    });

    test('the view rule: 404 for others, the record for its owner', async () => {
      await expectClientError(guest.collection('drafts').getOne(d.alicePrivate), 404);
      await expectClientError(bob.collection('drafts').getOne(d.alicePrivate), 404);
      expect((await alice.collection('drafts').getOne(d.alicePrivate)).title).toBe('alice private');
    });

    test('a superuser bypasses the rules', async () => {
      expect(idsOf(await root.collection('drafts').getFullList({ filter: 'title ~ "public" || title ~ "private"' }))).toEqual([
        d.alicePublic,
        d.alicePrivate,
        d.bobPrivate,
        d.bobPublic,
      ]);
      expect((await root.collection('drafts').getOne(d.bobPrivate)).owner).toBe(BOB);
    });

    test('create rule @request.auth.id != "": a guest gets 403, a signed-in user creates', async () => {
      const err = await expectClientError(guest.collection('drafts').create({ title: 'anonymous', owner: '', published: true }), 403);
      expect(err.response.data).toEqual({});
      expect(await root.collection('drafts').getFullList({ filter: 'title = "anonymous"' })).toEqual([]);
      const created = await alice.collection('drafts').create({ title: 'signed in', owner: ALICE });
      expect(created).toMatchObject({ title: 'signed in', owner: ALICE, published: false });
      await root.collection('drafts').delete(created.id);
    });

    test('update rule owner = @request.auth.id: 404 for another user, 200 for the owner and the superuser', async () => {
      const draft = await root.collection('drafts').create({ title: 'v1', owner: ALICE, published: true });
      const err = await expectClientError(bob.collection('drafts').update(draft.id, { title: 'hijacked' }), 404);
      expect(err.response.data).toEqual({});
      await expectClientError(guest.collection('drafts').update(draft.id, { title: 'hijacked' }), 404);
      expect((await root.collection('drafts').getOne(draft.id)).title).toBe('v1');
      expect((await alice.collection('drafts').update(draft.id, { title: 'v2' })).title).toBe('v2');
      expect((await root.collection('drafts').update(draft.id, { title: 'v3' })).title).toBe('v3');
      // delete follows the same rule
      await expectClientError(bob.collection('drafts').delete(draft.id), 404);
      await expect(alice.collection('drafts').delete(draft.id)).resolves.toBe(true);
    });

    test('null rules: 403 for everyone but the superuser', async () => {
      await expectClientError(alice.collection('locked').getList(1, 10), 403);
      await expectClientError(guest.collection('locked').create({ note: 'x' }), 403);
      await expectClientError(alice.collection('locked').create({ note: 'x' }), 403);
      const created = await root.collection('locked').create({ note: 'root only' });
      await expectClientError(alice.collection('locked').getOne(created.id), 403);
      expect(idsOf(await root.collection('locked').getFullList())).toEqual([created.id]);
      await expect(root.collection('locked').delete(created.id)).resolves.toBe(true);
    });
  });

  describe('ClientResponseError', () => {
    test('400 for a bad filter carries the message', async () => {
      const unknown = await expectClientError(guest.collection('articles').getList(1, 10, { filter: 'nope = 1' }), 400);
      expect(unknown).toBeInstanceOf(ClientResponseError);
      expect(unknown.response.message).toBe('Invalid filter: unknown field "nope" at position 0.');
      expect(unknown.message).toBe(unknown.response.message);
      expect(unknown.response.data).toEqual({});
      const unterminated = await expectClientError(guest.collection('articles').getList(1, 10, { filter: 'title = "abc' }), 400);
      expect(unterminated.response.message).toBe('Invalid filter: unterminated string at position 8.');
      const badNumber = await expectClientError(guest.collection('articles').getFullList({ filter: guest.filter('views > {:n}', { n: 'abc' }) }), 400);
      expect(badNumber.response.message).toMatch(/^Invalid filter: .*"abc".*views/);
    });

    test('400 for a bad sort', async () => {
      const err = await expectClientError(guest.collection('articles').getList(1, 10, { sort: '-nope' }), 400);
      expect(err.response.message).toBe('Invalid sort: unknown field "nope".');
      const multi = await expectClientError(guest.collection('articles').getList(1, 10, { sort: 'tags' }), 400);
      expect(multi.response.message).toBe('Invalid sort: "tags" is multi-valued.');
    });

    test('422 names every invalid field with its validation code', async () => {
      const err = await expectClientError(
        guest.collection('articles').create({
          views: 2.5,
          contact: 'not-an-email',
          tags: ['z'],
          publishedAt: 'someday',
        }),
        422,
      );
      expect(err.response.data).toEqual({
        title: { code: 'validation_required', message: expect.any(String) },
        views: { code: 'validation_not_integer', message: expect.any(String) },
        contact: { code: 'validation_invalid_email', message: expect.any(String) },
        tags: { code: 'validation_invalid_value', message: expect.any(String) },
        publishedAt: { code: 'validation_invalid_date', message: expect.any(String) },
      });
      const missing = await expectClientError(guest.collection('articles').create({ title: 'x', author: 'missingmissing1', editors: [u.ann, 'missingmissing2'] }), 422);
      expect(missing.response.data).toEqual({
        author: { code: 'validation_missing_rel_records', message: expect.any(String) },
        editors: { code: 'validation_missing_rel_records', message: expect.any(String) },
      });
      const negative = await expectClientError(guest.collection('articles').create({ title: 'x', views: -1 }), 422);
      expect(negative.response.data.views.code).toBe('validation_min_number');
      const tooLong = await expectClientError(guest.collection('articles').create({ title: 'x'.repeat(201) }), 422);
      expect(tooLong.response.data.title.code).toBe('validation_max_text_constraint');
      expect(await guest.collection('articles').getFullList({ filter: 'views < 0 || title ~ "xxxxxxxxxx"' })).toEqual([]);
    });

    test('422 for a duplicate or malformed client id', async () => {
      const dup = await expectClientError(guest.collection('articles').create({ id: a.quoted, title: 'copy' }), 422);
      expect(dup.response.data.id.code).toBe('validation_not_unique');
      const bad = await expectClientError(guest.collection('articles').create({ id: 'NOT-VALID', title: 'bad id' }), 422);
      expect(bad.response.data.id.code).toBe('validation_invalid_format');
      expect((await guest.collection('articles').getOne(a.quoted)).title).toBe(`it's "quoted" indeed`);
    });

    test('422 on update leaves the record unchanged', async () => {
      const err = await expectClientError(guest.collection('articles').update(a.loud, { title: '', views: 1 }), 422);
      expect(err.response.data.title.code).toBe('validation_required');
      expect(await guest.collection('articles').getOne(a.loud)).toMatchObject({ title: `IT'S "QUOTED" LOUD`, views: 4 });
    });

    test('401 when auth() throws; a guest without a token is not asked', async () => {
      const failing = await startTestApp(engine, {
        collections: sdkCollections(),
        auth: () => {
          throw new Error('token store unavailable');
        },
      });
      try {
        const signedIn = sdkClient(failing, 'token-alice');
        const err = await expectClientError(signedIn.collection('articles').getList(1, 10), 401);
        expect(err.response.data).toEqual({});
        await expectClientError(signedIn.collection('articles').create({ title: 'x' }), 401);
        const anonymous = sdkClient(failing);
        expect(await anonymous.collection('articles').getList(1, 10)).toEqual({ page: 1, perPage: 10, totalItems: 0, totalPages: 0, items: [] });
      } finally {
        await failing.close();
      }
    }, APP_START_TIMEOUT);

    test('413 for a body over maxBodySize; nothing is stored', async () => {
      const small = await startTestApp(engine, { collections: sdkCollections(), limits: { maxBodySize: 1024, maxPerPage: 10 } });
      try {
        const pb = sdkClient(small);
        const err = await expectClientError(pb.collection('articles').create({ title: 'big', meta: { blob: 'y'.repeat(4000) } }), 413);
        expect(err.response.data).toEqual({});
        expect(await pb.collection('articles').getFullList()).toEqual([]);
        const fits = await pb.collection('articles').create({ title: 'small', meta: { blob: 'y'.repeat(500) } });
        expect(fits.meta.blob).toHaveLength(500);
        await expectClientError(pb.collection('articles').update(fits.id, { meta: { blob: 'z'.repeat(4000) } }), 413);
        expect((await pb.collection('articles').getOne(fits.id)).meta.blob).toBe('y'.repeat(500));

        // maxPerPage 10: the echoed perPage is the capped one, so getFullList keeps paging
        for (let i = 1; i <= 23; i++) await pb.collection('items').create({ id: fixedId('capped', i), n: i });
        const capped = await pb.collection('items').getList(1, 50, { sort: 'n' });
        expect(paging(capped)).toEqual({ page: 1, perPage: 10, totalItems: 23, totalPages: 3 });
        expect(capped.items).toHaveLength(10);
        const urls = recordUrls(pb);
        const all = await pb.collection('items').getFullList({ sort: 'n', batch: 50 });
        expect(idsOf(all)).toEqual(Array.from({ length: 23 }, (_, i) => fixedId('capped', i + 1)));
        expect(urls).toHaveLength(3);
      } finally {
        await small.close();
      }
    }, APP_START_TIMEOUT);
  });

  describe('more of what the SDK does', () => {
    test('parallel requests (auto-cancellation off): concurrent increments lose nothing', async () => {
      const counter = await guest.collection('articles').create({ title: 'counter', views: 0 });
      const results = await Promise.all(Array.from({ length: 10 }, () => guest.collection('articles').update(counter.id, { 'views+': 1 })));
      expect(results.map((r) => r.views).sort((x, y) => x - y)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      expect((await guest.collection('articles').getOne(counter.id)).views).toBe(10);
      const reads = await Promise.all([a.quoted, a.loud, a.newline].map((id) => guest.collection('articles').getOne(id, { fields: 'id' })));
      expect(reads).toEqual([{ id: a.quoted }, { id: a.loud }, { id: a.newline }]);
    });

    test('sort by a relation path, and the collection addressed by its id', async () => {
      const byAuthor = await guest.collection('articles').getList(1, 30, {
        // the seeded articles only: other tests create more
        filter: guest.filter('author != {:none} && id >= {:lo} && id <= {:hi}', { none: '', lo: a.quoted, hi: a.newline }),
        sort: '-author.name,views',
        fields: 'id',
      });
      // Ben, then Ann's articles by views (5, 10)
      expect(byAuthor.items).toEqual([{ id: a.quotedLow }, { id: a.quoted }, { id: a.unquoted }]);
      const one = await guest.collection('articles').getOne(a.quoted);
      const viaId = await guest.collection(one.collectionId).getOne(a.quoted);
      expect(viaId).toEqual(one);
    });

    test('a body holding a Blob goes multipart: the file is stored, arrays, objects, null and Dates travel in @jsonPayload, and an update with a new Blob replaces the file', async () => {
      const created = await guest.collection('uploads').create({
        doc: new Blob(['hello'], { type: 'text/plain' }),
        tags: ['a', 'c'],
        flag: false,
        meta: { nested: [1, 'two'] },
        note: null,
        day: new Date('2024-05-01T10:00:00.000Z'),
      });
      expect(created.doc).toMatch(/^blob_[a-z0-9]{10}\.txt$/);
      expect(created).toMatchObject({ tags: ['a', 'c'], flag: false, meta: { nested: [1, 'two'] }, note: '', day: '2024-05-01 10:00:00.000Z' });
      const firstUrl = guest.files.getURL(created, created.doc);
      expect(await (await fetch(firstUrl)).text()).toBe('hello');

      const updated = await guest.collection('uploads').update(created.id, { doc: new Blob(['bye']), tags: ['b'] });
      expect(updated.doc).toMatch(/^blob_[a-z0-9]{10}\.txt$/);
      expect(updated.doc).not.toBe(created.doc);
      expect(updated.tags).toEqual(['b']);
      expect(await (await fetch(guest.files.getURL(updated, updated.doc))).text()).toBe('bye');
      expect((await fetch(firstUrl)).status).toBe(404);
    });
  });
});
