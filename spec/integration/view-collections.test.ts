import { createRecordsRouter, SchemaError, type CollectionDefinition, type RecordsRouter } from '../../lib/index.js';
import { listFilesUnder } from '../support/file-fixtures.js';
import { createMemoryLogger, startTestApp, TEST_FILE_TOKEN_SECRET, TEST_IDENTITIES, type TestApp } from '../support/test-app.js';
import { openTestDatabase, testEngines, type Engine, type TestDatabase } from '../support/test-database.js';
import { openSse, type SseConnection } from '../support/sse-reader.js';

/**
 * View collections (docs/collections.md, "View collections"): a SELECT of the host's served as a
 * read-only collection, its fields inferred from the query's columns, its own list and view rules.
 * The attacks: a view's rules cannot be sidestepped through expand, `@collection` or the
 * back-relations its relation columns make, and a write to a view changes nothing.
 */
const OPEN = { list: '', view: '', create: '', update: '', delete: '' };
const OWNER_ONLY = 'owner = @request.auth.id';
const ALICE = 'aliceaaaaaaaaaa';
const BOB = 'bobbbbbbbbbbbbb';

function collections(): CollectionDefinition[] {
  return [
    { name: 'users', fields: [{ name: 'name', type: 'text' }], rules: OPEN },
    // superusers only: its rows reach others through my_notes alone
    {
      name: 'notes',
      fields: [
        { name: 'owner', type: 'relation', collection: 'users' },
        { name: 'text', type: 'text' },
        { name: 'pin', type: 'text', hidden: true },
        { name: 'doc', type: 'file', protected: true },
      ],
    },
    {
      name: 'posts',
      fields: [
        { name: 'title', type: 'text' },
        { name: 'author', type: 'relation', collection: 'users' },
        { name: 'tags', type: 'select', values: ['a', 'b'], maxSelect: 2 },
      ],
      rules: OPEN,
    },
    { name: 'comments', fields: [{ name: 'post', type: 'relation', collection: 'posts' }, { name: 'text', type: 'text' }], rules: OPEN },
    // a base collection whose relation points at a view
    { name: 'pins', fields: [{ name: 'label', type: 'text' }, { name: 'note', type: 'relation', collection: 'my_notes' }], rules: OPEN },
    // a rule that reads a view through @collection (the host's rule: it sees every row of the view)
    { name: 'boards', fields: [{ name: 'title', type: 'text' }], rules: { list: '@collection.my_notes.text ?= title', view: '' } },
    {
      name: 'my_notes',
      type: 'view',
      viewQuery: 'SELECT n.id, n.owner, n.text, n.pin, n.doc, n.created FROM notes n',
      rules: { list: OWNER_ONLY, view: OWNER_ONLY, create: null, update: null, delete: null },
    },
    {
      name: 'post_stats',
      type: 'view',
      viewQuery: `SELECT p.id, p.title AS heading, p.author, p.tags, count(c.id) AS comments, max(c.created) AS last_comment
        FROM posts p LEFT JOIN comments c ON c.post = p.id GROUP BY p.id`,
      rules: { list: '', view: '' },
    },
    // a view of a view: the relation it copies stays a relation
    { name: 'post_writers', type: 'view', viewQuery: 'SELECT s.id, s.author AS writer, s.comments FROM post_stats s', rules: { list: '', view: '' } },
    // PocketBase's own advice for a query without ids, SQL types of every family, a jsonb `?`, a trailing comment
    {
      name: 'counters',
      type: 'view',
      viewQuery: `SELECT (ROW_NUMBER() OVER (ORDER BY p.title)) AS id, p.title, 1.5::numeric AS ratio, p.title = 'first' AS is_first,
        DATE '2024-05-01' AS day, TIMESTAMP '2024-05-01 10:00:00' AS at, jsonb_build_object('k', p.title) AS meta,
        interval '1 day' AS span, p.tags ? 'a' AS tagged, NULL::text AS nothing
        FROM posts p -- every post, numbered`,
      rules: { list: '', view: '' },
    },
    // no rules: superusers only; a trailing semicolon
    { name: 'closed', type: 'view', viewQuery: 'SELECT p.id, p.title FROM posts p;' },
    // columns computed from the hidden notes.pin, every way a query can read it: open to guests
    {
      name: 'note_hints',
      type: 'view',
      viewQuery: `WITH pins AS (SELECT x.id, x.pin FROM notes x)
        SELECT n.id, n.text, lower(n.pin) AS lowered, COALESCE(n.pin, '') AS coalesced, row_to_json(n) ->> 'pin' AS whole_row,
          (SELECT max(x.pin) FROM notes x) AS top_pin, (SELECT p.pin FROM pins p WHERE p.id = n.id) || '' AS from_cte, length(n.text) AS text_length
        FROM notes n`,
      rules: { list: '', view: '' },
    },
    // a view of that view: a copy of its hidden column, and an expression over it
    { name: 'hint_echo', type: 'view', viewQuery: 'SELECT h.id, h.lowered AS copied, upper(h.lowered) AS shouted FROM note_hints h', rules: { list: '', view: '' } },
  ];
}

