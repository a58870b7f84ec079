import { ForbiddenError } from '../../lib/index.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { openSse } from '../support/sse-reader.js';
import { createMemoryLogger, startTestApp, TEST_IDENTITIES, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';
import { ALICE, BOB, G, P, ROOT, createRows, expectBadRequest, filterIds, listRecords, ruleCollections, sorted } from '../support/query-fixtures.js';

const GUEST = {};
const api = (path: string) => `/backend/api/collections/${path}`;

/** Seeded docs: owner / status / group / secret (see ruleCollections for the rules). */
const D = {
  aliceDraft: 'doc000000000001', // alice, draft, red
  alicePub: 'doc000000000002', // alice, published, blue
  bobPubRed: 'doc000000000003', // bob, published, red (alice is a member of red)
  bobDraftBlue: 'doc000000000004', // bob, draft, blue
  bobClassified: 'doc000000000005', // bob, published, red, secret 'classified'
  aliceKeep: 'doc000000000006', // alice, published, no group, secret 'keep'
  carolPub: 'doc000000000007', // carol, published, no group
} as const;

describe.each(testEngines())('access rules on %s', (engine) => {
  let app: TestApp;
  const db = () => app.database.db;
  let counter = 0;
  /** A fresh id for records created in a test. */
  const freshId = (prefix: string) => `${prefix}${String(++counter).padStart(15 - prefix.length, '0')}`;

  beforeAll(async () => {
    app = await startTestApp(engine, { collections: ruleCollections() });
    await createRows(app, 'people', [
      { id: P.alice, name: 'Alice' },
      { id: P.bob, name: 'Bob' },
      { id: P.carol, name: 'Carol' },
    ]);
    await createRows(app, 'groups', [
      { id: G.red, name: 'red' },
      { id: G.blue, name: 'blue' },
    ]);
    await createRows(app, 'members', [
      { user: P.alice, group: G.red },
      { user: P.bob, group: G.blue },
    ]);
    await createRows(app, 'docs', [
      { id: D.aliceDraft, title: 'alice draft', status: 'draft', owner: P.alice, group: G.red },
      { id: D.alicePub, title: 'alice pub', status: 'published', owner: P.alice, group: G.blue },
      { id: D.bobPubRed, title: 'bob pub', status: 'published', owner: P.bob, group: G.red },
      { id: D.bobDraftBlue, title: 'bob draft', status: 'draft', owner: P.bob, group: G.blue },
      { id: D.bobClassified, title: 'bob classified', status: 'published', owner: P.bob, group: G.red, secret: 'classified' },
      { id: D.aliceKeep, title: 'alice keep', status: 'published', owner: P.alice, secret: 'keep' },
      { id: D.carolPub, title: 'carol pub', status: 'published', owner: P.carol },
    ]);
  });
  afterAll(async () => {
    await app?.close();
  });

  async function docRow(id: string) {
    return db()('docs').where({ id }).first();
  }

  describe('list rule: an extra condition, silently', () => {
    test.each([
      ['guest', GUEST, [D.alicePub, D.bobPubRed, D.aliceKeep, D.carolPub]],
      ['alice', ALICE, [D.aliceDraft, D.alicePub, D.bobPubRed, D.aliceKeep, D.carolPub]],
      ['bob', BOB, [D.alicePub, D.bobPubRed, D.bobDraftBlue, D.bobClassified, D.aliceKeep, D.carolPub]],
      ['superuser', ROOT, Object.values(D)],
    ])('%s sees only what the rule lets through, and totals count only that', async (_who, headers, expected) => {
      const res = await listRecords(app, 'docs', { filter: "id ~ 'doc'" }, headers);
      expect(res.status).toBe(200);
      expect([...res.ids].sort()).toEqual(sorted(...expected));
      expect(res.body.totalItems).toBe(expected.length);
      const paged = await listRecords(app, 'docs', { filter: "id ~ 'doc'", perPage: '2' }, headers);
      expect(paged.body).toMatchObject({ totalItems: expected.length, totalPages: Math.ceil(expected.length / 2) });
    });

    test('the client filter is ANDed with the rule', async () => {
      expect((await listRecords(app, 'docs', { filter: "status = 'draft'" }, ALICE)).ids).toEqual([D.aliceDraft]);
      expect((await listRecords(app, 'docs', { filter: "status = 'draft'" }, GUEST)).ids).toEqual([]);
      expect((await listRecords(app, 'docs', { filter: "status = 'draft' || status = 'published'" }, GUEST)).body.totalItems).toBe(4);
    });

    test('a rule may read a hidden field that the caller still cannot filter on', async () => {
      const res = await app.http.get(api('docs/records')).query({ filter: "secret = 'classified'" }).set(BOB);
      expectBadRequest(res, 'Invalid filter: unknown field "secret" at position 0.');
      const root = await listRecords(app, 'docs', { filter: "secret = 'classified'" }, ROOT);
      expect(root.ids).toEqual([D.bobClassified]);
    });
  });

  describe('view rule: failing is a 404', () => {
    test.each<[string, Record<string, string>, string[]]>([
      ['guest', GUEST, []],
      ['alice', ALICE, [D.aliceDraft, D.alicePub, D.bobPubRed, D.bobClassified, D.aliceKeep]],
      ['bob', BOB, [D.alicePub, D.bobPubRed, D.bobDraftBlue, D.bobClassified]],
      ['superuser', ROOT, Object.values(D)],
    ])('%s: owner or member of the group (@collection.members)', async (_who, headers, visible) => {
      for (const id of Object.values(D)) {
        const res = await app.http.get(api(`docs/records/${id}`)).set(headers);
        if (visible.includes(id)) {
          expect({ id, status: res.status }).toEqual({ id, status: 200 });
          expect(res.body.id).toBe(id);
          if (headers !== ROOT) expect(res.body).not.toHaveProperty('secret');
        } else {
          expect({ id, status: res.status }).toEqual({ id, status: 404 });
          expect(res.body).toEqual({ status: 404, message: expect.any(String), data: {} });
        }
      }
    });

    test('a new membership row changes what the rule allows', async () => {
      expect((await app.http.get(api(`docs/records/${D.bobDraftBlue}`)).set(ALICE)).status).toBe(404);
      const membership = await app.http.post(api('members/records')).set(ROOT).send({ user: P.alice, group: G.blue });
      expect(membership.status).toBe(200);
      try {
        expect((await app.http.get(api(`docs/records/${D.bobDraftBlue}`)).set(ALICE)).status).toBe(200);
      } finally {
        expect((await app.http.delete(api(`members/records/${membership.body.id}`)).set(ROOT)).status).toBe(204);
      }
      expect((await app.http.get(api(`docs/records/${D.bobDraftBlue}`)).set(ALICE)).status).toBe(404);
    });
  });

  describe('rule decisions: what may be reused, and who answers a null rule', () => {
    test("a back-relation named alone carries the target's view rule for each caller, never the first caller's", async () => {
      // docs visible to alice: her three and bob's two in red (a group she belongs to); to bob:
      // his three and alice's one in blue; to a guest: none (the view rule needs an identity).
      const filter = 'docs_via_owner:length >= 3';
      expect(await filterIds(app, 'people', filter, { headers: ALICE })).toEqual([P.alice]);
      expect(await filterIds(app, 'people', filter, { headers: BOB })).toEqual([P.bob]);
      expect(await filterIds(app, 'people', filter, { headers: GUEST })).toEqual([]);
    });

    test('a null rule is still the same 403 for non-superusers, over HTTP and through the server API', async () => {
      const created = await app.http.post(api('archive/records')).set(ALICE).send({ text: 'null rule' });
      expect(created.status).toBe(200);
      const refused = { status: 403, message: 'Only superusers can perform this action.', data: {} };
      for (const headers of [GUEST, ALICE]) {
        const res = await app.http.delete(api(`archive/records/${created.body.id}`)).set(headers);
        expect({ status: res.status, body: res.body }).toEqual({ status: 403, body: refused });
      }
      const archive = app.router.api.collection('archive');
      for (const as of [null, TEST_IDENTITIES['token-alice']!]) {
        const err = await archive.delete(created.body.id, { as }).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(ForbiddenError);
        expect(err).toMatchObject({ status: 403, code: 'forbidden', message: refused.message });
      }
      expect(await db()('archive').where({ id: created.body.id }).first()).toBeDefined();
      expect(await archive.delete(created.body.id, { as: 'superuser' })).toBe(true);
    });

    test('an error inside a rule compiled for a realtime subscription is a 500 and is logged, not a silent refusal', async () => {
      // The host's identity throws when the list rule reads `@request.auth.team`: a host bug, not a `null` rule.
      const broken = {
        id: P.alice,
        get team(): string {
          throw new TypeError('identity.team is broken');
        },
      };
      const logger = createMemoryLogger();
      const teams = await startTestApp(engine, {
        collections: [{ name: 'boards', fields: [{ name: 'team', type: 'text' }], rules: { ...OPEN_RULES, list: 'team = @request.auth.team' } }],
        auth: (token) => (token === 'token-broken' ? broken : null),
        logger,
      });
      const sse = await openSse(`${teams.baseUrl}/backend/api/realtime`);
      try {
        const clientId = await sse.clientId();
        const res = await teams.http.post('/backend/api/realtime').set('Authorization', 'token-broken').send({ clientId, subscriptions: ['boards/*'] });
        expect(res.status).toBe(500);
        expect(res.body).toEqual({ status: 500, message: expect.any(String), data: {} });
        expect(JSON.stringify(res.body)).not.toContain('identity.team');
        expect(logger.lines.some((line) => line.includes('/api/realtime'))).toBe(true);
      } finally {
        sse.close();
        await teams.close();
      }
    });
  });

  describe('create rule: failing is a 403 and nothing remains', () => {
    test('the rule reads the new row: a user may only create records they own', async () => {
      const id = freshId('newdoc');
      const refused = await app.http.post(api('docs/records')).set(ALICE).send({ id, title: 'for bob', owner: P.bob });
      expect(refused.status).toBe(403);
      expect(refused.body).toEqual({ status: 403, message: expect.any(String), data: {} });
      expect(await docRow(id)).toBeUndefined();
      expect((await app.http.get(api(`docs/records/${id}`)).set(ROOT)).status).toBe(404);

      const ok = await app.http.post(api('docs/records')).set(ALICE).send({ id, title: 'mine', owner: P.alice });
      expect(ok.status).toBe(200);
      expect((await docRow(id)).owner).toBe(P.alice);
    });

    test('a guest is refused; nothing with that title is stored', async () => {
      const before = await db()('docs').count({ n: '*' }).first();
      const res = await app.http.post(api('docs/records')).send({ title: 'guest doc', owner: '' });
      expect(res.status).toBe(403);
      expect(await db()('docs').where({ title: 'guest doc' }).first()).toBeUndefined();
      expect(Number((await db()('docs').count({ n: '*' }).first())!.n)).toBe(Number(before!.n));
    });

    test('a superuser bypasses the create rule', async () => {
      const res = await app.http.post(api('docs/records')).set(ROOT).send({ title: 'root for carol', owner: P.carol });
      expect(res.status).toBe(200);
      expect((await docRow(res.body.id)).owner).toBe(P.carol);
    });

    test('rules on @request.body: values sent, and :isset', async () => {
      const forbidden = await app.http.post(api('notes/records')).set(ALICE).send({ text: 'forbidden' });
      expect(forbidden.status).toBe(403);
      expect(await db()('notes').where({ text: 'forbidden' }).first()).toBeUndefined();

      const tooHigh = await app.http.post(api('notes/records')).set(ALICE).send({ text: 'high', level: 9 });
      expect(tooHigh.status).toBe(403);
      expect(await db()('notes').where({ text: 'high' }).first()).toBeUndefined();

      const fine = await app.http.post(api('notes/records')).set(ALICE).send({ text: 'fine', level: 5 });
      expect(fine.status).toBe(200);
      const noLevel = await app.http.post(api('notes/records')).set(BOB).send({ text: 'no level' });
      expect(noLevel.status).toBe(200);
      expect(Number((await db()('notes').whereIn('text', ['fine', 'no level']).count({ n: '*' }).first())!.n)).toBe(2);

      const guest = await app.http.post(api('notes/records')).send({ text: 'by a guest' });
      expect(guest.status).toBe(403);
      expect(await db()('notes').where({ text: 'by a guest' }).first()).toBeUndefined();
    });
  });

  describe('update rule: failing is a 404 and nothing changes', () => {
    async function aliceDoc(extra: Record<string, unknown> = {}) {
      const res = await app.http.post(api('docs/records')).set(ROOT).send({ title: 'upd', status: 'draft', owner: P.alice, views: 1, ...extra });
      expect(res.status).toBe(200);
      return res.body.id as string;
    }

    test('the owner may update without touching owner', async () => {
      const id = await aliceDoc();
      const res = await app.http.patch(api(`docs/records/${id}`)).set(ALICE).send({ title: 'renamed' });
      expect(res.status).toBe(200);
      expect((await docRow(id)).title).toBe('renamed');
    });

    test('giving the record to someone else is refused (@request.body.owner), nothing changes', async () => {
      const id = await aliceDoc();
      const res = await app.http.patch(api(`docs/records/${id}`)).set(ALICE).send({ title: 'stolen', owner: P.bob, views: 99 });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ status: 404, message: expect.any(String), data: {} });
      expect(await docRow(id)).toMatchObject({ title: 'upd', owner: P.alice, views: 1 });
      const same = await app.http.patch(api(`docs/records/${id}`)).set(ALICE).send({ owner: P.alice, title: 'still mine' });
      expect(same.status).toBe(200);
      expect(await docRow(id)).toMatchObject({ title: 'still mine', owner: P.alice });
    });

    test("another user's record and a guest get 404; rows stay as they were", async () => {
      const id = await aliceDoc();
      for (const headers of [BOB, GUEST]) {
        const res = await app.http.patch(api(`docs/records/${id}`)).set(headers).send({ title: 'hijacked', owner: P.bob });
        expect(res.status).toBe(404);
      }
      expect(await docRow(id)).toMatchObject({ title: 'upd', owner: P.alice });
    });

    test('a superuser bypasses the update rule', async () => {
      const id = await aliceDoc();
      const res = await app.http.patch(api(`docs/records/${id}`)).set(ROOT).send({ owner: P.bob });
      expect(res.status).toBe(200);
      expect((await docRow(id)).owner).toBe(P.bob);
    });

    test('a rule on @request.auth.<field>: editors may update notes, readers may not', async () => {
      const note = await app.http.post(api('notes/records')).set(ROOT).send({ text: 'editable', public: true });
      const byBob = await app.http.patch(api(`notes/records/${note.body.id}`)).set(BOB).send({ text: 'bob was here' });
      expect(byBob.status).toBe(404);
      expect((await db()('notes').where({ id: note.body.id }).first()).text).toBe('editable');
      const byAlice = await app.http.patch(api(`notes/records/${note.body.id}`)).set(ALICE).send({ text: 'alice was here' });
      expect(byAlice.status).toBe(200);
      expect((await db()('notes').where({ id: note.body.id }).first()).text).toBe('alice was here');
    });
  });

  describe('delete rule: failing is a 404 and the row stays', () => {
    test('a rule reading a hidden field protects the record, even from its owner', async () => {
      const res = await app.http.delete(api(`docs/records/${D.aliceKeep}`)).set(ALICE);
      expect(res.status).toBe(404);
      expect(await docRow(D.aliceKeep)).toBeDefined();
    });

    test("another user's record: 404, row stays; the owner may delete an unprotected one", async () => {
      const created = await app.http.post(api('docs/records')).set(ALICE).send({ title: 'to delete', owner: P.alice });
      expect(created.status).toBe(200);
      expect((await app.http.delete(api(`docs/records/${created.body.id}`)).set(BOB)).status).toBe(404);
      expect((await app.http.delete(api(`docs/records/${created.body.id}`)).set(GUEST)).status).toBe(404);
      expect(await docRow(created.body.id)).toBeDefined();
      const res = await app.http.delete(api(`docs/records/${created.body.id}`)).set(ALICE);
      expect(res.status).toBe(204);
      expect(await docRow(created.body.id)).toBeUndefined();
    });

    test('a superuser bypasses the delete rule', async () => {
      const created = await app.http.post(api('docs/records')).set(ROOT).send({ title: 'kept', owner: P.alice, secret: 'keep' });
      expect((await app.http.delete(api(`docs/records/${created.body.id}`)).set(ALICE)).status).toBe(404);
      expect((await app.http.delete(api(`docs/records/${created.body.id}`)).set(ROOT)).status).toBe(204);
      expect(await docRow(created.body.id)).toBeUndefined();
    });

    test('@request.method and @request.auth.role in a delete rule', async () => {
      const note = await app.http.post(api('notes/records')).set(ROOT).send({ text: 'deletable' });
      expect((await app.http.delete(api(`notes/records/${note.body.id}`)).set(BOB)).status).toBe(404);
      expect(await db()('notes').where({ id: note.body.id }).first()).toBeDefined();
      expect((await app.http.delete(api(`notes/records/${note.body.id}`)).set(ALICE)).status).toBe(204);
      expect(await db()('notes').where({ id: note.body.id }).first()).toBeUndefined();
    });
  });

  describe('guests and users', () => {
    test('`@request.auth.id != ""` separates guests from users in list and view', async () => {
      const pub = await app.http.post(api('notes/records')).set(ROOT).send({ text: 'gu-public', public: true });
      const priv = await app.http.post(api('notes/records')).set(ROOT).send({ text: 'gu-private', public: false });
      const filter = "text ~ 'gu-'";
      expect((await listRecords(app, 'notes', { filter }, GUEST)).ids).toEqual([pub.body.id]);
      expect([...(await listRecords(app, 'notes', { filter }, BOB)).ids].sort()).toEqual(sorted(pub.body.id, priv.body.id));
      expect((await app.http.get(api(`notes/records/${priv.body.id}`))).status).toBe(404);
      expect((await app.http.get(api(`notes/records/${priv.body.id}`)).set(BOB)).status).toBe(200);
      expect((await app.http.get(api(`notes/records/${pub.body.id}`))).status).toBe(200);
    });
  });

  describe('bulk delete', () => {
    /**
     * Seeds four tasks under a unique prefix: two of alice's, one private and one shared of bob's,
     * plus subtasks of alice's first and of bob's private task.
     */
    async function seedTasks(prefix: string) {
      const t = {
        alice1: freshId('task'),
        alice2: freshId('task'),
        bobPrivate: freshId('task'),
        bobShared: freshId('task'),
      };
      await createRows(app, 'tasks', [
        { id: t.alice1, title: `${prefix} alice one`, owner: P.alice },
        { id: t.alice2, title: `${prefix} alice two`, owner: P.alice },
        { id: t.bobPrivate, title: `${prefix} bob private`, owner: P.bob },
        { id: t.bobShared, title: `${prefix} bob shared`, owner: P.bob, shared: true },
      ]);
      const s = { a: freshId('sub'), b: freshId('sub'), c: freshId('sub') };
      await createRows(app, 'subtasks', [
        { id: s.a, text: `${prefix} sub a`, task: t.alice1 },
        { id: s.b, text: `${prefix} sub b`, task: t.alice1 },
        { id: s.c, text: `${prefix} sub c`, task: t.bobPrivate },
      ]);
      return { t, s };
    }
    const remaining = async (table: string, prefix: string) =>
      ((await db()(table).where(table === 'tasks' ? 'title' : 'text', 'like', `${prefix} %`).select('id')) as { id: string }[]).map((r) => r.id).sort();
    const bulk = (collection: string, filter: string | undefined, headers: Record<string, string>) => {
      const req = app.http.delete(api(`${collection}/records`)).set(headers);
      return filter === undefined ? req : req.query({ filter });
    };

    test.each([
      ['missing', undefined],
      ['empty', ''],
      ['blank', '   '],
    ])('a %s filter is a 400 and nothing is deleted', async (_what, filter) => {
      const { t, s } = await seedTasks(`nofilter${String(filter?.length ?? 'x')}`);
      const prefix = `nofilter${String(filter?.length ?? 'x')}`;
      for (const headers of [ALICE, ROOT]) {
        const res = await bulk('tasks', filter, headers);
        expectBadRequest(res);
      }
      expect(await remaining('tasks', prefix)).toEqual(sorted(...Object.values(t)));
      expect(await remaining('subtasks', prefix)).toEqual(sorted(...Object.values(s)));
    });

    test('the list rule narrows the selection; cascades follow; {"deleted": N}', async () => {
      const { t, s } = await seedTasks('narrow');
      // bob's private task matches the filter but alice cannot list it, so it is not selected.
      const res = await bulk('tasks', "title ~ 'narrow' && title !~ 'shared'", ALICE);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ deleted: 2 });
      expect(await remaining('tasks', 'narrow')).toEqual(sorted(t.bobPrivate, t.bobShared));
      expect(await remaining('subtasks', 'narrow')).toEqual([s.c]);
    });

    test('all or nothing: one selected record failing the delete rule makes it a 403 and nothing is deleted', async () => {
      const { t, s } = await seedTasks('allornothing');
      const res = await bulk('tasks', "title ~ 'allornothing'", ALICE);
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ status: 403, message: expect.any(String), data: {} });
      expect(await remaining('tasks', 'allornothing')).toEqual(sorted(...Object.values(t)));
      expect(await remaining('subtasks', 'allornothing')).toEqual(sorted(...Object.values(s)));
    });

    test('a filter that matches nothing deletes nothing', async () => {
      const { t } = await seedTasks('nomatch');
      const res = await bulk('tasks', "title = 'nomatch none'", ALICE);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ deleted: 0 });
      expect(await remaining('tasks', 'nomatch')).toEqual(sorted(...Object.values(t)));
    });

    test('a bad filter is a 400 and nothing is deleted', async () => {
      const { t } = await seedTasks('badfilter');
      expectBadRequest(await bulk('tasks', "title ~ 'badfilter' && nope = 1", ROOT), 'Invalid filter: unknown field "nope" at position 23.');
      expectBadRequest(await bulk('tasks', "title ~ 'badfilter' ||", ROOT));
      expect(await remaining('tasks', 'badfilter')).toEqual(sorted(...Object.values(t)));
    });

    test('a guest only selects what the list rule shows, and is refused on shared records', async () => {
      const { t } = await seedTasks('guest');
      const res = await bulk('tasks', "title ~ 'guest'", GUEST);
      expect(res.status).toBe(403);
      expect(await remaining('tasks', 'guest')).toEqual(sorted(...Object.values(t)));
      const none = await bulk('tasks', "title ~ 'guest' && shared = false", GUEST);
      expect(none.status).toBe(200);
      expect(none.body).toEqual({ deleted: 0 });
      expect(await remaining('tasks', 'guest')).toEqual(sorted(...Object.values(t)));
    });

    test('a superuser deletes every match, cascades included', async () => {
      await seedTasks('superbulk');
      const res = await bulk('tasks', "title ~ 'superbulk'", ROOT);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ deleted: 4 });
      expect(await remaining('tasks', 'superbulk')).toEqual([]);
      expect(await remaining('subtasks', 'superbulk')).toEqual([]);
    });

    test('a delete rule reading a hidden field refuses the whole batch', async () => {
      const mine = await app.http.post(api('docs/records')).set(ALICE).send({ title: 'bulkdoc plain', owner: P.alice });
      expect(mine.status).toBe(200);
      const kept = await app.http.post(api('docs/records')).set(ROOT).send({ title: 'bulkdoc kept', owner: P.alice, secret: 'keep' });
      const res = await bulk('docs', "title ~ 'bulkdoc'", ALICE);
      expect(res.status).toBe(403);
      expect(await docRow(mine.body.id)).toBeDefined();
      expect(await docRow(kept.body.id)).toBeDefined();
      const onlyMine = await bulk('docs', "title = 'bulkdoc plain'", ALICE);
      expect(onlyMine.body).toEqual({ deleted: 1 });
      expect(await docRow(mine.body.id)).toBeUndefined();
      expect(await docRow(kept.body.id)).toBeDefined();
    });

    test('a null delete rule is a 403 for non-superusers even when nothing matches; superusers delete', async () => {
      await createRows(app, 'archive', [{ text: 'arch one' }, { text: 'arch two' }, { text: 'other' }]);
      for (const headers of [GUEST, ALICE]) {
        expect((await bulk('archive', "text = 'matches nothing'", headers)).status).toBe(403);
        expect((await bulk('archive', "text ~ 'arch'", headers)).status).toBe(403);
      }
      expect(Number((await db()('archive').count({ n: '*' }).first())!.n)).toBe(3);
      const res = await bulk('archive', "text ~ 'arch'", ROOT);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ deleted: 2 });
      expect(((await db()('archive').select('text')) as { text: string }[]).map((r) => r.text)).toEqual(['other']);
    });
  });
});
