import { describe, expect, test } from '@jest/globals';
import { buildOpenApiDocument, renderOpenApiDocument, type OpenApiDocument, type OpenApiOptions } from '../../../lib/openapi/build-openapi-document.js';
import { resolveOptions } from '../../../lib/options.js';
import { toBaseTypeName, toTypeName } from '../../../lib/openapi/type-names.js';
import { buildSchemaRegistry, deriveCollectionId } from '../../../lib/schema/collection-schema.js';
import type { CollectionDefinition } from '../../../lib/index.js';
import { demoCollections } from '../../../examples/demo/collections.js';
import { galleryCollections } from '../../../examples/gallery/collections.js';
import { blogCollections, trickyCollections } from '../../support/demo-collections.js';
import { compileComponentSchemas, expectMatchesSchema, expectValidOpenApi } from '../../support/openapi-schemas.js';

const { limits, multipartUpdate } = resolveOptions({ collections: [] }, {});
/** The document a default router serves, with `options` over it. */
const build = (defs: CollectionDefinition[], options: Partial<OpenApiOptions> = {}) => buildOpenApiDocument(buildSchemaRegistry(defs), { limits, multipartUpdate, ...options });
const schemasOf = (doc: OpenApiDocument) => (doc.components as { schemas: Record<string, Record<string, unknown>> }).schemas;
const propertiesOf = (doc: OpenApiDocument, name: string) => schemasOf(doc)[name].properties as Record<string, Record<string, unknown>>;