describe.each(testEngines())('view collections on %s', (engine) => {
  let app: TestApp;
  const open: SseConnection[] = [];
  const api = (path: string) => `/backend/api/collections/${path}`;
  const ids: Record<string, string> = {};
  let docName = '';

  async function create(collection: string, body: Record<string, unknown>): Promise<string> {
    const res = await app.http.post(api(`${collection}/records`)).set('Authorization', 'token-root').send(body);
    expect(res.status).toBe(200);
    return res.body.id as string;
  }

  async function get(path: string, who?: string) {
    const req = app.http.get(api(path));
    if (who) req.set('Authorization', `token-${who}`);
    return req;
  }

  /** The ids of a list, in order, after checking it answered 200. */
  async function listIds(path: string, who?: string): Promise<string[]> {
    const res = await get(path, who);
    expect(res.status).toBe(200);
    return (res.body.items as { id: string }[]).map((item) => item.id);
  }

  beforeAll(async () => {
    app = await startTestApp(engine, { collections: collections(), realtime: { heartbeatMs: 300 }, openapi: true });
    await create('users', { id: ALICE, name: 'Alice' });
    await create('users', { id: BOB, name: 'Bob' });
    const note = await app.http
      .post(api('notes/records'))
      .set('Authorization', 'token-root')
      .field('owner', ALICE)
      .field('text', 'secret-of-alice')
      .field('pin', '1111')
      .attach('doc', Buffer.from('alice only'), 'secret.txt');
    expect(note.status).toBe(200);
    ids.noteA = note.body.id as string;
    docName = note.body.doc as string;
    ids.noteB = await create('notes', { owner: BOB, text: 'bob-note', pin: '2222' });
    ids.p1 = await create('posts', { title: 'first', author: ALICE, tags: ['a'] });
    ids.p2 = await create('posts', { title: 'second', author: BOB, tags: ['b'] });
    ids.p3 = await create('posts', { title: 'third', tags: [] });
    await create('comments', { post: ids.p1, text: 'c1' });
    await create('comments', { post: ids.p1, text: 'c2' });
    await create('comments', { post: ids.p2, text: 'c3' });
    ids.pinA = await create('pins', { label: 'A', note: ids.noteA });
    ids.pinB = await create('pins', { label: 'B', note: ids.noteB });
    ids.boardSecret = await create('boards', { title: 'secret-of-alice' });
    ids.boardOther = await create('boards', { title: 'nobody wrote this' });
  });
  afterEach(() => {
    for (const c of open.splice(0)) c.close();
  });
  afterAll(async () => {
    await app?.close();
  });

  test('a copied column keeps its field (relation, select, options), an expression takes its SQL type', async () => {
    const one = await get(`post_stats/records/${ids.p1}`);
    expect(one.status).toBe(200);
    expect(one.body).toEqual({
      collectionId: expect.stringMatching(/^pbc_/),
      collectionName: 'post_stats',
      id: ids.p1,
      heading: 'first',
      author: ALICE,
      tags: ['a'],
      comments: 2,
      last_comment: expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z$/),
    });
    // a LEFT JOIN's missing row reads as each field's empty value
    expect((await get(`post_stats/records/${ids.p3}`)).body).toMatchObject({ author: '', tags: [], comments: 0, last_comment: null });
    const expanded = await get(`post_stats/records/${ids.p1}?expand=author`);
    expect(expanded.body.expand.author).toMatchObject({ collectionName: 'users', id: ALICE, name: 'Alice' });

    const counters = await get('counters/records?sort=title');
    expect(counters.status).toBe(200);
    const first = counters.body.items[0];
    expect(first).toEqual({
      collectionId: expect.stringMatching(/^pbc_/),
      collectionName: 'counters',
      id: '1',
      title: 'first',
      ratio: 1.5,
      is_first: true,
      day: '2024-05-01 00:00:00.000Z',
      at: '2024-05-01 10:00:00.000Z',
      meta: { k: 'first' },
      span: '1 day',
      tagged: true,
      nothing: '',
    });
    // a view's id is whatever its query selects: "1" is readable by id
    expect((await get('counters/records/1')).body).toEqual(first);
    expect((await get('counters/records/999')).status).toBe(404);
  });

  test('list and view take filter, sort, fields and expand; a view of a view keeps the copied relation', async () => {
    const page = await get('post_stats/records?filter=comments>0&sort=-comments&fields=id,comments');
    expect(page.status).toBe(200);
    expect(page.body.items).toEqual([
      { id: ids.p1, comments: 2 },
      { id: ids.p2, comments: 1 },
    ]);
    expect(await listIds(`post_stats/records?filter=${encodeURIComponent("author.name = 'Alice' && tags ?= 'a' && last_comment != null")}`)).toEqual([ids.p1]);
    expect(await listIds('counters/records?filter=tagged=true%26%26ratio>1%26%26day>="2024-05-01"')).toEqual(['1']);
    const writers = await get('post_writers/records?expand=writer&sort=-comments&filter=comments>=1');
    expect(writers.status).toBe(200);
    expect(writers.body.items.map((w: { id: string; writer: string; expand: { writer: { name: string } } }) => [w.id, w.writer, w.expand.writer.name])).toEqual([
      [ids.p1, ALICE, 'Alice'],
      [ids.p2, BOB, 'Bob'],
    ]);
    // without `sort`, a view without `created` is listed by id
    expect(await listIds('post_stats/records')).toEqual([ids.p1, ids.p2, ids.p3].sort());
    expect((await get('post_stats/records?sort=created')).status).toBe(400);
  });

  test('a create, update or delete answers 400 and writes nothing, over HTTP, in a batch and through the server API', async () => {
    const before = { posts: (await get('posts/records', 'root')).body.totalItems, files: listFilesUnder(app.dataDir), row: (await get(`post_stats/records/${ids.p1}`)).body };
    const refused = (res: { status: number; body: unknown }, view = 'post_stats') => {
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ status: 400, message: `"${view}" is a view collection: its records are read-only.`, data: {} });
    };
    refused(await app.http.post(api('post_stats/records')).set('Authorization', 'token-root').send({ id: ids.p1, heading: 'x' }));
    refused(await app.http.post(api('my_notes/records')).set('Authorization', 'token-root').field('text', 'x').attach('doc', Buffer.from('bytes'), 'a.txt'), 'my_notes');
    refused(await app.http.patch(api(`my_notes/records/${ids.noteA}`)).set('Authorization', 'token-root').field('text', 'x').attach('doc', Buffer.from('bytes'), 'b.txt'), 'my_notes');
    refused(await app.http.patch(api(`post_stats/records/${ids.p1}`)).set('Authorization', 'token-root').send({ heading: 'x' }));
    refused(await app.http.delete(api(`post_stats/records/${ids.p1}`)).set('Authorization', 'token-root'));
    refused(await app.http.delete(api('post_stats/records?filter=comments>=0')).set('Authorization', 'token-root'));
    refused(await app.http.delete(api(`post_stats/records/${ids.p1}`)));
    const batch = await app.http
      .post('/backend/api/batch')
      .set('Authorization', 'token-root')
      .send({
        requests: [
          { method: 'POST', url: '/api/collections/posts/records', body: { title: 'batched' } },
          { method: 'PUT', url: '/api/collections/post_stats/records', body: { id: ids.p1, heading: 'x' } },
        ],
      });
    expect(batch.status).toBe(400);
    expect(batch.body.data.requests['1'].response).toEqual({ status: 400, message: '"post_stats" is a view collection: its records are read-only.', data: {} });
    const views = app.router.api.collection('post_stats');
    const code = { status: 400, code: 'view_collection_read_only' };
    await expect(views.create({ heading: 'x' }, { as: 'superuser' })).rejects.toMatchObject(code);
    await expect(views.update(ids.p1, { heading: 'x' }, { as: 'superuser' })).rejects.toMatchObject(code);
    await expect(views.delete(ids.p1, { as: 'superuser' })).rejects.toMatchObject(code);
    expect((await get('posts/records', 'root')).body.totalItems).toBe(before.posts);
    expect(listFilesUnder(app.dataDir)).toEqual(before.files);
    expect((await get(`post_stats/records/${ids.p1}`)).body).toEqual(before.row);
  });

  test("the view's own rules decide its list and view; a null rule is superusers only", async () => {
    expect(await listIds('my_notes/records', 'alice')).toEqual([ids.noteA]);
    expect(await listIds('my_notes/records', 'bob')).toEqual([ids.noteB]);
    expect(await listIds('my_notes/records')).toEqual([]);
    expect((await listIds('my_notes/records', 'root')).sort()).toEqual([ids.noteA, ids.noteB].sort());
    expect((await get(`my_notes/records/${ids.noteA}`, 'bob')).status).toBe(404);
    expect((await get(`my_notes/records/${ids.noteA}`, 'alice')).body).toMatchObject({ id: ids.noteA, text: 'secret-of-alice', created: expect.any(String) });
    expect((await get('closed/records', 'bob')).status).toBe(403);
    expect((await get(`closed/records/${ids.p1}`, 'bob')).status).toBe(403);
    expect((await get('closed/records', 'root')).body.totalItems).toBe(3);
  });

  test('attack: a hidden field stays hidden in a view that copies it', async () => {
    const alice = await get(`my_notes/records/${ids.noteA}`, 'alice');
    expect(alice.body).not.toHaveProperty('pin');
    expect((await get('my_notes/records?filter=pin="1111"', 'alice')).status).toBe(400);
    expect((await get('my_notes/records?sort=pin', 'alice')).status).toBe(400);
    expect((await get(`my_notes/records/${ids.noteA}`, 'root')).body.pin).toBe('1111');
  });

  test('attack: a column computed from a hidden field is hidden too, in the view and in a view of it (issue 41, finding 7)', async () => {
    const computed = ['lowered', 'coalesced', 'whole_row', 'top_pin', 'from_cte', 'text_length'];
    const guest = await get(`note_hints/records/${ids.noteA}`);
    expect(guest.status).toBe(200);
    expect(guest.body).toEqual({ collectionId: expect.stringMatching(/^pbc_/), collectionName: 'note_hints', id: ids.noteA, text: 'secret-of-alice' });
    for (const name of computed) {
      expect((await get(`note_hints/records?filter=${name}="1111"`)).status).toBe(400);
      expect((await get(`note_hints/records?sort=${name}`, 'alice')).status).toBe(400);
    }
    expect((await get(`hint_echo/records/${ids.noteA}`, 'alice')).body).toEqual({ collectionId: expect.stringMatching(/^pbc_/), collectionName: 'hint_echo', id: ids.noteA });
    expect((await get('hint_echo/records?filter=shouted="1111"')).status).toBe(400);
    const root = await get(`note_hints/records/${ids.noteA}`, 'root');
    expect(root.body).toMatchObject({ lowered: '1111', coalesced: '1111', whole_row: '1111', top_pin: '2222', from_cte: '1111', text_length: 15 });
    expect((await get(`hint_echo/records/${ids.noteA}`, 'root')).body).toMatchObject({ copied: '1111', shouted: '1111' });
  });

  test("attack: expand into a view goes through the view's view rule", async () => {
    const expandedBy = async (who: string) => {
      const res = await get('pins/records?expand=note&sort=label', who);
      expect(res.status).toBe(200);
      return res.body.items.map((pin: { label: string; expand?: { note?: { id: string } } }) => [pin.label, pin.expand?.note?.id ?? null]);
    };
    expect(await expandedBy('bob')).toEqual([
      ['A', null],
      ['B', ids.noteB],
    ]);
    expect(await expandedBy('alice')).toEqual([
      ['A', ids.noteA],
      ['B', null],
    ]);
    expect(await expandedBy('root')).toEqual([
      ['A', ids.noteA],
      ['B', ids.noteB],
    ]);
  });

  test("attack: the back-relations of a view's relation columns apply its view rule, in expand, filter and sort", async () => {
    const res = await get(`users/records?expand=my_notes_via_owner&sort=name`, 'bob');
    expect(res.status).toBe(200);
    expect(res.body.items.map((u: { id: string; expand?: { my_notes_via_owner?: { id: string }[] } }) => [u.id, (u.expand?.my_notes_via_owner ?? []).map((n) => n.id)])).toEqual([
      [ALICE, []],
      [BOB, [ids.noteB]],
    ]);
    const probe = `users/records?filter=${encodeURIComponent("my_notes_via_owner.text ~ 'secret-of-alice'")}`;
    expect(await listIds(probe, 'bob')).toEqual([]);
    expect(await listIds(probe, 'root')).toEqual([ALICE]);
    const hop = `pins/records?filter=${encodeURIComponent("note.text ~ 'secret-of-alice'")}`;
    expect(await listIds(hop, 'bob')).toEqual([]);
    expect(await listIds(hop, 'root')).toEqual([ids.pinA]);
    // a sort through the relation orders by what the caller may see: alice's note reads as empty for bob
    expect(await listIds('pins/records?sort=-note.text,label', 'root')).toEqual([ids.pinA, ids.pinB]);
    expect(await listIds('pins/records?sort=-note.text,label', 'bob')).toEqual([ids.pinB, ids.pinA]);
  });

  test('attack: @collection.<view> is refused in a client filter; a rule (the host\'s text) reads the view', async () => {
    const res = await get(`posts/records?filter=${encodeURIComponent("@collection.my_notes.text ?= 'secret-of-alice'")}`, 'bob');
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/@collection is only allowed in rules/);
    expect(await listIds('boards/records', 'bob')).toEqual([ids.boardSecret]);
  });

  test('attack: a protected file copied into a view is refused to those its view rule refuses', async () => {
    const url = `/backend/api/files/my_notes/${ids.noteA}/${docName}`;
    expect((await app.http.get(url)).status).toBe(401);
    expect((await app.http.get(url).set('Authorization', 'token-bob')).status).toBe(404);
    // the source collection keeps its own rules (superusers only)
    expect((await app.http.get(`/backend/api/files/notes/${ids.noteA}/${docName}`).set('Authorization', 'token-alice')).status).toBe(404);
  });

  test('the served OpenAPI document shows a view with its inferred fields and its reads only', async () => {
    const res = await app.http.get('/backend/api/openapi.json');
    expect(res.status).toBe(200);
    const { paths, components } = res.body;
    expect(Object.keys(paths['/api/collections/post_stats/records'])).toEqual(['get']);
    expect(Object.keys(paths['/api/collections/post_stats/records/{id}'])).toEqual(['parameters', 'get']);
    expect(Object.keys(components.schemas.PostStatsRecord.properties)).toEqual(expect.arrayContaining(['heading', 'author', 'tags', 'comments', 'last_comment']));
    expect(components.schemas.PostStatsCreate).toBeUndefined();
    expect(Object.keys(paths['/api/collections/posts/records'])).toEqual(['get', 'post', 'delete']);
  });

  test('realtime: a subscription to a view is accepted and receives nothing', async () => {
    const sse = await openSse(`${app.baseUrl}/backend/api/realtime`);
    open.push(sse);
    const clientId = await sse.clientId();
    const subscriptions = ['post_stats/*', 'counters/*', 'comments/*'];
    expect((await app.http.post('/backend/api/realtime').set('Authorization', 'token-root').send({ clientId, subscriptions })).status).toBe(204);
    const comment = await create('comments', { post: ids.p3, text: 'late' });
    // the comment's own event comes after every change of that write, so the views had their chance
    await sse.next((e) => e.event === 'comments/*' && e.data!.includes(comment), { timeoutMs: 5000 });
    expect(sse.messages('post_stats/*')).toEqual([]);
    expect(sse.messages('counters/*')).toEqual([]);
    expect((await get(`post_stats/records/${ids.p3}`)).body.comments).toBe(1);
  });

  test("deleting a record a view's relation points at unlinks the tables only", async () => {
    const carol = await create('users', { name: 'Carol' });
    const post = await create('posts', { title: 'carol', author: carol });
    expect((await get(`post_writers/records/${post}`)).body.writer).toBe(carol);
    const res = await app.http.delete(api(`users/records/${carol}`)).set('Authorization', 'token-root');
    expect(res.status).toBe(204);
    expect((await get(`posts/records/${post}`)).body.author).toBe('');
    expect((await get(`post_writers/records/${post}`)).body.writer).toBe('');
  });
});

