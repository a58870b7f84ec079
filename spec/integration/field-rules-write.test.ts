import path from 'node:path';
import type { CollectionDefinition } from '../../lib/index.js';
import { listFilesUnder } from '../support/file-fixtures.js';
import { ALICE, BOB, ROOT } from '../support/query-fixtures.js';
import { recordSentStatements } from '../support/sent-statements.js';
import { startTestApp, TEST_IDENTITIES, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/**
 * Field create and update rules (issue 46, DESIGN 24): a write that sends a field whose rule
 * refuses the caller is a 403 naming the field, and nothing is written (no row, no file), by every
 * spelling and path a write can take. And the errors of a write never tell a caller what a field
 * it cannot read holds (a unique violation on it names neither the field nor the value).
 */

/** Alice is an editor, Bob a reader (spec/support/test-app.ts). */
const EDITOR = '@request.auth.role = "editor"';

function collections(): CollectionDefinition[] {
  return [
    {
      name: 'members',
      fields: [
        { name: 'title', type: 'text' },
        { name: 'role', type: 'select', values: ['member', 'mod'], rules: { create: EDITOR, update: EDITOR } },
        { name: 'badges', type: 'select', values: ['a', 'b', 'c'], maxSelect: 3, rules: { create: EDITOR, update: EDITOR } },
        { name: 'avatar', type: 'file', maxSelect: 2, rules: { create: EDITOR, update: EDITOR } },
        { name: 'level', type: 'number', rules: { update: null } },
        { name: 'email', type: 'text', rules: { view: EDITOR } },
        { name: 'nick', type: 'text', max: 5 },
        { name: 'tier', type: 'select', values: ['free', 'pro'], rules: { view: EDITOR } },
      ],
      indexes: [{ fields: ['email'], unique: true }],
      rules: { list: '', view: '', create: '@request.auth.id != ""', update: '@request.auth.id != ""' },
    },
    {
      name: 'tickets',
      fields: [
        { name: 'title', type: 'text' },
        { name: 'status', type: 'select', values: ['open', 'closed'] },
        // A field rule reads the normalised body as the collection's does: anyone may set "member".
        { name: 'role', type: 'select', values: ['member', 'mod'], rules: { update: `${EDITOR} || @request.body.role = "member"` } },
      ],
      rules: { list: '', view: '', create: '', update: '@request.auth.id != "" && @request.body.status:changed = false' },
    },
  ];
}

/** The statements requests send (spec/support/sent-statements.ts). */
const sent = recordSentStatements();

describe.each(testEngines())('field write rules on %s', (engine) => {
  let app: TestApp;

  beforeAll(async () => {
    // Realtime off: its background statements would be counted with the requests'.
    app = await startTestApp(engine, { collections: collections(), realtime: false });
  });

  afterAll(async () => {
    await app?.close();
  });

  const records = (collection = 'members') => `/backend/api/collections/${collection}/records`;
  const storage = () => listFilesUnder(path.join(app.dataDir, 'storage'));
  /** Every member as stored, in id order (what a refusal must leave as it was). */
  const snapshot = async () => app.database.db('members').select('*').orderBy('id');
  /** A member made by a superuser: role, badges, one file, level. */
  const seed = async (extra: Record<string, unknown> = {}) => {
    const res = await app.http
      .post(records())
      .set(ROOT)
      .field('title', 'seeded')
      .field('role', 'member')
      .field('badges', 'a')
      .field('level', '1')
      .attach('avatar', Buffer.from('first'), 'first.txt');
    expect(res.status).toBe(200);
    if (Object.keys(extra).length > 0) expect((await app.http.patch(`${records()}/${res.body.id}`).set(ROOT).send(extra)).status).toBe(200);
    return res.body as { id: string; avatar: string[] };
  };
  const refusedFor = (field: string) => ({ status: 403, message: `You may not set the field "${field}".`, data: {} });

  describe('create', () => {
    test.each([
      ['plain JSON', { title: 't', role: 'mod' }, 'role'],
      ['the stored default sent as is', { title: 't', role: '' }, 'role'],
      ['badges+', { title: 't', 'badges+': 'b' }, 'badges'],
      ['+badges', { title: 't', '+badges': ['b'] }, 'badges'],
      ['badges-', { title: 't', 'badges-': 'b' }, 'badges'],
      ['two refused fields: the first declared is named', { badges: ['a'], role: 'mod' }, 'role'],
    ])('%s by a caller the rule refuses is a 403 naming the field; nothing stored', async (_label, body, field) => {
      const before = await snapshot();
      const res = await app.http.post(records()).set(BOB).send(body);
      expect(res.status).toBe(403);
      expect(res.body).toEqual(refusedFor(field));
      expect(await snapshot()).toEqual(before);
    });

    test('the allowed caller and a superuser set it; a caller that does not send it is not asked', async () => {
      const alice = await app.http.post(records()).set(ALICE).send({ title: 'a', role: 'mod', 'badges+': ['b', 'c'] });
      expect(alice.status).toBe(200);
      expect(alice.body).toMatchObject({ role: 'mod', badges: ['b', 'c'] });
      const root = await app.http.post(records()).set(ROOT).send({ role: 'mod', level: 3 });
      expect(root.status).toBe(200);
      const bob = await app.http.post(records()).set(BOB).send({ title: 'no guarded field', level: 2 });
      expect(bob.status).toBe(200);
      expect(bob.body).toMatchObject({ role: '', level: 2 });
    });

    test('multipart: a value part, a file upload and @jsonPayload are refused; no row, no file stored', async () => {
      const before = { rows: await snapshot(), files: storage() };
      const value = await app.http.post(records()).set(BOB).field('title', 'm').field('role', 'mod');
      expect(value.body).toEqual(refusedFor('role'));
      const upload = await app.http.post(records()).set(BOB).field('title', 'm').attach('avatar', Buffer.from('bob'), 'bob.txt');
      expect(upload.body).toEqual(refusedFor('avatar'));
      const payload = await app.http.post(records()).set(BOB).field('@jsonPayload', JSON.stringify({ title: 'm', role: 'mod' }));
      expect(payload.body).toEqual(refusedFor('role'));
      expect(await snapshot()).toEqual(before.rows);
      expect(storage()).toEqual(before.files);
      const allowed = await app.http.post(records()).set(ALICE).field('title', 'm').attach('avatar', Buffer.from('alice'), 'alice.txt');
      expect(allowed.status).toBe(200);
      expect(allowed.body.avatar).toHaveLength(1);
    });
  });

  describe('update', () => {
    test.each([
      ['plain JSON', { role: 'mod' }, 'role'],
      ['the stored value unchanged', { role: 'member' }, 'role'],
      ['badges+', { 'badges+': 'b' }, 'badges'],
      ['+badges', { '+badges': 'c' }, 'badges'],
      ['badges-', { 'badges-': 'a' }, 'badges'],
      ['beside an allowed field', { title: 'changed', badges: [] }, 'badges'],
    ])('%s by a caller the rule refuses is a 403 naming the field; the row unchanged', async (_label, body, field) => {
      const { id } = await seed();
      const before = await snapshot();
      const res = await app.http.patch(`${records()}/${id}`).set(BOB).send(body);
      expect(res.status).toBe(403);
      expect(res.body).toEqual(refusedFor(field));
      expect(await snapshot()).toEqual(before);
    });

    test('a null update rule lets only superusers; the allowed caller and a superuser pass', async () => {
      const { id } = await seed();
      for (const caller of [ALICE, BOB]) expect((await app.http.patch(`${records()}/${id}`).set(caller).send({ level: 2 })).body).toEqual(refusedFor('level'));
      expect((await app.http.patch(`${records()}/${id}`).set(ROOT).send({ level: 2, role: 'mod' })).body).toMatchObject({ level: 2, role: 'mod' });
      const alice = await app.http.patch(`${records()}/${id}`).set(ALICE).send({ role: 'member', 'badges+': 'c', 'badges-': 'a' });
      expect(alice.status).toBe(200);
      expect(alice.body).toMatchObject({ role: 'member', badges: ['c'], level: 2 });
      const bob = await app.http.patch(`${records()}/${id}`).set(BOB).send({ title: 'only the title' });
      expect(bob.status).toBe(200);
      expect(bob.body).toMatchObject({ title: 'only the title', role: 'member', badges: ['c'], level: 2 });
    });

    test('multipart: a value, an upload, a file deletion and @jsonPayload are refused; row and files unchanged', async () => {
      const { id, avatar } = await seed();
      const before = { rows: await snapshot(), files: storage() };
      const attempts = [
        app.http.patch(`${records()}/${id}`).set(BOB).field('title', 'm').field('role', 'mod'),
        app.http.patch(`${records()}/${id}`).set(BOB).field('title', 'm').attach('avatar+', Buffer.from('bob'), 'bob.txt'),
        app.http.patch(`${records()}/${id}`).set(BOB).field('title', 'm').attach('avatar', Buffer.from('bob'), 'bob.txt'),
        app.http.patch(`${records()}/${id}`).set(BOB).field('avatar-', avatar[0]!),
        app.http.patch(`${records()}/${id}`).set(BOB).field('@jsonPayload', JSON.stringify({ badges: ['b'] })),
      ];
      const answers = [];
      for (const attempt of attempts) answers.push((await attempt).body);
      expect(answers).toEqual([refusedFor('role'), refusedFor('avatar'), refusedFor('avatar'), refusedFor('avatar'), refusedFor('badges')]);
      expect(await snapshot()).toEqual(before.rows);
      expect(storage()).toEqual(before.files);
    });

    test('a replace-mode multipart update does not clear a field the caller may not set (nor one it may not read)', async () => {
      const { id, avatar } = await seed({ email: 'kept@example.com' });
      const res = await app.http.patch(`${records()}/${id}`).set(BOB).field('title', 'replaced');
      expect(res.status).toBe(200);
      const stored = (await app.http.get(`${records()}/${id}`).set(ROOT)).body;
      expect(stored).toMatchObject({ title: 'replaced', role: 'member', badges: ['a'], avatar, level: 1, email: 'kept@example.com' });
    });

    test('the update rule with @request.body.status:changed keeps working beside a field rule, which reads the body too', async () => {
      const ticket = (await app.http.post(records('tickets')).send({ title: 't', status: 'open', role: 'member' })).body as { id: string };
      const url = `${records('tickets')}/${ticket.id}`;
      expect((await app.http.patch(url).set(BOB).send({ status: 'closed' })).status).toBe(404);
      expect((await app.http.patch(url).set(BOB).send({ status: 'open', title: 'same status' })).status).toBe(200);
      expect((await app.http.patch(url).set(BOB).send({ status: 'open', role: 'mod' })).body).toEqual(refusedFor('role'));
      expect((await app.http.patch(url).set(BOB).send({ status: 'open', role: 'member' })).body).toMatchObject({ role: 'member' });
      expect((await app.http.patch(url).set(BOB).send({ status: 'closed', role: 'mod' })).status).toBe(404);
      expect((await app.http.patch(url).set(ALICE).send({ status: 'open', role: 'mod' })).body).toMatchObject({ role: 'mod', title: 'same status' });
      expect((await app.http.patch(url).set(ALICE).send({ status: 'closed', role: 'member' })).status).toBe(404);
    });
  });

  test('a batch with one refused write is refused whole: nothing written', async () => {
    const { id } = await seed();
    const before = { rows: await snapshot(), files: storage() };
    const res = await app.http
      .post('/backend/api/batch')
      .set(BOB)
      .send({
        requests: [
          { method: 'POST', url: '/api/collections/members/records', body: { title: 'first of the batch' } },
          { method: 'PATCH', url: `/api/collections/members/records/${id}`, body: { 'badges+': 'b' } },
        ],
      });
    expect(res.status).toBe(400);
    expect(res.body.data.requests[1].response).toEqual(refusedFor('badges'));
    const upsert = await app.http
      .post('/backend/api/batch')
      .set(BOB)
      .send({ requests: [{ method: 'PUT', url: '/api/collections/members/records', body: { id, role: 'mod' } }] });
    expect(upsert.body.data.requests[0].response).toEqual(refusedFor('role'));
    const upload = await app.http
      .post('/backend/api/batch')
      .set(BOB)
      .attach('requests.0.avatar', Buffer.from('bob'), 'bob.txt')
      .field('@jsonPayload', JSON.stringify({ requests: [{ method: 'POST', url: '/api/collections/members/records', body: { title: 'with a file' } }] }));
    expect(upload.body.data.requests[0].response).toEqual(refusedFor('avatar'));
    expect(await snapshot()).toEqual(before.rows);
    expect(storage()).toEqual(before.files);
    const allowed = await app.http
      .post('/backend/api/batch')
      .set(ALICE)
      .send({ requests: [{ method: 'PATCH', url: `/api/collections/members/records/${id}`, body: { 'badges+': 'b' } }] });
    expect(allowed.status).toBe(200);
    expect(allowed.body[0].body.badges).toEqual(['a', 'b']);
  });

  test('the server API acting as a caller is refused as HTTP is; as a superuser it passes', async () => {
    const { id } = await seed();
    const members = app.router.api.collection('members');
    const before = await snapshot();
    const bob = TEST_IDENTITIES['token-bob']!;
    await expect(members.create({ title: 'api', role: 'mod' }, { as: bob })).rejects.toMatchObject(refusedFor('role'));
    await expect(members.update(id, { 'badges-': 'a' }, { as: bob })).rejects.toMatchObject(refusedFor('badges'));
    await expect(members.update(id, { level: 5 }, { as: TEST_IDENTITIES['token-alice']! })).rejects.toMatchObject(refusedFor('level'));
    expect(await snapshot()).toEqual(before);
    expect(await members.update(id, { role: 'mod' }, { as: TEST_IDENTITIES['token-alice']! })).toMatchObject({ role: 'mod' });
    expect(await members.update(id, { level: 5 }, { as: 'superuser' })).toMatchObject({ level: 5 });
  });

  test('cost: the field rules ride in the statements the write runs anyway', async () => {
    const { id } = await seed();
    const count = async (send: () => PromiseLike<{ status: number }>) => {
      sent.length = 0;
      expect((await send()).status).toBe(200);
      return sent.length;
    };
    // Each pair: a write without a guarded field, then one that sends guarded fields the caller may set.
    const member = `${records()}/${id}`;
    // An update: the versioned read and the update, whose conditions carry the fields' rules.
    const plainUpdate = await count(() => app.http.patch(member).set(ALICE).send({ title: 'plain' }));
    expect(await count(() => app.http.patch(member).set(ALICE).send({ role: 'mod', 'badges+': 'b' }))).toBe(plainUpdate);
    // A create in a collection with a create rule: its check statement evaluates the fields' rules too.
    const plainCreate = await count(() => app.http.post(records()).set(ALICE).send({ title: 'plain' }));
    expect(await count(() => app.http.post(records()).set(ALICE).send({ title: 'guarded', role: 'mod' }))).toBe(plainCreate);
    // An update rule that reads the body is in the versioned update too; a field without a create rule costs nothing on create.
    const ticketCreate = await count(() => app.http.post(records('tickets')).send({ status: 'open' }));
    const ticket = `${records('tickets')}/${(await app.http.post(records('tickets')).send({ status: 'open' })).body.id}`;
    const ticketUpdate = await count(() => app.http.patch(ticket).set(ALICE).send({ status: 'open', title: 'plain' }));
    expect(await count(() => app.http.patch(ticket).set(ALICE).send({ status: 'open', role: 'mod' }))).toBe(ticketUpdate);
    expect(await count(() => app.http.post(records('tickets')).set(BOB).send({ role: 'mod' }))).toBe(ticketCreate);
  });

  describe('errors never tell what a field the caller cannot read holds', () => {
    test('a unique violation on a view-guarded field: a 400 naming neither field nor value for a non-superuser', async () => {
      await seed({ email: 'taken@example.com' });
      const { id } = await seed();
      for (const caller of [BOB, ALICE]) {
        const create = await app.http.post(records()).set(caller).send({ title: 'dup', email: 'taken@example.com' });
        expect(create.body).toEqual({ status: 400, message: 'Failed to create record.', data: {} });
        const update = await app.http.patch(`${records()}/${id}`).set(caller).send({ email: 'taken@example.com' });
        expect(update.body).toEqual({ status: 400, message: 'Failed to update record.', data: {} });
      }
      const root = await app.http.post(records()).set(ROOT).send({ email: 'taken@example.com' });
      expect(root.status).toBe(422);
      expect(root.body.data).toEqual({ email: { code: 'validation_not_unique', message: 'Value must be unique.' } });
    });

    test('a stored value that no longer validates is not echoed to a caller who may not read its field', async () => {
      const { id } = await seed();
      // A value the declaration no longer allows (its values changed since it was stored).
      await app.database.db('members').where({ id }).update({ tier: 'legacy-secret' });
      const alone = await app.http.patch(`${records()}/${id}`).set(BOB).send({ title: 'other field' });
      expect(alone.body).toEqual({ status: 400, message: 'Failed to update record.', data: {} });
      const beside = await app.http.patch(`${records()}/${id}`).set(BOB).send({ nick: 'far too long' });
      expect(beside.status).toBe(422);
      expect(Object.keys(beside.body.data)).toEqual(['nick']);
      expect(JSON.stringify(beside.body)).not.toMatch(/legacy-secret|tier/);
      const root = await app.http.patch(`${records()}/${id}`).set(ROOT).send({ title: 'other field' });
      expect(root.body.data.tier).toEqual({ code: 'validation_invalid_value', message: 'Invalid value "legacy-secret".' });
    });
  });
});