describe('the OpenAPI document', () => {
  test.each([
    ['the test collections (every field type)', blogCollections()],
    ['the demo', demoCollections],
    ['the gallery', galleryCollections],
    ['tricky names', trickyCollections()],
    ['no collections', []],
  ])('of %s is valid OpenAPI 3.1, and every schema compiles as strict JSON Schema 2020-12', async (_label, defs) => {
    const doc = build(defs);
    expect(doc.openapi).toBe('3.1.0');
    await expectValidOpenApi(doc);
    const schemaOf = compileComponentSchemas(doc);
    for (const name of Object.keys(schemasOf(doc))) expect(() => schemaOf(name)).not.toThrow();
  });

  test('the validator does reject a broken document (so the test above can fail)', async () => {
    const doc = build(blogCollections());
    const path = (doc.paths as Record<string, { parameters?: unknown[] }>)['/api/collections/posts/records/{id}'];
    delete path.parameters;
    await expect(expectValidOpenApi(doc)).rejects.toThrow(/path parameter|id/i);
  });

  test('is deterministic: the same definitions give the same bytes; a change gives another version', () => {
    const first = renderOpenApiDocument(build(blogCollections()));
    expect(renderOpenApiDocument(build(blogCollections()))).toBe(first);
    const changed = blogCollections();
    changed[1]!.fields!.push({ name: 'extra', type: 'text' });
    const other = build(changed);
    expect((other.info as { version: string }).version).not.toBe((JSON.parse(first) as { info: { version: string } }).info.version);
    expect(first.endsWith('}\n')).toBe(true);
  });

  test('has every records and files path under the mount point, and nothing else', () => {
    const doc = build(blogCollections(), { serverUrl: 'https://example.com/backend' });
    expect(doc.servers).toEqual([{ url: 'https://example.com/backend' }]);
    const paths = doc.paths as Record<string, Record<string, unknown>>;
    const expected: Record<string, string[]> = { '/api/files/token': ['post'], '/api/files/posts/{recordId}/{filename}': ['parameters', 'get', 'head'] };
    for (const name of ['users', 'posts', 'comments', 'pins', 'locked']) {
      expected[`/api/collections/${name}/records`] = ['get', 'post', 'delete'];
      expected[`/api/collections/${name}/records/{id}`] = ['parameters', 'get', 'patch', 'delete'];
      expected[`/api/collections/${name}/aggregate`] = ['get'];
    }
    expect(Object.fromEntries(Object.entries(paths).map(([p, item]) => [p, Object.keys(item)]))).toEqual(expected);
    const list = paths['/api/collections/posts/records'].get as { parameters: { $ref?: string; name?: string }[]; responses: Record<string, unknown> };
    expect(list.parameters.map((p) => p.$ref?.split('/').pop() ?? p.name)).toEqual(['page', 'perPage', 'skipTotal', 'filter', 'sort', 'fields', 'expand']);
    expect(Object.keys(list.responses)).toEqual(['200', '400', '401', '403', '500', '503']);
    const create = paths['/api/collections/posts/records'].post as { responses: Record<string, unknown>; requestBody: { content: Record<string, { schema: unknown }> } };
    expect(Object.keys(create.responses)).toEqual(['200', '400', '401', '403', '413', '422', '500', '503']);
    expect(create.requestBody.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/PostsCreate' });
    expect(create.requestBody.content['multipart/form-data'].schema).toEqual({ $ref: '#/components/schemas/PostsCreateForm' });
    const remove = paths['/api/collections/posts/records/{id}'].delete as { responses: Record<string, unknown> };
    expect(Object.keys(remove.responses)).toEqual(['204', '400', '401', '403', '404', '500', '503']);
  });

  test('describes the error body, its statuses and the token sources', () => {
    const doc = build(blogCollections());
    const components = doc.components as Record<string, Record<string, Record<string, unknown>>>;
    expect(schemasOf(doc).ErrorBody).toMatchObject({ required: ['status', 'message', 'data'] });
    expect(Object.keys(components.responses)).toEqual(['BadRequest', 'AggregateRejected', 'Unauthorized', 'Forbidden', 'NotFound', 'PayloadTooLarge', 'RangeNotSatisfiable', 'ValidationFailed', 'InternalError', 'Unavailable']);
    const schemaOf = compileComponentSchemas(doc);
    for (const response of Object.values(components.responses)) {
      const example = (response.content as Record<string, { example: unknown }>)['application/json'].example;
      expectMatchesSchema(schemaOf, 'ErrorBody', example);
    }
    expect(components.securitySchemes).toEqual({
      bearerToken: expect.objectContaining({ type: 'http', scheme: 'bearer' }),
      rawToken: expect.objectContaining({ type: 'apiKey', in: 'header', name: 'Authorization' }),
      sessionCookie: expect.objectContaining({ type: 'apiKey', in: 'cookie', name: 'pb_session' }),
      queryToken: expect.objectContaining({ type: 'apiKey', in: 'query', name: 'token' }),
    });
    expect(doc.security).toEqual([{}, { bearerToken: [] }, { rawToken: [] }]);
    const download = (doc.paths as Record<string, Record<string, { security: unknown[] }>>)['/api/files/posts/{recordId}/{filename}'].get;
    expect(download.security).toEqual([{}, { bearerToken: [] }, { rawToken: [] }, { sessionCookie: [] }, { queryToken: [] }]);
  });

  test('leaves hidden fields out everywhere: record, bodies, expand, back-relations', () => {
    const doc = build([
      ...blogCollections(),
      { name: 'notes', fields: [{ name: 'post', type: 'relation', collection: 'posts', hidden: true }] },
    ]);
    const text = JSON.stringify(doc);
    expect(text).not.toContain('secret');
    expect(text).not.toContain('notes_via_post');
    expect(propertiesOf(doc, 'NotesRecord')).not.toHaveProperty('post');
    expect(propertiesOf(doc, 'NotesRecord')).not.toHaveProperty('expand');
  });

  test('types each field: records as the API returns them, bodies as a client sends them', () => {
    const doc = build(blogCollections());
    const record = propertiesOf(doc, 'PostsRecord');
    expect(Object.keys(record)).toEqual([
      'collectionId', 'collectionName', 'id', 'title', 'body', 'slug', 'views', 'score', 'published', 'publishedAt', 'contact', 'site',
      'category', 'tags', 'meta', 'author', 'editors', 'cover', 'created', 'updated', 'expand',
    ]);
    expect(schemasOf(doc).PostsRecord.required).toEqual(Object.keys(record).filter((k) => k !== 'expand'));
    expect(record.collectionId).toEqual({ type: 'string', const: 'pbc_posts01' });
    expect(record.views).toEqual({ type: ['integer', 'null'] });
    expect(record.publishedAt).toMatchObject({ type: ['string', 'null'] });
    expect(record.category).toEqual({ type: 'string', enum: ['news', 'howto', ''] });
    expect(record.tags).toEqual({ type: 'array', items: { type: 'string', enum: ['a', 'b', 'c'] } });
    expect(record.author).toMatchObject({ type: 'string', 'x-recordbase-relation': 'users' });
    expect(record.editors).toMatchObject({ type: 'array', 'x-recordbase-relation': 'users' });
    expect(record.expand).toMatchObject({
      type: 'object',
      properties: {
        author: { $ref: '#/components/schemas/UsersRecord' },
        editors: { type: 'array', items: { $ref: '#/components/schemas/UsersRecord' } },
        comments_via_post: { type: 'array', items: { $ref: '#/components/schemas/CommentsRecord' } },
        pins_via_post: { type: 'array', items: { $ref: '#/components/schemas/PinsRecord' } },
      },
    });
    const create = propertiesOf(doc, 'PostsCreate');
    expect(schemasOf(doc).PostsCreate.required).toEqual(['title']);
    expect(create.title).toEqual({ type: 'string', minLength: 1, maxLength: 20 });
    expect(create.slug).toEqual({ type: 'string', anyOf: [{ const: '' }, { pattern: '^[a-z0-9-]*$' }] });
    expect(create.views).toEqual({ type: ['integer', 'null'], minimum: 0 });
    expect(create.tags).toEqual({ type: 'array', items: { type: 'string', enum: ['a', 'b', 'c'] }, maxItems: 2 });
    expect(create).not.toHaveProperty('cover'); // JSON cannot upload a file
    const form = propertiesOf(doc, 'PostsCreateForm');
    expect(form.cover).toMatchObject({ type: 'string', format: 'binary' });
    expect(form).toHaveProperty('@jsonPayload');
    const update = propertiesOf(doc, 'PostsUpdate');
    expect(schemasOf(doc).PostsUpdate).not.toHaveProperty('required');
    expect(Object.keys(update)).toEqual(expect.arrayContaining(['views+', 'views-', 'tags+', '+tags', 'tags-', 'editors+', '+editors', 'editors-']));
    expect(update.cover).toMatchObject({ type: ['string', 'null'] });
  });

  test('its schemas accept what the server accepts and refuse what it refuses', () => {
    const schemaOf = compileComponentSchemas(build(blogCollections()));
    expectMatchesSchema(schemaOf, 'PostsCreate', { title: 'Hello', views: 3, tags: ['a', 'b'], category: '', contact: '', site: 'https://x.example', author: 'aaaaaaaaaaaaaaa', publishedAt: null, meta: { any: [1] } });
    expectMatchesSchema(schemaOf, 'PostsUpdate', { 'views+': 1, 'tags-': 'a', cover: null });
    for (const bad of [
      {},
      { title: '' },
      { title: 'x', tags: ['a', 'b', 'c'] },
      { title: 'x', category: 'other' },
      { title: 'x', views: 1.5 },
      { title: 'x', contact: 'not-an-email' },
      { title: 'x', site: 'ftp://x.example' },
      { title: 'x', author: 'short' },
      { title: 'x', slug: 'Not A Slug' },
    ]) {
      expect(schemaOf('PostsCreate')(bad)).toBe(false);
    }
  });

  test('names stay distinct and prototype keys stay data', async () => {
    const doc = build(trickyCollections());
    expect(Object.keys(schemasOf(doc)).filter((n) => n.endsWith('Record'))).toEqual(['ABRecord', 'A_BRecord', 'AbRecord', '_AbRecord']);
    const record = propertiesOf(doc, toTypeName('a_b', 'record'));
    expect(Object.prototype.hasOwnProperty.call(record, '__proto__')).toBe(true);
    expect(Object.getPrototypeOf(record)).toBe(Object.prototype);
    expect(Object.keys(record)).toContain('constructor');
    expect(JSON.parse(renderOpenApiDocument(doc))).toEqual(JSON.parse(JSON.stringify(doc)));
    const form = propertiesOf(doc, 'ABCreateForm');
    expect(form.shots).toMatchObject({ type: 'array', maxItems: 4, items: { format: 'binary' } });
    const encoding = ((doc.paths as Record<string, Record<string, { requestBody: { content: Record<string, { encoding: unknown }> } }>>)['/api/collections/a_b/records'].post.requestBody.content['multipart/form-data']).encoding;
    expect(encoding).toEqual({ shots: { contentType: 'image/png, image/webp' }, '@jsonPayload': { contentType: 'application/json' } });
    expect(propertiesOf(doc, 'ABCreate').agree).toEqual({ type: 'boolean', const: true });
    expect(propertiesOf(doc, 'ABRecord').odd).toEqual({ type: 'string', enum: ['*/', "it's", ''] });
  });

  test('type names are one-to-one with collection names', () => {
    const names = ['a_b', 'ab', 'a__b', '_ab', '__ab', 'a_1', 'a1', '_', '__', 'a_', 'a__', 'x_y_z', 'xy_z', 'x_yz'];
    const typeNames = names.map(toBaseTypeName);
    expect(new Set(typeNames).size).toBe(names.length);
    expect(toBaseTypeName('blog_posts')).toBe('BlogPosts');
  });

  describe("PocketBase's field types and options", () => {
    const places: CollectionDefinition[] = [
      { name: 'tags', fields: [] },
      {
        name: 'places',
        fields: [
          { name: 'name', type: 'text', required: true, help: 'What the place is called.', presentable: true },
          { name: 'code', type: 'text', required: true, autogeneratePattern: '[A-Z]{3}' },
          { name: 'loc', type: 'geoPoint' },
          { name: 'pin', type: 'geoPoint', required: true },
          { name: 'notes', type: 'editor', maxSize: 100 },
          { name: 'seen', type: 'autodate', onCreate: true, onUpdate: true },
          { name: 'opens', type: 'date', min: '2020-01-01', help: 'When it opens.' },
          { name: 'mail', type: 'email', onlyDomains: ['example.com'] },
          { name: 'body', type: 'editor', required: true },
          { name: 'stamped', type: 'autodate', onCreate: true },
          { name: 'touched', type: 'autodate', onUpdate: true },
          { name: 'site', type: 'url', exceptDomains: ['evil.example'] },
          { name: 'closes', type: 'date', max: '2030-12-31' },
          { name: 'tags', type: 'relation', collection: 'tags', maxSelect: 5, minSelect: 2 },
        ],
      },
    ];

    test('are described: a point as an object, autodate read-only and in no body, an autogenerated text not required on create, help and presentable as hints', async () => {
      const doc = build(places);
      await expectValidOpenApi(doc);
      const record = propertiesOf(doc, 'PlacesRecord');
      expect(record.loc).toMatchObject({ type: 'object', required: ['lon', 'lat'], properties: { lon: { type: 'number', minimum: -180, maximum: 180 }, lat: { type: 'number', minimum: -90, maximum: 90 } } });
      expect(record.seen).toMatchObject({ type: ['string', 'null'], readOnly: true, description: expect.stringContaining('set by the server on create and on every update') });
      expect(record.notes).toMatchObject({ type: 'string', contentMediaType: 'text/html' });
      expect(record.name).toEqual({ type: 'string', description: 'What the place is called.', 'x-recordbase-presentable': true });
      expect(record.opens).toMatchObject({ description: 'When it opens. YYYY-MM-DD hh:mm:ss.mmmZ (UTC), or null when empty.' });
      for (const body of ['PlacesCreate', 'PlacesUpdate']) expect(propertiesOf(doc, body)).not.toHaveProperty('seen');
      expect(schemasOf(doc).PlacesCreate.required).toEqual(['name', 'pin', 'body']);
      expect(propertiesOf(doc, 'PlacesCreate').code).toMatchObject({ description: expect.stringContaining('Generated by the server from the pattern [A-Z]{3}') });
      expect(propertiesOf(doc, 'PlacesUpdate').code).toMatchObject({ minLength: 1 });
      expect(propertiesOf(doc, 'PlacesCreate').mail).toMatchObject({ description: 'An email address. Domains allowed: example.com.' });
      expect(propertiesOf(doc, 'PlacesCreate').opens).toMatchObject({ description: expect.stringContaining('Not before 2020-01-01 00:00:00.000Z.') });
      expect(propertiesOf(doc, 'PlacesCreate').closes).toMatchObject({ description: expect.stringContaining('Not after 2030-12-31 00:00:00.000Z.') });
      expect(propertiesOf(doc, 'PlacesCreate').body).toMatchObject({ type: 'string', contentMediaType: 'text/html', minLength: 1, description: expect.stringContaining('at most 5242880 bytes') });
      expect(record.stamped).toMatchObject({ readOnly: true, description: expect.stringContaining('set by the server on create.') });
      expect(record.touched).toMatchObject({ readOnly: true, description: expect.stringContaining('on every update (null until the first)') });
      for (const body of ['PlacesCreate', 'PlacesUpdate']) expect(Object.keys(propertiesOf(doc, body))).not.toEqual(expect.arrayContaining(['stamped']));
      expect(Object.keys(propertiesOf(doc, 'PlacesUpdate')).filter((key) => /stamped|touched/.test(key))).toEqual([]);
      expect(propertiesOf(doc, 'PlacesCreate').site).toMatchObject({ description: 'An absolute http(s) URL. Domains refused: evil.example.' });
      expect(propertiesOf(doc, 'PlacesCreate').tags).toMatchObject({ maxItems: 5, anyOf: [{ maxItems: 0 }, { minItems: 2 }] });
    });

    test('its schemas accept what the server accepts and refuse what it refuses', () => {
      const schemaOf = compileComponentSchemas(build(places));
      expectMatchesSchema(schemaOf, 'PlacesCreate', { name: 'x', pin: { lon: 1, lat: 2 }, loc: null, notes: '<p>x</p>', body: 'x' });
      expectMatchesSchema(schemaOf, 'PlacesRecord', {
        collectionId: deriveCollectionId('places'), collectionName: 'places', id: 'aaaaaaaaaaaaaaa', name: 'x', code: 'ABC', loc: { lon: 0, lat: 0 }, pin: { lon: 1, lat: 2 },
        notes: '', seen: '2024-05-01 10:00:00.000Z', opens: null, mail: '', body: '<p>x</p>', stamped: '2024-05-01 10:00:00.000Z', touched: null, site: '', closes: null, tags: [], created: '2024-05-01 10:00:00.000Z', updated: '2024-05-01 10:00:00.000Z',
      });
      const ok = { name: 'x', pin: { lon: 1, lat: 2 }, body: '<p>x</p>' };
      expectMatchesSchema(schemaOf, 'PlacesCreate', { ...ok, tags: [] });
      expectMatchesSchema(schemaOf, 'PlacesCreate', { ...ok, tags: ['aaaaaaaaaaaaaaa', 'bbbbbbbbbbbbbbb'] });
      const bad = [{ name: 'x', body: 'x' }, { ...ok, pin: { lon: 1 } }, { ...ok, pin: { lon: 1, lat: 91 } }, { ...ok, pin: { lon: 181, lat: 1 } }, { ...ok, pin: [1, 2] }, { ...ok, body: '' }, { ...ok, tags: ['aaaaaaaaaaaaaaa'] }];
      for (const value of bad) expect([value, schemaOf('PlacesCreate')(value)]).toEqual([value, false]);
    });
  });

  describe('fields with rules of their own (issue 46)', () => {
    const people: CollectionDefinition[] = [
      {
        name: 'people',
        fields: [
          { name: 'nick', type: 'text', required: true },
          { name: 'email', type: 'email', required: true, help: 'Where to write.', rules: { view: 'id = @request.auth.id', update: 'id = @request.auth.id' } },
          { name: 'secret', type: 'text', rules: { view: null } },
          { name: 'score', type: 'number', rules: { create: null, update: "@request.auth.role = 'editor'" } },
          { name: 'open', type: 'text', rules: { view: '', create: '' } },
        ],
      },
    ];

    test('a field with a view rule is optional in the record; create and update rules say who may set it; the document stays valid', async () => {
      const doc = build(people);
      await expectValidOpenApi(doc);
      const record = schemasOf(doc).PeopleRecord;
      expect(record.required).toEqual(['collectionId', 'collectionName', 'id', 'nick', 'score', 'open', 'created', 'updated']);
      expect(propertiesOf(doc, 'PeopleRecord').email.description).toBe(
        "Where to write. Absent where the field's view rule refuses the caller (superusers always see it), as a hidden field is.",
      );
      expect(propertiesOf(doc, 'PeopleRecord').secret.description).toBe('Superusers only: absent for everyone else, as a hidden field is.');
      expect(propertiesOf(doc, 'PeopleRecord').open).not.toHaveProperty('description');
      // Required-ness of a create body is the field's own, rules or not.
      expect(schemasOf(doc).PeopleCreate.required).toEqual(['nick', 'email']);
      expect(propertiesOf(doc, 'PeopleCreate').email.description).toBe('Where to write.');
      expect(propertiesOf(doc, 'PeopleCreate').score.description).toMatch(/Set by superusers only: sending it otherwise answers 403\.$/);
      expect(propertiesOf(doc, 'PeopleUpdate').email.description).toMatch(/Set only where the field's update rule admits the caller \(superusers always\): sending it otherwise answers 403\.$/);
      for (const key of ['score', 'score+', 'score-']) expect(propertiesOf(doc, 'PeopleUpdate')[key].description).toMatch(/the field's update rule admits the caller/);
      const list = (doc.paths as Record<string, { get: { description: string } }>)['/api/collections/people/records'].get;
      expect(list.description).toMatch(/In filter and sort, `email`, `secret` read as empty on each record whose field view rule refuses the caller\.$/);
      // The expressions stay private, as the collection's rules do.
      expect(JSON.stringify(doc)).not.toContain('@request.auth');
    });

    test('its schemas still accept a record without the guarded fields', () => {
      const schemaOf = compileComponentSchemas(build(people));
      const record = { collectionId: deriveCollectionId('people'), collectionName: 'people', id: 'aaaaaaaaaaaaaaa', nick: 'x', score: 0, open: '', created: '2024-05-01 10:00:00.000Z', updated: '2024-05-01 10:00:00.000Z' };
      expectMatchesSchema(schemaOf, 'PeopleRecord', record);
      expectMatchesSchema(schemaOf, 'PeopleRecord', { ...record, email: 'a@example.com', secret: 's' });
    });
  });

  describe('search and aggregates (issue 47)', () => {
    const defs: CollectionDefinition[] = [
      {
        name: 'notes',
        fields: [
          { name: 'title', type: 'text', required: true },
          { name: 'body', type: 'editor' },
          { name: 'amount', type: 'number' },
          { name: 'kind', type: 'select', values: ['a', 'b'] },
          { name: 'tags', type: 'select', values: ['x', 'y'], maxSelect: 2 },
          { name: 'due', type: 'date' },
          { name: 'meta', type: 'json' },
          { name: 'count', type: 'number', onlyInt: true },
          { name: 'secret', type: 'number', hidden: true },
          { name: 'private', type: 'number', rules: { view: 'id = @request.auth.id' } },
        ],
        indexes: [{ search: ['title', 'body'], language: 'english' }],
      },
      { name: 'plain', fields: [{ name: 'title', type: 'text' }] },
    ];
    type Operation = { parameters: { $ref?: string; name?: string; description?: string }[]; responses: Record<string, { $ref?: string }>; description: string };
    const operation = (doc: OpenApiDocument, path: string) => (doc.paths as Record<string, { get: Operation }>)[path]!.get;
    const names = (op: Operation) => op.parameters.map((p) => p.$ref?.split('/').pop() ?? p.name);

    test('a list documents search, @rank and :highlight where the collection has a search index, and no search elsewhere; the document stays valid', async () => {
      const doc = build(defs);
      await expectValidOpenApi(doc);
      const notes = operation(doc, '/api/collections/notes/records');
      expect(names(notes)).toEqual(['page', 'perPage', 'skipTotal', 'filter', 'search', 'sort', 'fields', 'expand']);
      const param = (name: string) => notes.parameters.find((p) => p.name === name)!;
      expect(param('search').description).toMatch(/search index \(`title`, `body`; language `english`\)/);
      expect(param('sort').description).toMatch(/`-@rank` orders by relevance.*without `search` they are a 400/);
      expect(param('fields').description).toMatch(/`field:highlight`.*<mark>/);
      expect(names(operation(doc, '/api/collections/plain/records'))).toEqual(['page', 'perPage', 'skipTotal', 'filter', 'sort', 'fields', 'expand']);
      expect(names(operation(doc, '/api/collections/notes/aggregate'))).toEqual(['groupBy', 'fields', 'filter', 'search', 'sort', 'page', 'perPage']);
      expect(names(operation(doc, '/api/collections/plain/aggregate'))).toEqual(['groupBy', 'fields', 'filter', 'sort', 'page', 'perPage']);
    });

    test('every collection has an aggregate operation: its errors, and an item schema of exactly what a non-superuser may group and aggregate', () => {
      const doc = build(defs);
      const aggregate = operation(doc, '/api/collections/notes/aggregate');
      expect(Object.keys(aggregate.responses)).toEqual(['200', '400', '401', '403', '500', '503']);
      expect(aggregate.responses['400']).toEqual({ $ref: '#/components/responses/AggregateRejected' });
      expect(aggregate.description).toMatch(/At most 1000 groups \(limits\.maxAggregateGroups\).*aggregate_too_many_groups/);
      expect(aggregate.parameters.find((p) => p.name === 'groupBy')!.description).toMatch(/here: `id`, `created`, `updated`, `title`, `body`, `amount`, `kind`, `due`, `count`\./);
      const item = propertiesOf(doc, 'NotesAggregateGroup');
      // Hidden and view-ruled fields appear nowhere; multi-valued and json fields cannot be grouped.
      expect(Object.keys(item).filter((k) => /secret|private|tags|meta/.test(k))).toEqual([]);
      expect(Object.keys(item)).toEqual(expect.arrayContaining(['title', 'kind', 'due', 'count', 'sum_amount', 'avg_amount', 'min_amount', 'max_due', 'min_title', 'sum_count']));
      expect(Object.keys(item)).not.toContain('sum_title');
      // A field named `count` is the group's value or the count.
      expect(item.count).toMatchObject({ anyOf: [{ type: ['integer', 'null'] }, { type: 'integer', minimum: 0 }] });
      const schemaOf = compileComponentSchemas(doc);
      const page = (items: unknown[]) => ({ page: 1, perPage: 30, totalItems: items.length, totalPages: 1, items });
      expectMatchesSchema(schemaOf, 'NotesAggregate', page([{ kind: 'a', due: null, count: 3, sum_amount: 4.5, avg_amount: null, min_due: '2026-01-02 10:00:00.000Z', max_title: 'z' }, { kind: '' }]));
      // A superuser's answer may carry hidden or view-ruled fields and their aggregates: single values.
      expectMatchesSchema(schemaOf, 'NotesAggregateGroup', { secret: 1, sum_private: 2, min_secret: null });
      for (const wrong of [{ secret: [1] }, { private: {} }, { kind: 'c' }, { sum_amount: 'x' }, { count: 'x' }, { min_due: 'yesterday' }]) {
        expect([wrong, schemaOf('NotesAggregateGroup')(wrong)]).toEqual([wrong, false]);
      }
      expect(Object.keys(propertiesOf(doc, 'PlainAggregateGroup'))).toEqual(['id', 'created', 'updated', 'title', 'count', 'min_id', 'max_id', 'min_created', 'max_created', 'min_updated', 'max_updated', 'min_title', 'max_title']);
    });
  });
});
