import { blogCollections } from '../support/demo-collections.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

const RECORD_DATE = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const ROOT = { Authorization: 'token-root' };

describe.each(testEngines({ pooler: true }))('records CRUD on %s', (engine) => {
  let app: TestApp;
  const api = (path: string) => `/backend/api/collections/${path}`;

  beforeAll(async () => {
    app = await startTestApp(engine, { collections: blogCollections(), limits: { maxPerPage: 5 } });
  });
  afterAll(async () => {
    await app?.close();
  });

  async function createUser(name: string, extra: Record<string, unknown> = {}) {
    const res = await app.http.post(api('users/records')).send({ name, ...extra });
    expect(res.status).toBe(200);
    return res.body as { id: string; name: string };
  }

  describe('create', () => {
    test('returns the record with system fields and empty values for fields not sent', async () => {
      const res = await app.http.post(api('posts/records')).send({ title: 'Hello' });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        collectionId: 'pbc_posts01',
        collectionName: 'posts',
        id: expect.stringMatching(/^[a-z0-9]{15}$/),
        title: 'Hello',
        body: '',
        slug: '',
        views: null,
        score: null,
        published: false,
        publishedAt: null,
        contact: '',
        site: '',
        category: '',
        tags: [],
        meta: null,
        author: '',
        editors: [],
        cover: '',
        created: expect.stringMatching(RECORD_DATE),
        updated: expect.stringMatching(RECORD_DATE),
      });
      expect(res.body.created).toBe(res.body.updated);
      expect(res.body).not.toHaveProperty('secret');
    });

    test('stores every field type and reads it back the same', async () => {
      const user = await createUser('Ann');
      const input = {
        title: 'Typed',
        views: '12',
        score: 9.5,
        published: true,
        publishedAt: '2024-05-01T12:30:00+02:00',
        contact: 'a@example.com',
        site: 'https://example.com/x',
        category: 'news',
        tags: ['b', 'a', 'b'],
        meta: { nested: [1, 'two', null], ok: true },
        author: user.id,
        editors: [user.id],
        secret: 's3cret',
      };
      const created = await app.http.post(api('posts/records')).send(input);
      expect(created.status).toBe(200);
      const view = await app.http.get(api(`posts/records/${created.body.id}`));
      expect(view.status).toBe(200);
      expect(view.body).toMatchObject({
        views: 12,
        score: 9.5,
        published: true,
        publishedAt: '2024-05-01 10:30:00.000Z',
        tags: ['b', 'a'],
        meta: { nested: [1, 'two', null], ok: true },
        author: user.id,
        editors: [user.id],
      });
      expect(view.body).not.toHaveProperty('secret');
      const asRoot = await app.http.get(api(`posts/records/${created.body.id}`)).set(ROOT);
      expect(asRoot.body.secret).toBe('s3cret');
      const row = await app.database.db('posts').where({ id: created.body.id }).first();
      expect(row.secret).toBe('s3cret');
      expect(row.tags).toEqual(['b', 'a']);
    });

    test('accepts a valid unused client id and refuses a duplicate or malformed one', async () => {
      const ok = await app.http.post(api('users/records')).send({ id: 'clientchosen001', name: 'Id' });
      expect(ok.status).toBe(200);
      expect(ok.body.id).toBe('clientchosen001');
      const dup = await app.http.post(api('users/records')).send({ id: 'clientchosen001', name: 'Id2' });
      expect(dup.status).toBe(422);
      expect(dup.body.data.id.code).toBe('validation_not_unique');
      const bad = await app.http.post(api('users/records')).send({ id: '../etc/passwd', name: 'Id3' });
      expect(bad.status).toBe(422);
      expect(bad.body).toEqual({ status: 422, message: expect.any(String), data: { id: { code: 'validation_invalid_format', message: expect.any(String) } } });
    });

    test('ignores system fields sent by the client', async () => {
      const res = await app.http.post(api('users/records')).send({ name: 'Sys', created: '2000-01-01 00:00:00.000Z', collectionName: 'x' });
      expect(res.status).toBe(200);
      expect(res.body.created).not.toBe('2000-01-01 00:00:00.000Z');
      expect(res.body.collectionName).toBe('users');
    });
  });

  describe('validation', () => {
    test.each([
      [{ body: 'x' }, 'title', 'validation_required'],
      [{ title: '' }, 'title', 'validation_required'],
      [{ title: 'x'.repeat(21) }, 'title', 'validation_max_text_constraint'],
      [{ title: 'ok', slug: 'Not A Slug' }, 'slug', 'validation_invalid_format'],
      [{ title: 'ok', views: -1 }, 'views', 'validation_min_number'],
      [{ title: 'ok', views: 1.5 }, 'views', 'validation_not_integer'],
      [{ title: 'ok', views: 'many' }, 'views', 'validation_invalid_number'],
      [{ title: 'ok', score: 11 }, 'score', 'validation_max_number'],
      [{ title: 'ok', contact: 'not-an-email' }, 'contact', 'validation_invalid_email'],
      [{ title: 'ok', site: 'javascript:alert(1)' }, 'site', 'validation_invalid_url'],
      [{ title: 'ok', publishedAt: 'yesterday' }, 'publishedAt', 'validation_invalid_date'],
      [{ title: 'ok', category: 'gossip' }, 'category', 'validation_invalid_value'],
      [{ title: 'ok', tags: ['a', 'b', 'c'] }, 'tags', 'validation_too_many_values'],
      [{ title: 'ok', author: 'nosuchuser0000' }, 'author', 'validation_missing_rel_records'],
      [{ title: 'ok', author: 'nosuchuser00000' }, 'author', 'validation_missing_rel_records'],
    ])('%j -> 422 %s %s', async (input, field, code) => {
      const before = await app.database.db('posts').count({ n: '*' }).first();
      const res = await app.http.post(api('posts/records')).send(input);
      expect(res.status).toBe(422);
      expect(res.body.status).toBe(422);
      expect(res.body.data[field]).toEqual({ code, message: expect.any(String) });
      const after = await app.database.db('posts').count({ n: '*' }).first();
      expect(Number(after!.n)).toBe(Number(before!.n));
    });

    test('reports every failing field at once', async () => {
      const res = await app.http.post(api('posts/records')).send({ views: -5, contact: 'x' });
      expect(res.status).toBe(422);
      expect(Object.keys(res.body.data).sort()).toEqual(['contact', 'title', 'views']);
    });

    test('a unique index violation is a 422 on its first field; empty values never collide', async () => {
      expect((await app.http.post(api('posts/records')).send({ title: 'u1', slug: 'same' })).status).toBe(200);
      const dup = await app.http.post(api('posts/records')).send({ title: 'u2', slug: 'same' });
      expect(dup.status).toBe(422);
      expect(dup.body.data.slug.code).toBe('validation_not_unique');
      expect((await app.http.post(api('posts/records')).send({ title: 'e1' })).status).toBe(200);
      expect((await app.http.post(api('posts/records')).send({ title: 'e2' })).status).toBe(200);
    });
  });

  describe('malformed requests', () => {
    test('bad JSON is a 400 with the error body', async () => {
      const res = await app.http.post(api('posts/records')).set('Content-Type', 'application/json').send('{"title": ');
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ status: 400, message: expect.any(String), data: {} });
    });

    test.each(['[1,2]', '"text"', '42', 'null'])('a JSON body that is not an object (%s) is a 400', async (body) => {
      const res = await app.http.post(api('posts/records')).set('Content-Type', 'application/json').send(body);
      expect(res.status).toBe(400);
      expect(res.body.data).toEqual({});
    });

    test('a body over maxBodySize is a 413, and nothing is stored', async () => {
      const small = await startTestApp(engine, { collections: blogCollections(), limits: { maxBodySize: 1024 } });
      try {
        const res = await small.http.post(api('posts/records')).send({ title: 'big', body: 'x'.repeat(5000) });
        expect(res.status).toBe(413);
        expect(res.body).toEqual({ status: 413, message: expect.any(String), data: {} });
        expect(Number((await small.database.db('posts').count({ n: '*' }).first())!.n)).toBe(0);
      } finally {
        await small.close();
      }
    });

    test('a collection with no field of its own: create (with and without an id), view and list', async () => {
      const bare = await startTestApp(engine, { collections: [{ name: 'marks', fields: [], rules: { list: '', view: '', create: '', update: '', delete: '' } }] });
      try {
        const generated = await bare.http.post(api('marks/records')).send({});
        expect([generated.status, Object.keys(generated.body).sort()]).toEqual([200, ['collectionId', 'collectionName', 'created', 'id', 'updated']]);
        const chosen = await bare.http.post(api('marks/records')).send({ id: 'markchosen00001' });
        expect([chosen.status, chosen.body.id]).toEqual([200, 'markchosen00001']);
        expect((await bare.http.get(api('marks/records/markchosen00001'))).status).toBe(200);
        expect((await bare.http.get(api('marks/records'))).body.totalItems).toBe(2);
      } finally {
        await bare.close();
      }
    });

    test('an unknown collection is a 404, by name or id', async () => {
      const res = await app.http.get(api('nope/records'));
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ status: 404, message: expect.stringContaining('nope'), data: {} });
      expect((await app.http.get(api('pbc_posts01/records'))).status).toBe(200);
    });

    test('an unknown record is a 404', async () => {
      const res = await app.http.get(api('posts/records/doesnotexist123'));
      expect(res.status).toBe(404);
      expect(res.body.data).toEqual({});
    });

    test('a NUL character in a text or JSON value is a 400, not a 500, and nothing is stored', async () => {
      const before = await app.database.db('posts').count({ n: '*' }).first();
      const text = await app.http.post(api('posts/records')).send({ title: 'a\u0000b' });
      expect(text.status).toBe(400);
      expect(text.body).toEqual({ status: 400, message: expect.stringContaining('NUL'), data: {} });
      const json = await app.http.post(api('posts/records')).send({ title: 'ok', meta: { k: '\u0000' } });
      expect(json.status).toBe(400);
      const after = await app.database.db('posts').count({ n: '*' }).first();
      expect(Number(after!.n)).toBe(Number(before!.n));
    });

    test('a record id that cannot exist is a 404 on view, update and delete', async () => {
      for (const id of ['%00', 'a%00b', '..%2f..%2fx', 'x'.repeat(300)]) {
        expect((await app.http.get(api(`posts/records/${id}`))).status).toBe(404);
        expect((await app.http.patch(api(`posts/records/${id}`)).send({ title: 'x' })).status).toBe(404);
        expect((await app.http.delete(api(`posts/records/${id}`))).status).toBe(404);
      }
    });

    test('multi-megabyte values are validation errors, not a 500 (no regex runs away on them)', async () => {
      const huge = 'a'.repeat(4_000_000);
      const res = await app.http.post(api('posts/records')).send({ title: 'ok', contact: `${huge}@example.com`, slug: huge + ' ' });
      expect(res.status).toBe(422);
      expect(res.body.data).toEqual({
        contact: { code: 'validation_invalid_email', message: expect.any(String) },
        slug: { code: 'validation_invalid_format', message: expect.any(String) },
      });
    });

    test('a prototype-polluting body changes nothing but the record', async () => {
      const res = await app.http
        .post(api('posts/records'))
        .set('Content-Type', 'application/json')
        .send('{"title":"proto","__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}');
      expect(res.status).toBe(200);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    });
  });

  describe('list', () => {
    let ids: string[];
    beforeAll(async () => {
      ids = [];
      for (let i = 0; i < 7; i++) {
        const res = await app.http.post(api('comments/records')).send({ text: `c${i}` });
        ids.push(res.body.id);
      }
    });

    test('pages in created order, capped at maxPerPage, with totals', async () => {
      const first = await app.http.get(api('comments/records?perPage=100'));
      expect(first.status).toBe(200);
      expect(first.body).toMatchObject({ page: 1, perPage: 5, totalItems: 7, totalPages: 2 });
      expect(first.body.items.map((r: { id: string }) => r.id)).toEqual(ids.slice(0, 5));
      const second = await app.http.get(api('comments/records?perPage=5&page=2'));
      expect(second.body.items.map((r: { id: string }) => r.id)).toEqual(ids.slice(5));
      const beyond = await app.http.get(api('comments/records?page=9'));
      expect(beyond.body).toMatchObject({ page: 9, items: [] });
    });

    test('defaults: page 1, perPage 30 (capped here at 5)', async () => {
      const res = await app.http.get(api('comments/records'));
      expect(res.body).toMatchObject({ page: 1, perPage: 5 });
    });

    test.each(['1', 'true'])('skipTotal=%s gives -1 totals', async (flag) => {
      const res = await app.http.get(api(`comments/records?skipTotal=${flag}&perPage=2`));
      expect(res.body).toMatchObject({ page: 1, perPage: 2, totalItems: -1, totalPages: -1 });
      expect(res.body.items).toHaveLength(2);
    });

    test.each(['page=abc', 'perPage=1e3', 'page=1.5', 'perPage=%00'])('%s is a 400', async (q) => {
      const res = await app.http.get(api(`comments/records?${q}`));
      expect(res.status).toBe(400);
      expect(res.body.status).toBe(400);
    });

    test('records with the same created time are ordered by id', async () => {
      await app.database.db('comments').update({ created: '2020-01-01 00:00:00.000Z' });
      const res = await app.http.get(api('comments/records?perPage=5'));
      const got = res.body.items.map((r: { id: string }) => r.id);
      expect(got).toEqual([...ids].sort().slice(0, 5));
    });
  });

  describe('update', () => {
    test('changes only the fields sent and bumps updated', async () => {
      const created = await app.http.post(api('posts/records')).send({ title: 'Before', body: 'keep', views: 1 });
      await new Promise((r) => setTimeout(r, 5));
      const res = await app.http.patch(api(`posts/records/${created.body.id}`)).send({ title: 'After' });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ id: created.body.id, title: 'After', body: 'keep', views: 1, created: created.body.created });
      expect(res.body.updated > created.body.updated).toBe(true);
    });

    test('validates the merged record and changes nothing on failure', async () => {
      const created = await app.http.post(api('posts/records')).send({ title: 'Valid' });
      const res = await app.http.patch(api(`posts/records/${created.body.id}`)).send({ title: '', views: 2 });
      expect(res.status).toBe(422);
      expect(res.body.data.title.code).toBe('validation_required');
      const view = await app.http.get(api(`posts/records/${created.body.id}`));
      expect(view.body).toMatchObject({ title: 'Valid', views: null });
    });

    test('modifiers append, prepend, remove and add', async () => {
      const u1 = await createUser('m1');
      const u2 = await createUser('m2');
      const u3 = await createUser('m3');
      const created = await app.http.post(api('posts/records')).send({ title: 'Mod', editors: [u1.id], views: 10 });
      const res = await app.http.patch(api(`posts/records/${created.body.id}`)).send({ 'editors+': u2.id, '+editors': [u3.id], 'views+': 5 });
      expect(res.status).toBe(200);
      expect(res.body.editors).toEqual([u3.id, u1.id, u2.id]);
      expect(res.body.views).toBe(15);
      const removed = await app.http.patch(api(`posts/records/${created.body.id}`)).send({ 'editors-': [u1.id], 'views-': 3 });
      expect(removed.body.editors).toEqual([u3.id, u2.id]);
      expect(removed.body.views).toBe(12);
    });

    test('an unknown record is a 404', async () => {
      const res = await app.http.patch(api('posts/records/doesnotexist123')).send({ title: 'x' });
      expect(res.status).toBe(404);
    });

    test('concurrent increments are all kept (the row version, else the row lock)', async () => {
      const created = await app.http.post(api('posts/records')).send({ title: 'Counter', views: 0 });
      const results = await Promise.all(Array.from({ length: 20 }, () => app.http.patch(api(`posts/records/${created.body.id}`)).send({ 'views+': 1 })));
      expect(results.every((r) => r.status === 200)).toBe(true);
      const view = await app.http.get(api(`posts/records/${created.body.id}`));
      expect(view.body.views).toBe(20);
    });
  });

  describe('delete', () => {
    test('answers 204 with an empty body, then the record is gone', async () => {
      const created = await app.http.post(api('users/records')).send({ name: 'Gone' });
      const res = await app.http.delete(api(`users/records/${created.body.id}`));
      expect(res.status).toBe(204);
      expect(res.text).toBe('');
      expect((await app.http.get(api(`users/records/${created.body.id}`))).status).toBe(404);
      expect((await app.http.delete(api(`users/records/${created.body.id}`))).status).toBe(404);
    });

    test('removes references and cascades where asked', async () => {
      const u1 = await createUser('ref1');
      const u2 = await createUser('ref2');
      const post = await app.http.post(api('posts/records')).send({ title: 'Refs', author: u1.id, editors: [u1.id, u2.id] });
      const comment = await app.http.post(api('comments/records')).send({ text: 'hi', post: post.body.id });
      expect((await app.http.delete(api(`users/records/${u1.id}`))).status).toBe(204);
      const after = await app.http.get(api(`posts/records/${post.body.id}`));
      expect(after.body).toMatchObject({ author: '', editors: [u2.id] });
      expect((await app.http.delete(api(`posts/records/${post.body.id}`))).status).toBe(204);
      expect((await app.http.get(api(`comments/records/${comment.body.id}`))).status).toBe(404);
    });

    test('a required relation blocks the delete with a 400 and nothing changes', async () => {
      const u = await createUser('blocker');
      const post = await app.http.post(api('posts/records')).send({ title: 'Pinned', author: u.id });
      const comment = await app.http.post(api('comments/records')).send({ text: 'stays', post: post.body.id });
      const pin = await app.http.post(api('pins/records')).send({ post: post.body.id });
      expect(pin.status).toBe(200);
      const res = await app.http.delete(api(`posts/records/${post.body.id}`));
      expect(res.status).toBe(400);
      expect(res.body.message).toContain('pins');
      expect((await app.http.get(api(`posts/records/${post.body.id}`))).status).toBe(200);
      expect((await app.http.get(api(`comments/records/${comment.body.id}`))).status).toBe(200);
    });
  });

  describe('rules and identities', () => {
    test('a null rule is superusers only (403), and superusers pass', async () => {
      const guest = await app.http.post(api('locked/records')).send({ note: 'x' });
      expect(guest.status).toBe(403);
      expect(guest.body).toEqual({ status: 403, message: expect.any(String), data: {} });
      expect((await app.http.get(api('locked/records')).set('Authorization', 'token-alice')).status).toBe(403);
      const root = await app.http.post(api('locked/records')).set(ROOT).send({ note: 'x' });
      expect(root.status).toBe(200);
      expect((await app.http.get(api(`locked/records/${root.body.id}`))).status).toBe(403);
      expect((await app.http.get(api(`locked/records/${root.body.id}`)).set('Authorization', 'Bearer token-root')).status).toBe(200);
      // The pb_session cookie is a token source for file downloads only: on record routes it is ignored.
      expect((await app.http.get(api(`locked/records/${root.body.id}`)).set('Cookie', 'pb_session=token-root')).status).toBe(403);
    });

    test('a token auth() does not know makes a guest; auth() throwing is a 401', async () => {
      expect((await app.http.get(api('locked/records')).set('Authorization', 'unknown')).status).toBe(403);
      const throwing = await startTestApp(engine, {
        collections: blogCollections(),
        auth: () => {
          throw new Error('expired');
        },
      });
      try {
        const res = await throwing.http.get(api('users/records')).set('Authorization', 'Bearer any');
        expect(res.status).toBe(401);
        expect(res.body).toEqual({ status: 401, message: expect.any(String), data: {} });
        expect((await throwing.http.get(api('users/records'))).status).toBe(200);
      } finally {
        await throwing.close();
      }
    });
  });
});