describe.each(testEngines())('view collections and the schema sync on %s', (engine: Engine) => {
  let database: TestDatabase;
  const routers: RecordsRouter[] = [];
  const posts: CollectionDefinition = { name: 'posts', fields: [{ name: 'title', type: 'text' }], rules: { list: '', view: '' } };
  const view = (viewQuery: string, extra: Partial<CollectionDefinition> = {}): CollectionDefinition => ({ name: 'v', type: 'view', viewQuery, rules: { list: '', view: '' }, ...extra }) as CollectionDefinition;

  function start(defs: CollectionDefinition[]): RecordsRouter {
    const router = createRecordsRouter({
      collections: defs,
      database: database.db,
      auth: (token) => TEST_IDENTITIES[token] ?? null,
      logger: createMemoryLogger(),
      fileSweep: false,
      realtime: false,
      fileTokenSecret: TEST_FILE_TOKEN_SECRET,
    });
    routers.push(router);
    return router;
  }

  async function viewOid(name: string): Promise<string | null> {
    const result: { rows: { oid: string | null }[] } = await database.db.raw(`SELECT to_regclass(format('%I.%I', current_schema(), ?::text))::oid::text AS oid`, [name]);
    return result.rows[0]?.oid ?? null;
  }

  beforeEach(async () => {
    database = await openTestDatabase(engine);
  });
  afterEach(async () => {
    for (const router of routers.splice(0)) await router.close();
    await database.destroy();
  });

  test('a changed viewQuery replaces the view and its fields; an unchanged one is left in place', async () => {
    const first = start([posts, view('SELECT p.id, p.title FROM posts p')]);
    await first.ready;
    await first.api.collection('posts').create({ title: 'hello' }, { as: 'superuser' });
    const oid = await viewOid('v');
    expect(oid).not.toBeNull();
    const again = start([posts, view('SELECT p.id, p.title FROM posts p')]);
    await again.ready;
    expect(await viewOid('v')).toBe(oid);
    const changed = start([posts, view('SELECT p.id, p.title, upper(p.title) AS shout FROM posts p')]);
    await changed.ready;
    expect(await viewOid('v')).not.toBe(oid);
    const [row] = await changed.api.collection('v').getFullList();
    expect(row).toMatchObject({ title: 'hello', shout: 'HELLO' });
  });

  test('a view reads the views declared before it; one declared after it is refused, naming both', async () => {
    const base = view('SELECT p.id, p.title FROM posts p');
    const onTop: CollectionDefinition = { name: 'w', type: 'view', viewQuery: 'SELECT v.id, v.title AS name FROM v', rules: { list: '', view: '' } };
    const ordered = start([posts, base, onTop]);
    await ordered.ready;
    const reversed = start([posts, onTop, base]);
    await expect(reversed.ready).rejects.toThrow('collection "w": its viewQuery reads the view collection "v", declared after it (or itself); declare "v" first');
  });

  test.each([
    ['fields', view('SELECT 1 AS id', { fields: [{ name: 'x', type: 'text' }] } as never), 'collection "v": a view collection\'s fields are inferred from its viewQuery; remove "fields"'],
    ['indexes', view('SELECT 1 AS id', { indexes: [{ fields: ['id'] }] } as never), 'collection "v": a view collection cannot have indexes'],
    ['a create rule', view('SELECT 1 AS id', { rules: { list: '', create: '' } } as never), 'collection "v": a view collection is read-only; its "create" rule can only be null'],
    ['an empty query', view('  '), 'collection "v": a view collection needs "viewQuery", a SELECT statement'],
    ['another type', { name: 'v', type: 'auth', fields: [] } as never, 'collection "v": unknown type "auth" (base, the default, or view)'],
  ])('a definition with %s is refused when the router is created', (_label, definition, message) => {
    expect(() => start([posts, definition])).toThrow(SchemaError);
    expect(() => start([posts, definition])).toThrow(message);
  });

  test.each([
    ['no id column', 'SELECT p.title FROM posts p', /collection "v": its viewQuery has no "id" column, which every view needs/],
    ['SQL the database refuses', 'SELECT p.id FROM nowhere p', /collection "v": its viewQuery does not run: relation "nowhere" does not exist/],
    ['a message holding " - "', 'SELECT p.id, p.title - 1 AS n FROM posts p', /collection "v": its viewQuery does not run: operator does not exist: text - integer/],
    ['a second statement', 'SELECT p.id FROM posts p; DROP TABLE posts', /collection "v": its viewQuery does not run: syntax error/],
    ['an unnameable column', 'SELECT p.id, 1 + 1 FROM posts p', /collection "v": the viewQuery's column "\?column\?" cannot be a field name/],
    ['a record key as a column', 'SELECT p.id, p.title AS expand FROM posts p', /collection "v": the viewQuery's column "expand" has the name of a record key/],
    ['a created that is no date', 'SELECT p.id, p.title AS created FROM posts p', /collection "v": the viewQuery's column "created" must be a date/],
  ])('ready rejects a view with %s, naming it, and nothing is made', async (_label, query, message) => {
    const router = start([posts, view(query)]);
    await expect(router.ready).rejects.toThrow(message);
    expect(await viewOid('v')).toBeNull();
    expect(await viewOid('posts')).toBeNull();
  });

  test('shownColumns shows a computed column of a view that reads a hidden field, never a copy of one (issue 41, finding 7)', async () => {
    const accounts: CollectionDefinition = { name: 'accounts', fields: [{ name: 'name', type: 'text' }, { name: 'secret', type: 'text', hidden: true }], rules: { list: '', view: '' } };
    const query = 'SELECT a.id, a.name, lower(a.secret) AS hint, length(a.name) AS name_length FROM accounts a';
    const router = start([accounts, view(query, { shownColumns: ['name_length'] })]);
    await router.ready;
    await router.api.collection('accounts').create({ name: 'Alice', secret: 'S3CRET' }, { as: 'superuser' });
    const [guest] = await router.api.collection('v').getFullList();
    expect(guest).toEqual({ collectionId: expect.stringMatching(/^pbc_/), collectionName: 'v', id: expect.any(String), name: 'Alice', name_length: 5 });
    await expect(router.api.collection('v').getFullList({ filter: 'hint = "s3cret"' })).rejects.toMatchObject({ status: 400 });
    expect((await router.api.collection('v').getFullList({ as: 'superuser' }))[0]).toMatchObject({ hint: 's3cret', name_length: 5 });

    const copy = start([accounts, view('SELECT a.id, a.secret FROM accounts a', { shownColumns: ['secret'] })]);
    await expect(copy.ready).rejects.toThrow('collection "v": shownColumns names "secret", a copy of the hidden field "accounts.secret", which stays hidden in a view');
    const typo = start([accounts, view(query, { shownColumns: ['name_lenght'] })]);
    await expect(typo.ready).rejects.toThrow('collection "v": shownColumns names "name_lenght", which its viewQuery does not select');
    expect(() => start([accounts, view(query, { shownColumns: 'name_length' } as never)])).toThrow("collection \"v\": shownColumns must be an array of the viewQuery's column names");
  });

  test("a rule that reads a view's fields is checked at ready, naming the rule", async () => {
    const good: CollectionDefinition = { name: 'feed', fields: [{ name: 'title', type: 'text' }], rules: { list: '@collection.v.title ?= title' } };
    const ok = start([posts, good, view('SELECT p.id, p.title FROM posts p', { rules: { list: 'title != ""', view: 'title != ""' } })]);
    await ok.ready;
    const bad = start([posts, { ...good, rules: { list: '@collection.v.nope ?= title' } }, view('SELECT p.id, p.title FROM posts p')]);
    await expect(bad.ready).rejects.toThrow(/collection "feed": rule "list" is invalid: .*nope/);
    const badOwn = start([posts, view('SELECT p.id, p.title FROM posts p', { rules: { list: 'heading = ""' } })]);
    await expect(badOwn.ready).rejects.toThrow(/collection "v": rule "list" is invalid: .*heading/);
  });

  test("a view and a table never take each other's name: nothing is dropped", async () => {
    await start([posts, view('SELECT p.id FROM posts p'), { name: 'old', fields: [{ name: 'title', type: 'text' }] }]).ready;
    const table = start([posts, { name: 'v', fields: [{ name: 'title', type: 'text' }] }]);
    await expect(table.ready).rejects.toThrow('collection "v": the database view "v" holds its name (was it a view collection?)');
    const overTable = start([posts, { name: 'old', type: 'view', viewQuery: 'SELECT p.id FROM posts p' }]);
    await expect(overTable.ready).rejects.toThrow('collection "old": a view collection needs its name free, but the table "old" exists');
    expect(await viewOid('old')).not.toBeNull();
    expect(await viewOid('v')).not.toBeNull();
  });
});
