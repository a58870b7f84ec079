import express from 'express';
import supertest from 'supertest';
import { buildOpenApiDocument } from '../../lib/openapi/build-openapi-document.js';
import { resolveOptions } from '../../lib/options.js';
import { buildSchemaRegistry } from '../../lib/schema/collection-schema.js';
import { blogCollections } from '../support/demo-collections.js';
import { makePng } from '../support/file-fixtures.js';
import { compileComponentSchemas, expectMatchesSchema, expectValidOpenApi } from '../support/openapi-schemas.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

const ALICE = { Authorization: 'token-alice' };

describe.each(testEngines())('GET /api/openapi.json on %s', (engine) => {
  let app: TestApp;
  const api = (path: string) => `/backend/api/${path}`;

  beforeAll(async () => {
    app = await startTestApp(engine, { collections: blogCollections(), openapi: true, limits: { maxPerPage: 50 } });
  });
  afterAll(async () => {
    await app?.close();
  });

  test('serves the document of `recordbase openapi`, with servers set to the mount point', async () => {
    const res = await app.http.get(api('openapi.json'));
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const resolved = resolveOptions({ collections: blogCollections(), limits: { maxPerPage: 50 } });
    const expected = buildOpenApiDocument(buildSchemaRegistry(blogCollections()), { serverUrl: '/backend', limits: resolved.limits, multipartUpdate: 'replace' });
    expect(res.body).toEqual(JSON.parse(JSON.stringify(expected)));
    expect(res.body.servers).toEqual([{ url: '/backend' }]);
    await expectValidOpenApi(res.body);
    const again = await app.http.get(api('openapi.json'));
    expect(again.text).toBe(res.text);
  });

  test('a router mounted under a parameter gives each mount its own servers URL', async () => {
    const host = express();
    host.use('/t/:tenant', app.router);
    const [acme, other] = await Promise.all([supertest(host).get('/t/acme/api/openapi.json'), supertest(host).get('/t/o%22ther/api/openapi.json')]);
    expect(acme.body.servers).toEqual([{ url: '/t/acme' }]);
    expect(other.body.servers).toEqual([{ url: '/t/o%22ther' }]);
    expect({ ...acme.body, servers: [] }).toEqual({ ...other.body, servers: [] });
  });

  test('what the server really sends matches the schemas the document gives', async () => {
    const document = (await app.http.get(api('openapi.json'))).body;
    const schemaOf = compileComponentSchemas(document);

    const userBody = { name: 'Ann', email: 'ann@example.com', role: 'editor' };
    expectMatchesSchema(schemaOf, 'UsersCreate', userBody);
    const user = await app.http.post(api('collections/users/records')).set(ALICE).send(userBody);
    expect(user.status).toBe(200);
    expectMatchesSchema(schemaOf, 'UsersRecord', user.body);

    const postBody = {
      title: 'Typed',
      body: 'text',
      slug: 'typed',
      views: 12,
      score: 9.5,
      published: true,
      publishedAt: '2024-05-01T10:00:00+02:00',
      contact: 'a@example.com',
      site: 'https://example.com/x',
      category: 'news',
      tags: ['a', 'c'],
      meta: { nested: [1, 'two', null] },
      author: user.body.id,
      editors: [user.body.id],
    };
    expectMatchesSchema(schemaOf, 'PostsCreate', postBody);
    const post = await app.http.post(api('collections/posts/records')).set(ALICE).send(postBody);
    expect(post.status).toBe(200);
    expectMatchesSchema(schemaOf, 'PostsRecord', post.body);

    const empty = await app.http.post(api('collections/posts/records')).set(ALICE).send({ title: 'Empty' });
    expectMatchesSchema(schemaOf, 'PostsRecord', empty.body);

    const withFile = await app.http
      .post(api('collections/posts/records'))
      .set(ALICE)
      .field('title', 'Covered')
      .field('views', '3')
      .attach('cover', await makePng(8, 8), 'cover.png');
    expect(withFile.status).toBe(200);
    expectMatchesSchema(schemaOf, 'PostsRecord', withFile.body);
    expect(withFile.body.cover).toMatch(/^cover_[a-z0-9]{10}\.png$/);

    const updateBody = { 'views+': 2, 'tags-': 'a', cover: '' };
    expectMatchesSchema(schemaOf, 'PostsUpdate', updateBody);
    const updated = await app.http.patch(api(`collections/posts/records/${withFile.body.id}`)).set(ALICE).send(updateBody);
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({ views: 5, cover: '' });
    expectMatchesSchema(schemaOf, 'PostsRecord', updated.body);

    await app.http.post(api('collections/comments/records')).set(ALICE).send({ text: 'hi', post: post.body.id }).expect(200);
    const expanded = await app.http.get(api(`collections/posts/records/${post.body.id}?expand=author,editors,comments_via_post`)).set(ALICE);
    expect(Object.keys(expanded.body.expand).sort()).toEqual(['author', 'comments_via_post', 'editors']);
    expectMatchesSchema(schemaOf, 'PostsRecord', expanded.body);

    const list = await app.http.get(api('collections/posts/records?perPage=2&expand=author')).set(ALICE);
    expectMatchesSchema(schemaOf, 'PostsList', list.body);
    const skipped = await app.http.get(api('collections/posts/records?skipTotal=1')).set(ALICE);
    expect(skipped.body.totalItems).toBe(-1);
    expectMatchesSchema(schemaOf, 'PostsList', skipped.body);

    const token = await app.http.post(api('files/token')).set(ALICE);
    expectMatchesSchema(schemaOf, 'FileToken', token.body);
    const deleted = await app.http.delete(api(`collections/comments/records?filter=${encodeURIComponent('text = "hi"')}`)).set(ALICE);
    expect(deleted.body).toEqual({ deleted: 1 });
    expectMatchesSchema(schemaOf, 'DeletedCount', deleted.body);

    const invalid = await app.http.post(api('collections/posts/records')).set(ALICE).send({ title: '', tags: ['zzz'] });
    expect(invalid.status).toBe(422);
    expectMatchesSchema(schemaOf, 'ErrorBody', invalid.body);
    expect(schemaOf('PostsCreate')({ title: '', tags: ['zzz'] })).toBe(false);
    for (const path of ['collections/posts/records/aaaaaaaaaaaaaaa', 'collections/posts/records?filter=nope%20%3D', 'files/token']) {
      const res = path === 'files/token' ? await app.http.post(api(path)) : await app.http.get(api(path));
      expect([400, 401, 404]).toContain(res.status);
      expectMatchesSchema(schemaOf, 'ErrorBody', res.body);
    }
  });

  test('what the aggregate endpoint really sends matches its schemas, groups and errors alike (issue 47)', async () => {
    const document = (await app.http.get(api('openapi.json'))).body;
    const schemaOf = compileComponentSchemas(document);
    const user = await app.http.post(api('collections/users/records')).set(ALICE).send({ name: 'Agg', email: 'agg@example.com' });
    await app.http.post(api('collections/posts/records')).set(ALICE).send({ title: 'Agg one', views: 2, score: 1.5, category: 'news', author: user.body.id, publishedAt: '2024-05-01 10:00:00.000Z' }).expect(200);
    await app.http.post(api('collections/posts/records')).set(ALICE).send({ title: 'Agg two', published: true }).expect(200);
    const asks = [
      'groupBy=category,author,published,publishedAt,score&fields=count(),sum(views),avg(score),min(publishedAt),max(title)',
      'groupBy=title,body,slug,contact,site&fields=min(contact),max(site),min(score),max(views),max(author)',
      'groupBy=id,created,updated&fields=min(created),max(updated),min(category),max(slug)&sort=-count,id',
      'fields=sum(views),avg(views)&filter=' + encodeURIComponent('views > 1000'),
    ];
    for (const ask of asks) {
      const res = await app.http.get(api(`collections/posts/aggregate?${ask}`)).set(ALICE);
      expect([ask, res.status]).toEqual([ask, ask.includes('sort=-count') ? 400 : 200]);
      expectMatchesSchema(schemaOf, res.status === 200 ? 'PostsAggregate' : 'ErrorBody', res.body);
    }
    // What the document says may be grouped and aggregated is what the endpoint takes, and nothing else.
    const item = document.components.schemas.PostsAggregateGroup.properties as Record<string, unknown>;
    for (const name of ['views', 'tags', 'meta', 'editors', 'cover', 'secret']) {
      const taken = (await app.http.get(api(`collections/posts/aggregate?groupBy=${name}&fields=min(id)`)).set(ALICE)).status === 200;
      expect([name, taken]).toEqual([name, name in item]);
    }
    for (const call of ['sum(title)', 'min(tags)', 'max(meta)', 'avg(secret)', 'sum(views)', 'min(publishedAt)']) {
      const taken = (await app.http.get(api(`collections/posts/aggregate?fields=${call}`)).set(ALICE)).status === 200;
      expect([call, taken]).toEqual([call, call.replace(/^(\w+)\((\w+)\)$/, '$1_$2') in item]);
    }
    // A superuser may group by a hidden field: its answer matches too.
    const root = await app.http.get(api('collections/posts/aggregate?groupBy=secret&fields=count(),max(secret)')).set({ Authorization: 'token-root' });
    expect(root.status).toBe(200);
    expectMatchesSchema(schemaOf, 'PostsAggregate', root.body);
    const tooMany = await startTestApp(engine, { collections: blogCollections(), openapi: true, limits: { maxAggregateGroups: 1 } });
    try {
      await tooMany.http.post(api('collections/posts/records')).set(ALICE).send({ title: 'One' }).expect(200);
      await tooMany.http.post(api('collections/posts/records')).set(ALICE).send({ title: 'Two' }).expect(200);
      const res = await tooMany.http.get(api('collections/posts/aggregate?groupBy=title')).set(ALICE);
      expect(res.status).toBe(400);
      expectMatchesSchema(compileComponentSchemas((await tooMany.http.get(api('openapi.json'))).body), 'ErrorBody', res.body);
      expect((await tooMany.http.get(api('openapi.json'))).body.paths['/api/collections/posts/aggregate'].get.description).toMatch(/At most 1 groups/);
    } finally {
      await tooMany.close();
    }
  });

  test('a collection with a search index documents search, and what a search sends matches the schemas (issue 47)', async () => {
    const collections = [
      { name: 'notes', fields: [{ name: 'title', type: 'text' as const }, { name: 'body', type: 'editor' as const }, { name: 'amount', type: 'number' as const }], rules: { list: '', view: '', create: '' }, indexes: [{ search: ['title', 'body'], language: 'english' as const }] },
    ];
    const searched = await startTestApp(engine, { collections, openapi: true });
    try {
      const document = (await searched.http.get(api('openapi.json'))).body;
      await expectValidOpenApi(document);
      const schemaOf = compileComponentSchemas(document);
      const names = (path: string) => (document.paths[path].get.parameters as { $ref?: string; name?: string }[]).map((p) => p.$ref?.split('/').pop() ?? p.name);
      expect(names('/api/collections/notes/records')).toContain('search');
      expect(names('/api/collections/notes/aggregate')).toContain('search');
      await searched.http.post(api('collections/notes/records')).send({ title: 'Fast cars', body: '<p>A <b>red</b> car & a truck</p>', amount: 3 }).expect(200);
      await searched.http.post(api('collections/notes/records')).send({ title: 'Slow boats', body: 'water', amount: 4 }).expect(200);
      const list = await searched.http.get(api(`collections/notes/records?search=car&sort=-@rank&fields=id,title:highlight,body:highlight`));
      expect(list.status).toBe(200);
      expect(list.body.items).toEqual([{ id: expect.any(String), title: 'Fast <mark>cars</mark>', body: expect.stringContaining('<mark>car</mark>') }]);
      // The record schema holds every field, which fields= narrows: the whole records are checked.
      const whole = await searched.http.get(api('collections/notes/records?search=car&sort=-@rank'));
      expect(whole.body.totalItems).toBe(1);
      expectMatchesSchema(schemaOf, 'NotesList', whole.body);
      const aggregate = await searched.http.get(api('collections/notes/aggregate?search=car&fields=count(),sum(amount),max(title)'));
      expect(aggregate.body.items).toEqual([{ count: 1, sum_amount: 3, max_title: 'Fast cars' }]);
      expectMatchesSchema(schemaOf, 'NotesAggregate', aggregate.body);
    } finally {
      await searched.close();
    }
  });

  test('is off by default: without `openapi: true` nothing is served there', async () => {
    const closed = await startTestApp(engine, { collections: blogCollections() });
    try {
      const res = await closed.http.get(api('openapi.json'));
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ status: 404, message: expect.stringContaining('openapi: true'), data: {} });
    } finally {
      await closed.close();
    }
  });
});
