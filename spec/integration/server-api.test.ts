import { createReadStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { BadRequestError, fileFromPath, ForbiddenError, NotFoundError, RecordbaseError, ValidationError, type CollectionDefinition, type RecordHooks } from '../../lib/index.js';
import { listFilesUnder, readStoredFile } from '../support/file-fixtures.js';
import { ALICE, P, ROOT } from '../support/query-fixtures.js';
import { createMemoryLogger, startTestApp, TEST_IDENTITIES, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/**
 * The server API (records.api) and hooks: the host's own code through the same rules,
 * validation, files and transactions as HTTP, and hooks that shape and refuse writes on every path.
 */

const alice = TEST_IDENTITIES['token-alice']!;
const bob = TEST_IDENTITIES['token-bob']!;
const api = (p: string) => `/backend/api/collections/${p}`;

function collections(): CollectionDefinition[] {
  return [
    { name: 'users', fields: [{ name: 'name', type: 'text' }], rules: { list: '', view: '' } },
    {
      name: 'notes',
      id: 'pbc_notes00001',
      fields: [
        { name: 'title', type: 'text', required: true, max: 50 },
        { name: 'owner', type: 'relation', collection: 'users' },
        { name: 'views', type: 'number' },
        { name: 'tags', type: 'select', values: ['a', 'b', 'c'], maxSelect: 3 },
        { name: 'secret', type: 'text', hidden: true },
        { name: 'docs', type: 'file', maxSelect: 4 },
        { name: 'status', type: 'select', values: ['open', 'locked'] },
      ],
      rules: {
        list: 'owner = @request.auth.id',
        view: 'owner = @request.auth.id',
        create: '@request.auth.id != ""',
        update: 'owner = @request.auth.id',
        delete: 'owner = @request.auth.id',
      },
    },
    {
      name: 'replies',
      fields: [
        { name: 'text', type: 'text' },
        { name: 'note', type: 'relation', collection: 'notes', cascadeDelete: true },
      ],
      rules: { list: '', view: '', create: '', update: '', delete: '' },
    },
    { name: 'audit', fields: [{ name: 'line', type: 'text' }], rules: {} },
  ];
}

describe.each(testEngines())('server API and hooks on %s', (engine) => {
  let app: TestApp;
  const logger = createMemoryLogger();
  /** What the after-hooks saw, read through a separate connection: committed data only. */
  const afterSeen: string[] = [];
  /** The records afterDelete was given, by id. */
  const deletedRecords = new Map<string, Record<string, unknown>>();
  const hooks: RecordHooks = {
    '*': {
      afterDelete: async (e) => {
        afterSeen.push(`deleted ${e.collection.name}/${String(e.record.id)}`);
        deletedRecords.set(String(e.record.id), { ...e.record });
      },
    },
    notes: {
      beforeCreate: async (e) => {
        // "owner from the caller": whoever creates a note owns it, whatever the body says.
        e.data.owner = e.identity?.id && !e.identity.superuser ? e.identity.id : (e.data.owner ?? '');
        if (e.data.title === 'refuse me') throw new RecordbaseError({ status: 409, code: 'note_refused', message: 'Notes cannot be called that.' });
        if (e.data.title === 'crash me') throw new TypeError('a bug in the hook');
        if (e.data.title === 'typo me') e.data.titel = 'x';
        if (e.data.title === 'audit me') await e.api.collection('audit').create({ line: `created by ${e.identity?.id ?? 'guest'}` }, { as: 'superuser' });
      },
      beforeUpdate: async (e) => {
        if (e.record.status === 'locked') throw new ForbiddenError('This note is locked.');
        if (typeof e.data.title === 'string') e.data.title = e.data.title.trim();
      },
      beforeDelete: async (e) => {
        if (e.record.status === 'locked') throw new RecordbaseError({ status: 423, code: 'note_locked', message: 'A locked note cannot be deleted.' });
      },
      afterCreate: async (e) => {
        const row = await app.database.db('notes').where({ id: e.record.id }).first();
        afterSeen.push(`created ${String(e.record.id)} ${row ? 'visible' : 'missing'}`);
        if (e.record.title === 'after fails') throw new Error('the after-hook broke');
      },
    },
  };

  beforeAll(async () => {
    app = await startTestApp(engine, { collections: collections(), hooks, logger });
    await app.router.api.collection('users').create({ id: P.alice, name: 'Alice' }, { as: 'superuser' });
    await app.router.api.collection('users').create({ id: P.bob, name: 'Bob' }, { as: 'superuser' });
  });
  afterAll(async () => {
    await app?.close();
  });

  const notes = () => app.router.api.collection('notes');
  const rowCount = async (table: string) => Number((await app.database.db(table).count({ n: '*' }).first())!.n);

  describe('the SDK method names, with and without `as`', () => {
    test('create as an identity: the hook sets the owner; rules, validation and the record shape are HTTP\'s', async () => {
      const note = await notes().create({ title: 'first', owner: P.bob, tags: ['a'], secret: 's1' }, { as: alice });
      expect(note).toMatchObject({ collectionName: 'notes', collectionId: 'pbc_notes00001', title: 'first', owner: P.alice, tags: ['a'] });
      expect(note).not.toHaveProperty('secret');
      expect(note.id).toMatch(/^[a-z0-9]{15}$/);
      // the same record over HTTP
      expect((await app.http.get(api(`notes/records/${note.id}`)).set(ALICE)).body).toEqual(note);
    });

    test('a guest is refused by the create rule (ForbiddenError), and nothing is stored', async () => {
      const before = await rowCount('notes');
      await expect(notes().create({ title: 'guest' })).rejects.toBeInstanceOf(ForbiddenError);
      await expect(notes().create({ title: 'guest' }, { as: null })).rejects.toMatchObject({ status: 403 });
      expect(await rowCount('notes')).toBe(before);
    });

    test('validation errors are ValidationErrors with the same data as HTTP', async () => {
      const err = await notes().create({ title: '', views: 'many' }, { as: alice }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ValidationError);
      expect((err as ValidationError).data).toMatchObject({ title: { code: 'validation_required' }, views: { code: 'validation_invalid_number' } });
    });

    test('getOne, getList, getFullList and getFirstListItem read through the rules', async () => {
      const mine = await notes().create({ title: 'list me', views: 3 }, { as: alice });
      const theirs = await notes().create({ title: 'not yours', views: 4 }, { as: bob });
      expect((await notes().getOne(mine.id, { as: alice })).title).toBe('list me');
      await expect(notes().getOne(theirs.id, { as: alice })).rejects.toBeInstanceOf(NotFoundError);
      await expect(notes().getOne(mine.id)).rejects.toMatchObject({ status: 404, code: 'record_not_found' });

      const page = await notes().getList(1, 50, { as: alice, filter: 'views >= 3', sort: '-views', fields: 'id,title' });
      expect(page.items).toEqual([{ id: mine.id, title: 'list me' }]);
      expect(page).toMatchObject({ page: 1, perPage: 50, totalItems: 1, totalPages: 1 });
      expect((await notes().getList(1, 50)).items).toEqual([]);
      const all = await notes().getFullList({ as: 'superuser', sort: 'created', batch: 2 });
      expect(all.map((n) => n.id)).toEqual(expect.arrayContaining([mine.id, theirs.id]));
      expect(all.every((n) => 'secret' in n)).toBe(true);
      expect((await notes().getFirstListItem(`id = "${theirs.id}"`, { as: bob })).title).toBe('not yours');
      await expect(notes().getFirstListItem(`id = "${theirs.id}"`, { as: alice })).rejects.toBeInstanceOf(NotFoundError);
    });

    test('getFullList reads `batch` as getList reads perPage: 0 or less is the default, a fraction, NaN or Infinity a BadRequestError (issue 42, B3)', async () => {
      for (const title of ['batch 1', 'batch 2', 'batch 3']) await notes().create({ title }, { as: alice });
      const everyId = (await notes().getList(1, 1000, { as: 'superuser', sort: 'created' })).items.map((n) => n.id);
      expect(everyId.length).toBeGreaterThanOrEqual(3);
      for (const batch of [-5, 0, 1, 2, 5000]) {
        expect((await notes().getFullList({ as: 'superuser', sort: 'created', batch })).map((n) => n.id)).toEqual(everyId);
      }
      for (const batch of [NaN, 2.5, Infinity]) {
        const outcome = await settleWithin(notes().getFullList({ as: 'superuser', batch }), 10_000);
        expect(outcome).toBeInstanceOf(BadRequestError);
        expect(outcome).toMatchObject({ status: 400, code: 'invalid_parameter', message: expect.stringContaining('"batch"') });
      }
    });

    test('update takes modifiers, expand and fields; delete cascades and answers true', async () => {
      const note = await notes().create({ title: 'count', views: 1 }, { as: alice });
      const updated = await notes().update(note.id, { 'views+': 2, 'tags+': 'b', title: '  spaced  ' }, { as: alice, expand: 'owner', fields: 'views,tags,title,expand.owner.name' });
      expect(updated).toEqual({ views: 3, tags: ['b'], title: 'spaced', expand: { owner: { name: 'Alice' } } });
      await expect(notes().update(note.id, { title: 'x' }, { as: bob })).rejects.toBeInstanceOf(NotFoundError);
      const reply = await app.router.api.collection('replies').create({ text: 'r', note: note.id });
      expect(await notes().delete(note.id, { as: alice })).toBe(true);
      expect(await app.database.db('replies').where({ id: reply.id }).first()).toBeUndefined();
      await expect(notes().delete(note.id, { as: alice })).rejects.toBeInstanceOf(NotFoundError);
    });

    test('a bad fields parameter is a 400 before anything is written', async () => {
      const before = await rowCount('notes');
      await expect(notes().create({ title: 'nope' }, { as: alice, fields: 'title:upper' })).rejects.toMatchObject({ status: 400 });
      expect(await rowCount('notes')).toBe(before);
    });

    test('an unknown collection is a NotFoundError on the first call', async () => {
      await expect(app.router.api.collection('nope').getList()).rejects.toMatchObject({ status: 404, code: 'collection_not_found' });
    });
  });

  describe('files as { name, data } or fileFromPath', () => {
    let dir: string;
    beforeAll(() => {
      dir = mkdtempSync(path.join(os.tmpdir(), 'rb-api-files-'));
    });
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    test('a Buffer, a stream and a path are stored with sniffed types; the spool is left empty', async () => {
      const file = path.join(dir, 'on-disk.txt');
      writeFileSync(file, 'from a path');
      const note = await notes().create(
        {
          title: 'files',
          docs: [
            { name: 'buffer.txt', data: Buffer.from('from a buffer') },
            { name: 'stream.bin', data: Readable.from([Buffer.from('from '), Buffer.from('a stream')]) },
            fileFromPath(file, 'path.txt'),
          ],
        },
        { as: alice },
      );
      expect(note.docs).toHaveLength(3);
      const read = (name: string) => readStoredFile({ dataDir: app.dataDir, collectionId: 'pbc_notes00001', recordId: note.id, name }).toString();
      expect((note.docs as string[]).map(read)).toEqual(['from a buffer', 'from a stream', 'from a path']);
      expect(listFilesUnder(path.join(app.dataDir, 'uploads-tmp'))).toEqual([]);

      // docs+ appends; the kept names beside a new file stay, the others go (after the commit)
      const [first, second] = note.docs as string[];
      const updated = await notes().update(note.id, { docs: [first, { name: 'new.txt', data: createReadStream(file) }] }, { as: alice });
      expect(updated.docs).toEqual([first, expect.stringMatching(/^new_[a-z0-9]{10}\.txt$/)]);
      expect(listFilesUnder(path.join(app.dataDir, 'storage', 'pbc_notes00001', note.id))).not.toContain(second);
    });

    test('a file over maxFileSize is a 413 and nothing is stored', async () => {
      const small = await startTestApp(engine, { collections: collections(), limits: { maxFileSize: 10 } });
      try {
        await expect(
          small.router.api.collection('notes').create({ title: 'big', docs: { name: 'big.bin', data: Readable.from([Buffer.alloc(11)]) } }, { as: 'superuser' }),
        ).rejects.toMatchObject({ status: 413, code: 'file_too_large' });
        expect(Number((await small.database.db('notes').count({ n: '*' }).first())!.n)).toBe(0);
        expect(listFilesUnder(path.join(small.dataDir, 'uploads-tmp'))).toEqual([]);
      } finally {
        await small.close();
      }
    });
  });

  describe('transactions', () => {
    test('several calls commit together', async () => {
      const ids = await app.router.api.transaction(async (tx) => {
        const a = await tx.collection('notes').create({ title: 'tx a' }, { as: alice });
        const b = await tx.collection('notes').create({ title: 'tx b' }, { as: alice });
        await tx.collection('notes').update(a.id, { 'views+': 1 }, { as: alice });
        // inside the transaction its own writes are visible
        expect((await tx.collection('notes').getOne(a.id, { as: alice })).views).toBe(1);
        return [a.id, b.id];
      });
      expect(Number((await app.database.db('notes').whereIn('id', ids).count({ n: '*' }).first())!.n)).toBe(2);
    });

    test('a throw rolls everything back, files included', async () => {
      const before = { rows: await rowCount('notes'), files: listFilesUnder(path.join(app.dataDir, 'storage')) };
      await expect(
        app.router.api.transaction(async (tx) => {
          await tx.collection('notes').create({ title: 'tx doomed', docs: { name: 'doomed.txt', data: Buffer.from('x') } }, { as: alice });
          throw new Error('changed my mind');
        }),
      ).rejects.toThrow('changed my mind');
      expect(await rowCount('notes')).toBe(before.rows);
      expect(listFilesUnder(path.join(app.dataDir, 'storage'))).toEqual(before.files);
    });

    test('tx cannot be used after the transaction is over', async () => {
      let leaked: { collection(name: string): { getList(): Promise<unknown> } } | undefined;
      await app.router.api.transaction(async (tx) => {
        leaked = tx;
      });
      await expect(leaked!.collection('notes').getList()).rejects.toThrow(/transaction is over/);
    });
  });

  describe('hooks, over HTTP and over the API', () => {
    test('beforeCreate sets the owner from the caller over HTTP too', async () => {
      const res = await app.http.post(api('notes/records')).set(ALICE).send({ title: 'via http', owner: P.bob });
      expect(res.status).toBe(200);
      expect(res.body.owner).toBe(P.alice);
    });

    test('a RecordbaseError from a before-hook reaches the client as the one error body; nothing is written', async () => {
      const before = await rowCount('notes');
      const res = await app.http.post(api('notes/records')).set(ALICE).send({ title: 'refuse me' });
      expect(res.status).toBe(409);
      expect(res.body).toEqual({ status: 409, message: 'Notes cannot be called that.', data: {} });
      await expect(notes().create({ title: 'refuse me' }, { as: alice })).rejects.toMatchObject({ status: 409, code: 'note_refused' });
      expect(await rowCount('notes')).toBe(before);
    });

    test('an unexpected error in a before-hook is a 500 (logged) and nothing is written, files included', async () => {
      const before = { rows: await rowCount('notes'), files: listFilesUnder(path.join(app.dataDir, 'storage')) };
      logger.lines.length = 0;
      const res = await app.http.post(api('notes/records')).set(ALICE).field('title', 'crash me').attach('docs', Buffer.from('x'), 'x.txt');
      expect(res.status).toBe(500);
      expect(res.body).toEqual({ status: 500, message: 'Something went wrong while processing your request.', data: {} });
      expect(logger.lines.some((line) => line.includes('failed'))).toBe(true);
      await expect(notes().create({ title: 'crash me' }, { as: alice })).rejects.toThrow(TypeError);
      expect(await rowCount('notes')).toBe(before.rows);
      expect(listFilesUnder(path.join(app.dataDir, 'storage'))).toEqual(before.files);
    });

    test('a hook setting a field that does not exist is a bug, not a silent no-op', async () => {
      await expect(notes().create({ title: 'typo me' }, { as: alice })).rejects.toThrow(/set "titel", which is not a writable field/);
    });

    test('beforeUpdate refuses a locked note and normalises a title; beforeDelete refuses with its own status', async () => {
      const note = await notes().create({ title: 'lockable' }, { as: alice });
      const trimmed = await app.http.patch(api(`notes/records/${note.id}`)).set(ALICE).send({ title: '  trim  ' });
      expect(trimmed.body.title).toBe('trim');
      await notes().update(note.id, { status: 'locked' }, { as: alice });
      const refused = await app.http.patch(api(`notes/records/${note.id}`)).set(ALICE).send({ title: 'again' });
      expect(refused.status).toBe(403);
      expect(refused.body.message).toBe('This note is locked.');
      const del = await app.http.delete(api(`notes/records/${note.id}`)).set(ALICE);
      expect(del.status).toBe(423);
      expect((await app.database.db('notes').where({ id: note.id }).first()).title).toBe('trim');
    });

    test('a before-hook writes through e.api inside the same transaction: both commit, or neither', async () => {
      const before = await rowCount('audit');
      await notes().create({ title: 'audit me' }, { as: alice });
      expect(await rowCount('audit')).toBe(before + 1);
      await expect(
        app.router.api.transaction(async (tx) => {
          await tx.collection('notes').create({ title: 'audit me' }, { as: alice });
          throw new Error('undo');
        }),
      ).rejects.toThrow('undo');
      expect(await rowCount('audit')).toBe(before + 1);
    });

    test('after-hooks see committed data only, after a commit and before the answer; their errors are logged, never the client\'s', async () => {
      afterSeen.length = 0;
      logger.lines.length = 0;
      const res = await app.http.post(api('notes/records')).set(ALICE).send({ title: 'after fails' });
      expect(res.status).toBe(200);
      expect(afterSeen).toEqual([`created ${res.body.id} visible`]);
      expect(logger.lines.some((line) => line.includes('afterCreate hook of "notes" failed'))).toBe(true);

      afterSeen.length = 0;
      let id = '';
      await app.router.api.transaction(async (tx) => {
        id = (await tx.collection('notes').create({ title: 'after commit' }, { as: alice })).id;
        expect(afterSeen).toEqual([]); // not yet: the transaction is open
      });
      expect(afterSeen).toEqual([`created ${id} visible`]);
    });

    test('delete hooks run for cascaded records too, after the commit', async () => {
      const note = await notes().create({ title: 'cascade' }, { as: alice });
      const reply = await app.router.api.collection('replies').create({ text: 'r', note: note.id });
      afterSeen.length = 0;
      expect((await app.http.delete(api(`notes/records/${note.id}`)).set(ALICE)).status).toBe(204);
      expect(afterSeen.sort()).toEqual([`deleted notes/${note.id}`, `deleted replies/${reply.id}`].sort());
    });

    test('afterDelete gets the whole record as it was, also from a delete of one statement', async () => {
      const note = await notes().create({ title: 'kept' }, { as: alice });
      const reply = await app.router.api.collection('replies').create({ text: 'gone soon', note: note.id });
      // Nothing points at replies, so this delete is one autocommit statement (statement-counts.test.ts).
      expect((await app.http.delete(api(`replies/records/${reply.id}`)).set(ALICE)).status).toBe(204);
      expect(deletedRecords.get(reply.id)).toEqual({ id: reply.id, text: 'gone soon', note: note.id, created: reply.created, updated: reply.updated });
    });

    test('a superuser bypasses rules but not hooks', async () => {
      const res = await app.http.post(api('notes/records')).set(ROOT).send({ title: 'refuse me' });
      expect(res.status).toBe(409);
    });
  });
});

/** What `promise` settled with (its value or its error), or a note that it had not settled within `ms`. */
async function settleWithin(promise: Promise<unknown>, ms: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise((resolve) => {
    timer = setTimeout(() => resolve(`not settled within ${ms} ms`), ms);
  });
  try {
    return await Promise.race([promise.catch((err: unknown) => err), late]);
  } finally {
    clearTimeout(timer);
  }
}
