import path from 'node:path';
import { ClientResponseError } from 'pocketbase';
import { listFilesUnder, readStoredFile } from '../support/file-fixtures.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';
import { ALICE, BOB, sdkClient } from './sdk-fixtures.js';

/** The pocketbase SDK's pb.createBatch() against POST /api/batch: every action, files, failures, rules. */
describe.each(testEngines())('batch through the pocketbase SDK against %s', (engine) => {
  let app: TestApp;
  const NOTES = 'pbc_batchnotes';

  beforeAll(async () => {
    app = await startTestApp(engine, {
      collections: [
        { name: 'users', fields: [{ name: 'name', type: 'text' }], rules: { list: '', view: '', create: '' } },
        {
          name: 'notes',
          id: NOTES,
          fields: [
            { name: 'title', type: 'text', required: true },
            { name: 'views', type: 'number' },
            { name: 'tags', type: 'select', values: ['a', 'b', 'c'], maxSelect: 3 },
            { name: 'owner', type: 'relation', collection: 'users' },
            { name: 'cover', type: 'file' },
            { name: 'docs', type: 'file', maxSelect: 5 },
          ],
          rules: {
            list: 'owner = @request.auth.id',
            view: 'owner = @request.auth.id',
            create: '@request.auth.id != "" && @request.body.owner = @request.auth.id',
            update: 'owner = @request.auth.id',
            delete: 'owner = @request.auth.id',
          },
        },
      ],
    });
    const root = sdkClient(app, 'token-root');
    for (const [id, name] of [[ALICE, 'Alice'], [BOB, 'Bob']]) await root.collection('users').create({ id, name });
  });
  afterAll(async () => {
    await app?.close();
  });

  const rows = async () => Number((await app.database.db('notes').count({ n: '*' }).first())!.n);
  const storage = () => listFilesUnder(path.join(app.dataDir, 'storage'));
  const spool = () => listFilesUnder(path.join(app.dataDir, 'uploads-tmp'));

  test('create, update, upsert (both ways) and delete in one batch, with fields and expand, all committed', async () => {
    const pb = sdkClient(app, 'token-alice');
    const existing = await pb.collection('notes').create({ title: 'existing', owner: ALICE, views: 1 });
    const doomed = await pb.collection('notes').create({ title: 'doomed', owner: ALICE });
    const batch = pb.createBatch();
    batch.collection('notes').create({ title: 'new', owner: ALICE, tags: ['a', 'b'] }, { expand: 'owner', fields: 'title,tags,expand.owner.name' });
    batch.collection('notes').update(existing.id, { 'views+': 2 });
    batch.collection('notes').upsert({ id: existing.id, title: 'upserted' });
    batch.collection('notes').upsert({ id: 'upsertnew000001', title: 'fresh', owner: ALICE });
    batch.collection('notes').delete(doomed.id);
    const results = await batch.send();
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 204]);
    expect(results[0]!.body).toEqual({ title: 'new', tags: ['a', 'b'], expand: { owner: { name: 'Alice' } } });
    expect(results[1]!.body).toMatchObject({ id: existing.id, views: 3, title: 'existing' });
    // an update in a batch changes only what it sends, although the SDK sends it as multipart
    expect(results[2]!.body).toMatchObject({ id: existing.id, views: 3, title: 'upserted', owner: ALICE });
    expect(results[3]!.body).toMatchObject({ id: 'upsertnew000001', title: 'fresh' });
    expect(results[4]!.body).toBeNull();
    expect(await app.database.db('notes').where({ id: doomed.id }).first()).toBeUndefined();
  });

  test('files: Blobs and Files per request, docs+ appends, all written, nothing left in the spool', async () => {
    const pb = sdkClient(app, 'token-alice');
    const note = await pb.collection('notes').create({ title: 'with docs', owner: ALICE, docs: [new File(['old'], 'old.txt')] });
    const batch = pb.createBatch();
    batch.collection('notes').create({ title: 'cover', owner: ALICE, cover: new Blob(['cover bytes']) });
    batch.collection('notes').update(note.id, { docs: [note.docs[0], new File(['added'], 'added.txt')] });
    const results = await batch.send();
    const created = results[0]!.body as { id: string; cover: string };
    expect(created.cover).toMatch(/^blob_[a-z0-9]{10}\.txt$/);
    expect(readStoredFile({ dataDir: app.dataDir, collectionId: NOTES, recordId: created.id, name: created.cover }).toString()).toBe('cover bytes');
    const updated = results[1]!.body as { docs: string[] };
    expect(updated.docs).toHaveLength(2);
    expect(updated.docs[0]).toBe(note.docs[0]);
    expect(readStoredFile({ dataDir: app.dataDir, collectionId: NOTES, recordId: note.id, name: updated.docs[1]! }).toString()).toBe('added');
    expect(spool()).toEqual([]);
  });

  test('a failing request in the middle keeps nothing: no record, no file, no spool; the body names its index', async () => {
    const pb = sdkClient(app, 'token-alice');
    const before = { rows: await rows(), files: storage() };
    const batch = pb.createBatch();
    batch.collection('notes').create({ title: 'first', owner: ALICE, cover: new Blob(['first file']) });
    batch.collection('notes').create({ title: '', owner: ALICE }); // required title: 422
    batch.collection('notes').create({ title: 'third', owner: ALICE });
    const err = await batch.send().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ClientResponseError);
    const response = (err as ClientResponseError).response;
    expect((err as ClientResponseError).status).toBe(400);
    expect(response).toEqual({
      status: 400,
      message: 'Batch transaction failed.',
      data: {
        requests: {
          1: {
            code: 'batch_request_failed',
            message: 'Batch request failed.',
            response: { status: 422, message: 'Failed to validate the submitted data.', data: { title: { code: 'validation_required', message: 'Cannot be blank.' } } },
          },
        },
      },
    });
    expect(await rows()).toBe(before.rows);
    expect(storage()).toEqual(before.files);
    expect(spool()).toEqual([]);
  });

  test('every request passes its own rules as the outer identity; per-request headers change nothing', async () => {
    const bobsNote = await sdkClient(app, 'token-bob').collection('notes').create({ title: 'bob', owner: BOB });
    const before = await rows();
    const batch = sdkClient(app, 'token-alice').createBatch();
    batch.collection('notes').create({ title: 'mine', owner: ALICE });
    batch.collection('notes').update(bobsNote.id, { title: 'taken' }, { headers: { Authorization: 'token-bob' } });
    const err = (await batch.send().catch((e: unknown) => e)) as ClientResponseError;
    expect(err.status).toBe(400);
    expect(err.response.data.requests[1].response.status).toBe(404);
    expect(await rows()).toBe(before);
    expect((await app.database.db('notes').where({ id: bobsNote.id }).first()).title).toBe('bob');

    // a guest batch fails at its first create (403)
    const guest = sdkClient(app).createBatch();
    guest.collection('notes').create({ title: 'guest' });
    const guestErr = (await guest.send().catch((e: unknown) => e)) as ClientResponseError;
    expect(guestErr.response.data.requests[0].response.status).toBe(403);
  });
});
