import PocketBase, { ClientResponseError } from 'pocketbase';
import { createMemoryLogger, startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

const APP_START_TIMEOUT = 90_000;
const ALICE_ID = 'aliceaaaaaaaaaa';
const SECRET_TITLE = 'a title nobody may read in a log';

/** Notes whose update rule also guards the owner a write would store, as PocketBase apps commonly do. */
const notes = {
  name: 'notes',
  fields: [
    { name: 'title', type: 'text' as const },
    { name: 'owner', type: 'text' as const },
    { name: 'image', type: 'file' as const },
  ],
  rules: {
    list: 'owner = @request.auth.id',
    view: 'owner = @request.auth.id',
    create: '@request.auth.id != ""',
    update: 'owner = @request.auth.id && @request.body.owner = @request.auth.id',
    delete: 'owner = @request.auth.id',
  },
};

describe.each(testEngines())('the replace-mode multipart warning on %s', (engine) => {
  let app: TestApp;
  let alice: PocketBase;
  const logger = createMemoryLogger();
  const warnings = () => logger.lines.filter((line) => line.includes('multipart update of'));
  const image = () => new File([Buffer.from('not really a png')], 'holiday-photo.png', { type: 'image/png' });

  beforeAll(async () => {
    app = await startTestApp(engine, { logger, collections: [notes] });
    alice = new PocketBase(`${app.baseUrl}/backend`);
    alice.authStore.save('token-alice');
  }, APP_START_TIMEOUT);
  afterAll(async () => {
    await app?.close();
  });

  it('answers the usual 404 to an SDK update with a file by the owner, and logs one warning naming the collection and the cleared fields', async () => {
    const note = await alice.collection('notes').create({ title: SECRET_TITLE, owner: ALICE_ID });
    const before = warnings().length;
    const err = await alice.collection('notes').update(note.id, { image: image() }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ClientResponseError);
    expect((err as ClientResponseError).status).toBe(404);
    expect((err as ClientResponseError).response).toEqual({ status: 404, message: "The requested record wasn't found.", data: {} });
    const added = warnings().slice(before);
    expect(added).toHaveLength(1);
    expect(added[0]).toContain('"notes"');
    expect(added[0]).toMatch(/clearing the fields it did not send: title, owner\./);
    expect(added[0]).toContain("multipartUpdate: 'merge'");
    for (const secret of ['token-alice', ALICE_ID, SECRET_TITLE, 'holiday-photo', note.id]) expect(added[0]).not.toContain(secret);
    // Nothing was written.
    expect(await alice.collection('notes').getOne(note.id)).toMatchObject({ title: SECRET_TITLE, owner: ALICE_ID, image: '' });
  });

  it('tells the caller exactly what a refusal without cleared fields tells: same status, headers of note and body bytes', async () => {
    const note = await alice.collection('notes').create({ title: 't', owner: ALICE_ID });
    const url = `${app.baseUrl}/backend/api/collections/notes/records/${note.id}`;
    const form = new FormData();
    form.append('image', image());
    const multipart = await fetch(url, { method: 'PATCH', headers: { Authorization: 'token-alice' }, body: form });
    // A JSON update clears nothing; without `owner` in the body the rule refuses it too.
    const json = await fetch(url, { method: 'PATCH', headers: { Authorization: 'token-alice', 'Content-Type': 'application/json' }, body: '{"title":"x"}' });
    const missing = await fetch(`${app.baseUrl}/backend/api/collections/notes/records/zzzzzzzzzzzzzzz`, { method: 'PATCH', headers: { Authorization: 'token-alice' }, body: form });
    expect(multipart.status).toBe(404);
    const body = Buffer.from(await multipart.arrayBuffer());
    for (const other of [json, missing]) {
      expect(other.status).toBe(multipart.status);
      expect(other.headers.get('content-type')).toBe(multipart.headers.get('content-type'));
      expect(Buffer.from(await other.arrayBuffer()).equals(body)).toBe(true);
    }
  });

  it('warns at most once a minute per collection, and never for refusals that cleared nothing or updates the rule allows', async () => {
    const note = await alice.collection('notes').create({ title: 't', owner: ALICE_ID });
    const before = warnings().length;
    for (let i = 0; i < 3; i++) {
      await expect(alice.collection('notes').update(note.id, { image: image() })).rejects.toMatchObject({ status: 404 });
    }
    await expect(alice.collection('notes').update(note.id, { title: 'json' })).rejects.toMatchObject({ status: 404 });
    // Sending every field: the rule allows it, nothing to warn about.
    const updated = await alice.collection('notes').update(note.id, { title: 'kept', owner: ALICE_ID, image: image() });
    expect(updated).toMatchObject({ title: 'kept', owner: ALICE_ID });
    // The earlier tests already warned for "notes" within the minute.
    expect(warnings().length).toBe(before);
  });
});
