import type { CollectionDefinition } from '../../lib/index.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/** The example of docs/collections.md, "Field rules", does what the page says it does. */
const ALICE = 'aliceaaaaaaaaaa';
const BOB = 'bobbbbbbbbbbbbb';

const members: CollectionDefinition = {
  name: 'members',
  fields: [
    { name: 'name', type: 'text' },
    { name: 'email', type: 'email', rules: { view: 'id = @request.auth.id', update: 'id = @request.auth.id' } },
    { name: 'role', type: 'select', values: ['member', 'editor'], rules: { create: null, update: null } },
  ],
  rules: { list: '', view: '', create: '', update: 'id = @request.auth.id', delete: null },
};

describe.each(testEngines())('the field rules example of docs/collections.md on %s', (engine) => {
  let app: TestApp;
  const api = (path: string) => `/backend/api/collections/members/${path}`;

  beforeAll(async () => {
    app = await startTestApp(engine, { collections: [members] });
    for (const [id, name] of [[ALICE, 'Alice'], [BOB, 'Bob']]) {
      const res = await app.http.post(api('records')).set('Authorization', 'token-root').send({ id, name, email: `${name.toLowerCase()}@example.com`, role: 'member' });
      expect(res.status).toBe(200);
    }
  }, 120_000);

  afterAll(async () => {
    await app?.close();
  });

  test("Alice's own record has email, Bob's has no email key; a superuser reads both", async () => {
    const list = await app.http.get(api('records')).query({ sort: 'name' }).set('Authorization', 'token-alice');
    expect(list.status).toBe(200);
    const [alice, bob] = list.body.items as Record<string, unknown>[];
    expect(alice).toMatchObject({ name: 'Alice', email: 'alice@example.com', role: 'member' });
    expect(bob).toMatchObject({ name: 'Bob', role: 'member' });
    expect(bob).not.toHaveProperty('email');
    const root = await app.http.get(api(`records/${BOB}`)).set('Authorization', 'token-root');
    expect(root.body.email).toBe('bob@example.com');
  });

  test('she changes her own e-mail and name; sending role answers 403 naming it and changes nothing; a superuser sets it', async () => {
    const own = await app.http.patch(api(`records/${ALICE}`)).set('Authorization', 'token-alice').send({ name: 'Alice A.', email: 'a@example.com' });
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ name: 'Alice A.', email: 'a@example.com' });
    const role = await app.http.patch(api(`records/${ALICE}`)).set('Authorization', 'token-alice').send({ name: 'Alice B.', role: 'editor' });
    expect({ status: role.status, message: role.body.message }).toEqual({ status: 403, message: 'You may not set the field "role".' });
    const stored = await app.http.get(api(`records/${ALICE}`)).set('Authorization', 'token-root');
    expect(stored.body).toMatchObject({ name: 'Alice A.', role: 'member' });
    const root = await app.http.patch(api(`records/${ALICE}`)).set('Authorization', 'token-root').send({ role: 'editor' });
    expect(root.body.role).toBe('editor');
  });
});
