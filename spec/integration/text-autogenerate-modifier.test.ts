import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import PocketBase from 'pocketbase';
import type { CollectionDefinition } from '../../lib/index.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';
import { ROOT } from '../support/query-fixtures.js';

/**
 * Issue 45, parity: PocketBase's text field takes `"code:autogenerate": "inv-"`, storing the
 * prefix followed by a value generated from the field's autogeneratePattern (core/field_text.go),
 * on create and update; without a pattern, the prefix alone. The result is validated like any
 * value, and the rules see it, not the prefix.
 */

const api = (path: string) => `/backend/api/collections/${path}`;
const collections: CollectionDefinition[] = [
  {
    name: 'invoices',
    fields: [
      { name: 'code', type: 'text', autogeneratePattern: '[0-9]{6}', max: 15 },
      { name: 'label', type: 'text' },
      { name: 'qty', type: 'number' },
      { name: 'tags', type: 'select', values: ['a', 'b'], maxSelect: 2 },
    ],
    // The rule reads the stored value: a plain "blocked-" is refused, "blocked-" + six digits is not.
    rules: { list: '', view: '', create: "@request.body.code != 'blocked-'", update: "@request.body.code != 'blocked-'", delete: '' },
  },
];

describe.each(testEngines())('the text field\'s "name:autogenerate" modifier (%s)', (engine) => {
  let app: TestApp;

  beforeAll(async () => {
    app = await startTestApp(engine, { collections });
  }, 60_000);

  afterAll(async () => {
    await app?.close();
  });

  const create = (body: Record<string, unknown>) => app.http.post(api('invoices/records')).send(body);

  test('create: the prefix followed by a generated value, each create its own', async () => {
    const first = await create({ 'code:autogenerate': 'inv-' });
    const second = await create({ 'code:autogenerate': 'inv-' });
    expect(first.status).toBe(200);
    expect(first.body.code).toMatch(/^inv-[0-9]{6}$/);
    expect(second.body.code).toMatch(/^inv-[0-9]{6}$/);
    const stored = await app.http.get(api(`invoices/records/${first.body.id}`));
    expect(stored.body.code).toBe(first.body.code);
  });

  test('update: the modifier replaces the value with a new prefix and generated value', async () => {
    const { body: created } = await create({ code: 'manual' });
    const res = await app.http.patch(api(`invoices/records/${created.id}`)).send({ 'code:autogenerate': 'upd-' });
    expect(res.status).toBe(200);
    expect(res.body.code).toMatch(/^upd-[0-9]{6}$/);
  });

  test('no prefix (empty or null): a generated value alone; a number prefix reads as text', async () => {
    expect((await create({ 'code:autogenerate': '' })).body.code).toMatch(/^[0-9]{6}$/);
    expect((await create({ 'code:autogenerate': null })).body.code).toMatch(/^[0-9]{6}$/);
    expect((await create({ 'code:autogenerate': 12 })).body.code).toMatch(/^12[0-9]{6}$/);
  });

  test('without an autogeneratePattern the modifier stores the prefix alone, as PocketBase', async () => {
    const res = await create({ 'label:autogenerate': 'plain' });
    expect(res.status).toBe(200);
    expect(res.body.label).toBe('plain');
  });

  test('a prefix that pushes the value past max is the field\'s 422, and nothing is stored', async () => {
    const before = (await app.http.get(api('invoices/records')).query({ perPage: 1 })).body.totalItems;
    const res = await create({ 'code:autogenerate': 'x'.repeat(10) });
    expect(res.status).toBe(422);
    expect(res.body.data.code.code).toBe('validation_max_text_constraint');
    expect((await create({ 'code:autogenerate': 'x'.repeat(9) })).status).toBe(200); // 9 + 6 = 15: at max
    expect((await app.http.get(api('invoices/records')).query({ perPage: 1 })).body.totalItems).toBe(before + 1);
  });

  test('a prefix that is no text (an object, a list of two) is the field\'s 422', async () => {
    for (const prefix of [{ a: 1 }, ['a', 'b']]) {
      const res = await create({ 'code:autogenerate': prefix });
      expect(res.status).toBe(422);
      expect(Object.keys(res.body.data)).toEqual(['code']);
    }
  });

  test('on a field that is not text the key is ignored, as an unknown key is', async () => {
    const res = await create({ 'qty:autogenerate': 5, 'tags:autogenerate': 'a', label: 'x' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ qty: null, tags: [], label: 'x' });
  });

  test('the rule sees the value that is stored, not the prefix sent', async () => {
    expect((await create({ code: 'blocked-' })).status).toBe(403);
    const res = await create({ 'code:autogenerate': 'blocked-' });
    expect(res.status).toBe(200);
    expect(res.body.code).toMatch(/^blocked-[0-9]{6}$/);
    const { body: created } = await create({ code: 'free' });
    // An update the rule refuses is a 404, as PocketBase answers it.
    expect((await app.http.patch(api(`invoices/records/${created.id}`)).send({ code: 'blocked-' })).status).toBe(404);
    expect((await app.http.patch(api(`invoices/records/${created.id}`)).send({ 'code:autogenerate': 'blocked-' })).body.code).toMatch(/^blocked-[0-9]{6}$/);
  });

  test('with the plain key too, the modifier applies after it (its value is what is stored)', async () => {
    expect((await create({ code: 'plain', 'code:autogenerate': 'inv-' })).body.code).toMatch(/^inv-[0-9]{6}$/);
  });

  test('multipart: a part named code:autogenerate works as the JSON key', async () => {
    const res = await app.http.post(api('invoices/records')).set(ROOT).field('code:autogenerate', 'mp-');
    expect(res.status).toBe(200);
    expect(res.body.code).toMatch(/^mp-[0-9]{6}$/);
  });

  test('through the SDK: create and update with the key', async () => {
    const pb = new PocketBase(`${app.baseUrl}/backend`);
    const created = await pb.collection('invoices').create({ 'code:autogenerate': 'sdk-' });
    expect(created.code).toMatch(/^sdk-[0-9]{6}$/);
    const updated = await pb.collection('invoices').update(created.id, { 'code:autogenerate': 'sdk2-' });
    expect(updated.code).toMatch(/^sdk2-[0-9]{6}$/);
  });

  test('a batch takes the key, each request generating its own value', async () => {
    const request = { method: 'POST', url: '/api/collections/invoices/records', body: { 'code:autogenerate': 'b-' } };
    const res = await app.http.post('/backend/api/batch').send({ requests: [request, request] });
    expect(res.status).toBe(200);
    const codes = res.body.map((r: { status: number; body: { code: string } }) => r.body.code);
    for (const code of codes) expect(code).toMatch(/^b-[0-9]{6}$/);
  });

  test('the server API takes the key too', async () => {
    const record = await app.router.api.collection('invoices').create({ 'code:autogenerate': 'api-' }, { as: 'superuser' });
    expect(record.code).toMatch(/^api-[0-9]{6}$/);
  });
});
