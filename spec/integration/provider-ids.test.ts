import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { EventSource } from 'eventsource';
import { SignJWT } from 'jose';
import PocketBase, { ClientResponseError } from 'pocketbase';
import { jwtAuth } from '../../lib/auth/jwt-auth.js';
import type { CollectionDefinition } from '../../lib/index.js';
import { makePng } from '../support/file-fixtures.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/**
 * Issue 45, point 3: provider subjects as record ids. A `users` collection declares its `id` field
 * (docs/collections.md, "The id field") so Clerk, Firebase and Supabase subjects are its ids, and
 * "owner is a relation to users" works with jwtAuth, through the SDK on a listening server; ids
 * that would escape a folder, break a URL or alias another record are refused everywhere.
 */

(globalThis as { EventSource?: unknown }).EventSource = EventSource;

const ISSUER = 'https://issuer.test/';
const AUDIENCE = 'recordbase-tests';
const SECRET = 'a-shared-secret-of-at-least-32-bytes!';

const CLERK = 'user_2NNEqL2nrIRdJ194ndJqAHwEfxC';
const FIREBASE = 'q3Xc9LmN0pR7sT2uV5wY8zA1bC4d';
const SUPABASE = '3f1c2a4e-9b7d-4c8e-a1f0-5d6e7b8c9a01';
/** The users collection's id pattern: each provider's subject, as docs/auth.md shows them. */
const PROVIDER_IDS = '^(user_[A-Za-z0-9]{27}|[A-Za-z0-9]{28}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$';

const collections: CollectionDefinition[] = [
  {
    name: 'users',
    fields: [
      { name: 'id', type: 'text', pattern: PROVIDER_IDS, max: 40 },
      { name: 'name', type: 'text' },
      { name: 'avatar', type: 'file', maxSelect: 1, mimeTypes: ['image/png'], thumbs: ['10x10'] },
      { name: 'badge', type: 'file', maxSelect: 1, protected: true },
    ],
    // A user makes and edits only their own profile: the id the rule reads is the id stored.
    rules: { list: '', view: '@request.auth.id != ""', create: 'id = @request.auth.id', update: 'id = @request.auth.id', delete: null },
  },
  {
    name: 'posts',
    fields: [
      { name: 'title', type: 'text' },
      { name: 'owner', type: 'relation', collection: 'users', required: true },
      { name: 'readers', type: 'relation', collection: 'users', maxSelect: 5 },
    ],
    rules: { list: '', view: '', create: 'owner = @request.auth.id', update: 'owner = @request.auth.id', delete: 'owner = @request.auth.id' },
  },
  { name: 'tags', fields: [{ name: 'label', type: 'text' }], rules: { list: '', view: '', create: '', update: '', delete: '' } },
  // Two possible generated ids and a rule that admits one: what the rule sees must be what is stored.
  {
    name: 'pairs',
    fields: [{ name: 'id', type: 'text', pattern: '^(aa|bb)$', autogeneratePattern: '(aa|bb)' }, { name: 'note', type: 'text' }],
    rules: { list: '', view: '', create: 'id = "aa"', update: null, delete: '' },
  },
  // No autogeneratePattern: a create must name its id.
  { name: 'accounts', fields: [{ name: 'id', type: 'text', pattern: '^acct_[a-z0-9]{6}$' }, { name: 'note', type: 'text' }], rules: { list: '', view: '', create: '', update: null, delete: null } },
];

function sign(sub: string, claims: Record<string, unknown> = {}): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setSubject(sub).setIssuer(ISSUER).setAudience(AUDIENCE).setIssuedAt().setExpirationTime('5m').sign(new TextEncoder().encode(SECRET));
}

function errorOf(err: unknown): { status: number; data: Record<string, unknown> } {
  expect(err).toBeInstanceOf(ClientResponseError);
  const e = err as ClientResponseError;
  return { status: e.status, data: e.response as Record<string, unknown> };
}

