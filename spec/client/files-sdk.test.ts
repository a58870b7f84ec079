import path from 'node:path';
import { Jimp } from 'jimp';
import type PocketBase from 'pocketbase';
import type { RecordModel } from 'pocketbase';
import { ensureBuilt } from '../support/built-package.js';
import { fileCollections, listFilesUnder, makePng, readStoredFile, storedNamePattern } from '../support/file-fixtures.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';
import { ALICE, expectClientError, sdkClient } from './sdk-fixtures.js';

/** Starting a PGlite app takes seconds; building dist/ for the thumbnail worker may take a minute more. */
const SETUP_TIMEOUT = 240_000;
const APP_START_TIMEOUT = 90_000;
const THUMB_TIMEOUT = 120_000;

/** A bare Blob is named `blob` by the SDK; its extension comes from the sniffed type (here text). */
const BLOB_NAME = /^blob_[a-z0-9]{10}\.txt$/;

/** The bytes behind a URL the SDK built, fetched as a browser would follow it. */
async function fetchBytes(url: string): Promise<{ status: number; type: string | null; bytes: Buffer }> {
  const res = await fetch(url);
  return { status: res.status, type: res.headers.get('content-type'), bytes: Buffer.from(await res.arrayBuffer()) };
}

describe.each(testEngines())('files through the pocketbase SDK against %s', (engine) => {
  let app: TestApp;
  let guest: PocketBase;
  let alice: PocketBase;
  let root: PocketBase;
  const png = makePng(300, 200);

  const recordDir = (record: RecordModel) => path.join(app.dataDir, 'storage', record.collectionId, record.id);
  const stored = (record: RecordModel, name: string) =>
    readStoredFile({ dataDir: app.dataDir, collectionId: record.collectionId, recordId: record.id, name });

  beforeAll(async () => {
    await ensureBuilt(); // the thumbnail worker runs from dist/
    app = await startTestApp(engine, { collections: fileCollections() });
    guest = sdkClient(app);
    alice = sdkClient(app, 'token-alice');
    root = sdkClient(app, 'token-root');
  }, SETUP_TIMEOUT);

  afterAll(async () => {
    await app?.close();
  });

  /** An album with a cover and two docs, created through the SDK. */
  function createAlbum(extra: Record<string, unknown> = {}): Promise<RecordModel> {
    return guest.collection('albums').create({
      title: 'x',
      tags: ['a', 'b'],
      meta: { k: 1 },
      published: false,
      views: 3,
      cover: new File([png], 'Cover Photo.PNG', { type: 'image/png' }),
      docs: [new Blob(['hello']), new File(['b'], 'b.txt')],
      ...extra,
    });
  }

  describe('create and update with files', () => {
    test('create sends files as parts, plain values as parts, arrays and objects as @jsonPayload', async () => {
      const record = await createAlbum();
      expect(record).toMatchObject({
        collectionId: 'pbc_albums01',
        collectionName: 'albums',
        title: 'x',
        tags: ['a', 'b'],
        meta: { k: 1 },
        published: false,
        views: 3,
        cover: expect.stringMatching(storedNamePattern('cover_photo', 'png')),
        docs: [expect.stringMatching(BLOB_NAME), expect.stringMatching(storedNamePattern('b', 'txt'))],
      });
      expect(record).not.toHaveProperty('secret');
      expect(stored(record, record.cover).equals(png)).toBe(true);
      expect(stored(record, record.docs[0]).toString()).toBe('hello');
      expect(stored(record, record.docs[1]).toString()).toBe('b');
      expect(listFilesUnder(recordDir(record))).toEqual([record.cover, ...record.docs].sort());
      expect(await guest.collection('albums').getOne(record.id)).toEqual(record);
    });

    test('a multipart update replaces the file and clears the fields it does not send; resent fields are kept', async () => {
      const record = await createAlbum();
      const next = makePng(120, 80);
      const replaced = await guest.collection('albums').update(record.id, { cover: new File([next], 'next.png', { type: 'image/png' }) });
      expect(replaced.cover).toMatch(storedNamePattern('next', 'png'));
      // the interface's rule (4.7): a multipart update clears what it does not send
      expect(replaced).toMatchObject({ title: '', tags: [], meta: null, published: false, views: null, docs: [] });
      expect(listFilesUnder(recordDir(record))).toEqual([replaced.cover]);
      expect(stored(record, replaced.cover).equals(next)).toBe(true);

      // resending: the title as a part, the current cover by its stored name
      const kept = await guest.collection('albums').update(record.id, {
        title: 'kept',
        views: 7,
        tags: ['c'],
        cover: replaced.cover,
        docs: new File(['new doc'], 'new doc.txt'),
      });
      expect(kept).toMatchObject({ title: 'kept', views: 7, tags: ['c'], cover: replaced.cover, docs: [expect.stringMatching(storedNamePattern('new_doc', 'txt'))] });
      expect(listFilesUnder(recordDir(record))).toEqual([kept.cover, kept.docs[0]].sort());
    });

    test("docs+ appends, docs- removes (JSON), cover: null clears; removed files leave storage", async () => {
      const record = await createAlbum();
      const [first, second] = record.docs as string[];
      const appended = await guest.collection('albums').update(record.id, { 'docs+': new File(['third'], 'third.txt') });
      expect(appended.docs).toEqual([first, second, expect.stringMatching(storedNamePattern('third', 'txt'))]);
      expect(stored(record, appended.docs[2]).toString()).toBe('third');
      // multipart: the unsent cover was cleared with the rest
      expect(appended.cover).toBe('');
      expect(listFilesUnder(recordDir(record))).toEqual([...appended.docs].sort());

      const removed = await guest.collection('albums').update(record.id, { 'docs-': [first] });
      expect(removed.docs).toEqual([second, appended.docs[2]]);
      expect(listFilesUnder(recordDir(record))).toEqual([second, appended.docs[2]].sort());

      const withCover = await guest.collection('albums').update(record.id, { cover: new File([png], 'again.png'), docs: removed.docs });
      expect(withCover.cover).toMatch(storedNamePattern('again', 'png'));
      expect(withCover.docs).toEqual(removed.docs);
      const cleared = await guest.collection('albums').update(record.id, { cover: null });
      expect(cleared.cover).toBe('');
      expect(cleared.docs).toEqual(removed.docs); // JSON: only what was sent changes
      expect(listFilesUnder(recordDir(record))).toEqual([...removed.docs].sort());
    });
  });

  describe('pb.files', () => {
    test('getURL downloads the exact bytes; with thumb, a thumbnail of that size', async () => {
      const record = await createAlbum();
      const url = guest.files.getURL(record, record.cover);
      expect(url).toBe(`${app.baseUrl}/backend/api/files/pbc_albums01/${record.id}/${record.cover}`);
      const original = await fetchBytes(url);
      expect(original.status).toBe(200);
      expect(original.type).toBe('image/png');
      expect(original.bytes.equals(png)).toBe(true);

      const small = await fetchBytes(guest.files.getURL(record, record.cover, { thumb: '100x100' }));
      expect(small.status).toBe(200);
      const { bitmap } = await Jimp.fromBuffer(small.bytes);
      expect([bitmap.width, bitmap.height]).toEqual([100, 100]);

      const doc = await fetchBytes(guest.files.getURL(record, record.docs[1], { download: true }));
      expect(doc.status).toBe(200);
      expect(doc.bytes.toString()).toBe('b');
    }, THUMB_TIMEOUT);

    test('a bare Blob (what canvas.toBlob gives) gets the extension of its bytes: served as an image, with thumbnails', async () => {
      const record = await guest.collection('albums').create({ title: 'canvas', cover: new Blob([png]) });
      expect(record.cover).toMatch(/^blob_[a-z0-9]{10}\.png$/);
      const original = await fetchBytes(guest.files.getURL(record, record.cover));
      expect(original.status).toBe(200);
      expect(original.type).toBe('image/png');
      const small = await fetchBytes(guest.files.getURL(record, record.cover, { thumb: '50x40' }));
      expect(small.status).toBe(200);
      const { bitmap } = await Jimp.fromBuffer(small.bytes);
      expect([bitmap.width, bitmap.height]).toEqual([50, 40]);
    }, THUMB_TIMEOUT);

    test('getToken as the owner opens a protected file; without a token the fetch is 401', async () => {
      const scan = Buffer.from('alice scan via the sdk\n');
      const vaultRecord = await root.collection('vault').create({ owner: ALICE, scan: new File([scan], 'scan.txt') });
      expect(vaultRecord.scan).toMatch(storedNamePattern('scan', 'txt'));
      const token = await alice.files.getToken();
      expect(token).toEqual(expect.any(String));
      expect(token.length).toBeGreaterThan(0);
      const withToken = await fetchBytes(alice.files.getURL(vaultRecord, vaultRecord.scan, { token }));
      expect(withToken.status).toBe(200);
      expect(withToken.bytes.equals(scan)).toBe(true);
      const without = await fetchBytes(alice.files.getURL(vaultRecord, vaultRecord.scan));
      expect(without.status).toBe(401);
      expect(JSON.parse(without.bytes.toString())).toEqual({ status: 401, message: expect.any(String), data: {} });
    });
  });

  describe('ClientResponseError statuses', () => {
    test('400 for a bad filter', async () => {
      const err = await expectClientError(guest.collection('albums').getList(1, 10, { filter: 'nope = 1' }), 400);
      expect(err.response.data).toEqual({});
    });

    test('400 for a bad thumb is an error body, not an image', async () => {
      const record = await createAlbum();
      const res = await fetchBytes(guest.files.getURL(record, record.cover, { thumb: '0x0' }));
      expect(res.status).toBe(400);
      expect(JSON.parse(res.bytes.toString())).toEqual({ status: 400, message: expect.any(String), data: {} });
    });

    test('401 for getToken as a guest', async () => {
      const err = await expectClientError(guest.files.getToken(), 401);
      expect(err.response.data).toEqual({});
    });

    test('403 for a create the rule refuses; nothing is stored', async () => {
      const before = listFilesUnder(path.join(app.dataDir, 'storage'));
      const err = await expectClientError(createAlbum({ code: 'refuse' }), 403);
      expect(err.response.data).toEqual({});
      expect(listFilesUnder(path.join(app.dataDir, 'storage'))).toEqual(before);
      expect(await guest.collection('albums').getFullList({ filter: 'code = "refuse"' })).toEqual([]);
    });

    test('404 for getOne of an unknown id', async () => {
      await expectClientError(guest.collection('albums').getOne('zzzzzzzzzzzzzzz'), 404);
    });

    test('422 for a text file as the cover, and for too many docs; nothing is stored', async () => {
      const before = listFilesUnder(path.join(app.dataDir, 'storage'));
      const mime = await expectClientError(
        guest.collection('albums').create({ title: 'bad cover', cover: new File(['not a png at all'], 'cover.png', { type: 'image/png' }) }),
        422,
      );
      expect(mime.response.data.cover.code).toBe('validation_invalid_mime_type');
      const many = await expectClientError(
        guest.collection('albums').create({ title: 'many docs', docs: Array.from({ length: 6 }, (_, i) => new File([`doc ${i}`], `d${i}.txt`)) }),
        422,
      );
      expect(many.response.data.docs.code).toBe('validation_too_many_files');
      expect(listFilesUnder(path.join(app.dataDir, 'storage'))).toEqual(before);
      expect(await guest.collection('albums').getFullList({ filter: 'title = "bad cover" || title = "many docs"' })).toEqual([]);
    });

    test('413 for a file over maxFileSize; nothing is stored', async () => {
      const small = await startTestApp(engine, { collections: fileCollections(), limits: { maxFileSize: 300_000 } });
      try {
        const pb = sdkClient(small);
        const err = await expectClientError(
          pb.collection('albums').create({ title: 'too big', docs: [new File([Buffer.alloc(400_000, 7)], 'big.bin')] }),
          413,
        );
        expect(err.response.data).toEqual({});
        expect(await pb.collection('albums').getFullList()).toEqual([]);
        expect(listFilesUnder(path.join(small.dataDir, 'storage'))).toEqual([]);
        const fits = await pb.collection('albums').create({ title: 'fits', docs: [new File([Buffer.alloc(200_000, 7)], 'ok.bin')] });
        expect(fits.docs).toEqual([expect.stringMatching(storedNamePattern('ok', 'bin'))]);
      } finally {
        await small.close();
      }
    }, APP_START_TIMEOUT);
  });
});