describe.each(testEngines())('provider user ids as record ids (%s)', (engine) => {
  let app: TestApp;
  const tokens: Record<string, string> = {};
  const as = (sub: string) => ({ authorization: `Bearer ${tokens[sub]}` });
  const client = (sub?: string) => {
    const pb = new PocketBase(app.baseUrl + '/backend');
    pb.autoCancellation(false);
    if (sub) pb.authStore.save(tokens[sub]!);
    return pb;
  };

  beforeAll(async () => {
    app = await startTestApp(engine, { collections, openapi: true, auth: jwtAuth({ secret: SECRET, issuer: ISSUER, audience: AUDIENCE, superuserClaim: 'role', superuserValue: 'admin' }) });
    for (const sub of [CLERK, FIREBASE, SUPABASE, 'user_AAAAAAAAAAAAAAAAAAAAAAAAAAA', 'user_aaaaaaaaaaaaaaaaaaaaaaaaaaa']) tokens[sub] = await sign(sub);
    tokens.root = await sign('rootrrrrrrrrrrr', { role: 'admin' });
  }, 60_000);

  afterAll(async () => {
    await app?.close();
  });

  test('each provider\'s user makes its profile under its subject, owns posts under "owner = @request.auth.id", and lists and expands them (SDK)', async () => {
    for (const sub of [CLERK, FIREBASE, SUPABASE]) {
      const pb = client(sub);
      const user = await pb.collection('users').create({ id: sub, name: `name of ${sub.slice(0, 8)}` });
      expect(user.id).toBe(sub);
      const post = await pb.collection('posts').create({ title: `by ${sub.slice(0, 8)}`, owner: sub, readers: [CLERK] });
      expect(post.owner).toBe(sub);
      // Another user cannot make a post owned by this one.
      if (sub !== CLERK) {
        const refused = await client(CLERK).collection('posts').create({ title: 'forged', owner: sub }).catch((err: unknown) => err);
        expect(errorOf(refused).status).toBe(403);
      }
      expect((await pb.collection('users').getOne(sub)).id).toBe(sub);
      const updated = await pb.collection('posts').update(post.id, { title: 'edited' });
      expect(updated.title).toBe('edited');
    }
    // Users are visible to signed-in callers only (the view rule), so expand as one.
    const reader = client(FIREBASE);
    const list = await reader.collection('posts').getFullList({ filter: reader.filter('owner = {:owner}', { owner: SUPABASE }), expand: 'owner,readers' });
    expect(list).toHaveLength(1);
    expect(list[0]!.expand?.owner).toMatchObject({ id: SUPABASE, collectionName: 'users' });
    expect(list[0]!.expand?.readers.map((r: { id: string }) => r.id)).toEqual([CLERK]);
    const back = await client(CLERK).collection('users').getOne(CLERK, { expand: 'posts_via_owner' });
    expect(back.expand?.posts_via_owner.map((p: { owner: string }) => p.owner)).toEqual([CLERK]);
    // A profile is the user's own: another subject cannot create it, nor edit it.
    const stolen = await client(FIREBASE).collection('users').create({ id: 'user_2NNEqL2nrIRdJ194ndJqAHwEfxD' }).catch((err: unknown) => err);
    expect(errorOf(stolen).status).toBe(403);
    const edited = await client(FIREBASE).collection('users').update(CLERK, { name: 'x' }).catch((err: unknown) => err);
    expect(errorOf(edited).status).toBe(404);
  });

  test('files, thumbnails, file tokens, batch and realtime under a provider id (SDK)', async () => {
    const pb = client(CLERK);
    const png = makePng(40, 30);
    const user = await pb.collection('users').update(CLERK, { avatar: new File([png], 'me.png', { type: 'image/png' }), badge: new File(['secret badge'], 'badge.txt', { type: 'text/plain' }) });
    const original = await fetch(pb.files.getURL(user, user.avatar));
    expect(original.status).toBe(200);
    expect(Buffer.from(await original.arrayBuffer())).toEqual(png);
    const thumb = await fetch(pb.files.getURL(user, user.avatar, { thumb: '10x10' }));
    expect(thumb.status).toBe(200);
    expect(thumb.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await thumb.arrayBuffer())).not.toEqual(png);
    // The protected file: 401 without a token, 200 with the SDK's file token.
    expect((await fetch(pb.files.getURL(user, user.badge))).status).toBe(401);
    const token = await pb.files.getToken();
    const protectedFile = await fetch(pb.files.getURL(user, user.badge, { token }));
    expect(protectedFile.status).toBe(200);
    expect(await protectedFile.text()).toBe('secret badge');
    // The files live in one folder named by the id, inside the collection's.
    expect(readdirSync(path.join(app.dataDir, 'storage', user.collectionId))).toContain(CLERK);

    const batch = pb.createBatch();
    batch.collection('posts').create({ title: 'batched', owner: CLERK });
    batch.collection('posts').upsert({ id: 'batchpost000001', title: 'upserted', owner: CLERK });
    const results = await batch.send();
    expect(results.map((r) => r.status)).toEqual([200, 200]);
    expect(results[1]!.body.id).toBe('batchpost000001');

    // Realtime: the record's own topic, `users/<provider id>`.
    const seen: string[] = [];
    let arrived!: () => void;
    const event = new Promise<void>((resolve) => (arrived = resolve));
    const unsubscribe = await pb.collection('users').subscribe(CLERK, (e) => {
      seen.push(`${e.action} ${e.record.id} ${e.record.name}`);
      arrived();
    });
    await pb.collection('users').update(CLERK, { name: 'renamed' });
    await event;
    expect(seen).toEqual([`update ${CLERK} renamed`]);
    await unsubscribe();
  }, 30_000);

  /** Ids no collection may hold, whatever its pattern, and two that this one's settings refuse. */
  const refusedIds: [string, string][] = [
    ['../etc', 'validation_invalid_format'],
    ['..%2f..%2fetc', 'validation_invalid_format'],
    ['user_/../../../etc/passwd', 'validation_invalid_format'],
    ['user_\u0000AAAAAAAAAAAAAAAAAAAAAAAAA', 'validation_invalid_format'],
    ['auth0|5f7c8ec7c33c6c004bbafe82', 'validation_invalid_format'],
    ['CON', 'validation_invalid_format'],
    ['x'.repeat(10_000), 'validation_invalid_format'],
    ['u'.repeat(41), 'validation_max_text_constraint'],
    ['abcdefghijklmno', 'validation_invalid_format'],
  ];
  test.each(refusedIds.map(([id, code]) => [JSON.stringify(id).slice(0, 40), code, id]))('a create with id %s is a 422 %s, and nothing is stored', async (_label, code, id) => {
    // Signed in as that subject (so the create rule would pass), where a header can carry it.
    if (id.length < 1000) tokens[id] ??= await sign(id);
    const res = await app.http.post('/backend/api/collections/users/records').set(id.length < 1000 ? as(id) : {}).send({ id, name: 'attacker' });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ status: 422, message: expect.any(String), data: { id: { code, message: expect.any(String) } } });
    expect((await app.http.get('/backend/api/collections/users/records').query({ filter: 'name = "attacker"' })).body.totalItems).toBe(0);
  });

  const unsafePaths = ['..%2f..%2fetc', '%2e%2e', 'a%00b', 'auth0%7Cabc', 'x'.repeat(5000), 'user_2NNEqL2nrIRdJ194ndJqAHwEfxC%2f..'];
  test.each(unsafePaths.map((id) => [id.slice(0, 40), id]))('a path naming the id %s is a JSON 404 for records and files', async (_label, id) => {
    const record = await app.http.get(`/backend/api/collections/users/records/${id}`).set(as(CLERK));
    expect(record.status).toBe(404);
    expect(record.body).toMatchObject({ status: 404, data: {} });
    const file = await app.http.get(`/backend/api/files/users/${id}/me.png`);
    expect(file.status).toBe(404);
    expect(file.body).toMatchObject({ status: 404 });
    const del = await app.http.delete(`/backend/api/collections/posts/records/${id}`).set(as(CLERK));
    expect(del.status).toBe(404);
  });

  test('a relation is checked against the target: an unsafe id, a default id of another collection, or an absent one is validation_missing_rel_records', async () => {
    const tag = (await app.http.post('/backend/api/collections/tags/records').send({ label: 't' })).body;
    expect(tag.id).toMatch(/^[a-z0-9]{15}$/);
    for (const owner of ['../x', 'user_2NNEqL2nrIRdJ194ndJqAHwEfxC/..', tag.id, 'user_ZZZZZZZZZZZZZZZZZZZZZZZZZZZ', 'auth0|abc', 'x'.repeat(200)]) {
      tokens[owner] ??= await sign(owner);
      const res = await app.http.post('/backend/api/collections/posts/records').set(as(owner)).send({ title: 'p', owner });
      expect([res.status, res.body.data]).toEqual([422, { owner: { code: 'validation_missing_rel_records', message: expect.any(String) } }]);
    }
    // A default-id collection still refuses a provider id, and still generates its own.
    const wrong = await app.http.post('/backend/api/collections/tags/records').send({ id: CLERK, label: 'x' });
    expect([wrong.status, wrong.body.data.id?.code]).toEqual([422, 'validation_invalid_format']);
  });

  test('ids that differ only by case are one id: the second is refused (a folder on a case-insensitive disk)', async () => {
    const upper = 'user_AAAAAAAAAAAAAAAAAAAAAAAAAAA';
    const lower = 'user_aaaaaaaaaaaaaaaaaaaaaaaaaaa';
    expect((await app.http.post('/backend/api/collections/users/records').set(as(upper)).send({ id: upper })).status).toBe(200);
    const twin = await app.http.post('/backend/api/collections/users/records').set(as(lower)).send({ id: lower });
    expect([twin.status, twin.body.data]).toEqual([422, { id: { code: 'validation_not_unique', message: expect.any(String) } }]);
  });

  test('case twins racing each other: one create commits, the others are 422, never two records (a unique index on lower(id))', async () => {
    const variants = Array.from({ length: 8 }, (_, i) => `user_${[0, 1, 2].map((bit) => ((i >> bit) & 1 ? 'B' : 'b')).join('')}${'b'.repeat(24)}`);
    for (const id of variants) tokens[id] ??= await sign(id);
    const results = await Promise.all(variants.map((id) => app.http.post('/backend/api/collections/users/records').set(as(id)).send({ id })));
    expect(results.map((res) => res.status).sort()).toEqual([200, 422, 422, 422, 422, 422, 422, 422]);
    for (const res of results.filter((r) => r.status === 422)) expect(res.body.data).toEqual({ id: { code: 'validation_not_unique', message: expect.any(String) } });
    const stored = await app.database.db.raw(`SELECT count(*)::int AS n FROM "users" WHERE lower("id") = ?`, [variants[0]!.toLowerCase()]);
    expect((stored.rows as { n: number }[])[0]!.n).toBe(1);
    // The check is the index's: a lookup, not a scan of the table.
    const index = await app.database.db.raw(`SELECT indexdef FROM pg_indexes WHERE tablename = 'users' AND indexname = 'idx_users_id_lower'`);
    expect((index.rows as { indexdef: string }[]).map((row) => row.indexdef)).toEqual([expect.stringMatching(/^CREATE UNIQUE INDEX idx_users_id_lower ON .*users USING btree \(lower\(id\)\)$/)]);
  });

  test('the create rule sees the id the insert stores', async () => {
    for (let i = 0; i < 24; i++) {
      const res = await app.http.post('/backend/api/collections/pairs/records').send({});
      if (res.status === 403) continue;
      expect([res.status, res.body.id]).toEqual([200, 'aa']);
      expect((await app.http.delete('/backend/api/collections/pairs/records/aa')).status).toBe(204);
    }
    expect((await app.http.get('/backend/api/collections/pairs/records')).body.totalItems).toBe(0);
  });

  test('without an autogeneratePattern a create must send its id', async () => {
    const none = await app.http.post('/backend/api/collections/accounts/records').send({});
    expect([none.status, none.body.data]).toEqual([422, { id: { code: 'validation_required', message: expect.any(String) } }]);
    const made = await app.http.post('/backend/api/collections/accounts/records').send({ id: 'acct_abc123' });
    expect([made.status, made.body.id]).toEqual([200, 'acct_abc123']);
  });

  test('the OpenAPI document states each collection\'s id and a relation to users takes any safe id', async () => {
    const doc = (await app.http.get('/backend/api/openapi.json')).body;
    const schemas = doc.components.schemas;
    expect(schemas.UsersCreate.properties.id).toMatchObject({ type: 'string', pattern: PROVIDER_IDS, minLength: 1, maxLength: 40 });
    expect(schemas.UsersRecord.properties.id.pattern).toBe('^[A-Za-z0-9_-]{1,100}$');
    expect(schemas.PostsCreate.properties.owner.pattern).toBe('^[A-Za-z0-9_-]{1,100}$');
    expect(schemas.TagsRecord.properties.id.pattern).toBe('^[a-z0-9]{15}$');
    expect(schemas.AccountsCreate.properties.id.description).toMatch(/^Required/);
  });
});
