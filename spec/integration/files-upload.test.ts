import { rmSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { Readable } from 'node:stream';
import { diskStorage } from '../../lib/files/disk-storage.js';
import type { Storage } from '../../lib/files/storage.js';
import { fileCollections, listFilesUnder, makePng, readStoredFile, storedNamePattern } from '../support/file-fixtures.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

const APP_START_TIMEOUT = 90_000;
const PNG = makePng(30, 20);
const ALBUMS = 'pbc_albums01';
const url = (path: string) => `/backend/api/collections/${path}`;

/** Files in the app's storage and in its upload spool. */
function storageFiles(app: TestApp): string[] {
  return listFilesUnder(path.join(app.dataDir, 'storage'));
}
function spooledFiles(app: TestApp): string[] {
  return listFilesUnder(path.join(app.dataDir, 'uploads-tmp'));
}

/** A storage that delegates to disk but fails the `failOn`-th write (1-based), to prove all-or-nothing. */
function failingStorage(root: string, failOn: { write?: number; delete?: boolean }): Storage & { writes: number } {
  const inner = diskStorage({ root, fsync: false });
  const wrapper = {
    writes: 0,
    async write(key: string, source: Readable) {
      wrapper.writes++;
      if (failOn.write !== undefined && wrapper.writes >= failOn.write) {
        source.destroy();
        throw new Error('disk on fire');
      }
      return inner.write(key, source);
    },
    read: inner.read.bind(inner),
    stat: inner.stat.bind(inner),
    async delete(key: string) {
      if (failOn.delete) throw new Error('cannot delete');
      return inner.delete(key);
    },
    async deletePrefix(prefix: string) {
      if (failOn.delete) throw new Error('cannot delete');
      return inner.deletePrefix(prefix);
    },
    list: inner.list.bind(inner),
  };
  return wrapper;
}

describe.each(testEngines())('multipart uploads on %s', (engine) => {
  let app: TestApp;

  beforeAll(async () => {
    app = await startTestApp(engine, { collections: fileCollections(), limits: { maxFileSize: 300_000, maxBodySize: 700_000 } });
  }, APP_START_TIMEOUT);
  afterAll(async () => {
    await app?.close();
  });

  async function countAlbums(): Promise<number> {
    const res = await app.http.get(url('albums/records')).set('Authorization', 'token-root');
    return res.body.totalItems as number;
  }

  describe('create', () => {
    test('files, repeated parts and @jsonPayload land in one record; the bytes are stored under the record', async () => {
      const res = await app.http
        .post(url('albums/records'))
        .field('title', 'Holiday')
        .field('views', '12')
        .field('published', 'true')
        .field('tags', 'a')
        .field('tags', 'c')
        .field('@jsonPayload', JSON.stringify({ meta: { place: 'sea', days: [1, 2] } }))
        .attach('cover', PNG, 'Beach Photo.PNG')
        .attach('docs', Buffer.from('first doc'), 'notes.txt')
        .attach('docs', Buffer.from('second doc'), 'Ünïcödé file (1).md');
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ title: 'Holiday', views: 12, published: true, tags: ['a', 'c'], meta: { place: 'sea', days: [1, 2] } });
      expect(res.body.cover).toMatch(storedNamePattern('beach_photo', 'png'));
      expect(res.body.docs).toHaveLength(2);
      expect(res.body.docs[0]).toMatch(storedNamePattern('notes', 'txt'));
      expect(res.body.docs[1]).toMatch(storedNamePattern('unicode_file_1', 'md'));
      const stored = (name: string) => readStoredFile({ dataDir: app.dataDir, collectionId: ALBUMS, recordId: res.body.id, name });
      expect(stored(res.body.cover).equals(PNG)).toBe(true);
      expect(stored(res.body.docs[0]).toString()).toBe('first doc');
      expect(stored(res.body.docs[1]).toString()).toBe('second doc');
      expect(spooledFiles(app)).toEqual([]);
    });

    test('several @jsonPayload parts merge, and null clears', async () => {
      const res = await app.http
        .post(url('albums/records'))
        .field('title', 'plain')
        .field('@jsonPayload', JSON.stringify({ tags: ['b'] }))
        .field('@jsonPayload', JSON.stringify({ meta: null, title: 'from payload' }));
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ title: 'from payload', tags: ['b'], meta: null, cover: '', docs: [] });
    });

    test('a file part under an unknown or non-file field is ignored and not stored', async () => {
      const before = storageFiles(app).length;
      const res = await app.http.post(url('albums/records')).field('title', 'x').attach('title2', Buffer.from('zzz'), 'a.txt').attach('views', Buffer.from('1'), 'b.txt');
      expect(res.status).toBe(200);
      expect(storageFiles(app).length).toBe(before);
      expect(spooledFiles(app)).toEqual([]);
    });

    test('malformed bodies are 400 with the error body, and leave nothing behind', async () => {
      const before = await countAlbums();
      const badPayload = await app.http.post(url('albums/records')).field('@jsonPayload', '{nope').attach('docs', Buffer.from('x'), 'x.txt');
      expect(badPayload.status).toBe(400);
      expect(badPayload.body).toEqual({ status: 400, message: expect.stringContaining('@jsonPayload'), data: {} });
      const arrayPayload = await app.http.post(url('albums/records')).field('@jsonPayload', '[1]');
      expect(arrayPayload.status).toBe(400);
      const brackets = await app.http.post(url('albums/records')).field('tags[0]', 'a');
      expect(brackets.status).toBe(400);
      const noBoundary = await app.http.post(url('albums/records')).set('Content-Type', 'multipart/form-data').send('garbage');
      expect(noBoundary.status).toBe(400);
      const truncated = await app.http
        .post(url('albums/records'))
        .set('Content-Type', 'multipart/form-data; boundary=XYZ')
        .send('--XYZ\r\nContent-Disposition: form-data; name="docs"; filename="a.txt"\r\n\r\nhalf a file');
      expect(truncated.status).toBe(400);
      expect(truncated.body.status).toBe(400);
      expect(await countAlbums()).toBe(before);
      expect(spooledFiles(app)).toEqual([]);
    });
  });

  describe('limits and validation', () => {
    test('a file over maxFileSize is a 413 and nothing is stored', async () => {
      const before = { rows: await countAlbums(), files: storageFiles(app) };
      const res = await app.http.post(url('albums/records')).field('title', 'big').attach('docs', Buffer.alloc(300_001, 1), 'big.bin');
      expect(res.status).toBe(413);
      expect(res.body).toEqual({ status: 413, message: expect.any(String), data: {} });
      expect(await countAlbums()).toBe(before.rows);
      expect(storageFiles(app)).toEqual(before.files);
      expect(spooledFiles(app)).toEqual([]);
    });

    test('a file of exactly maxFileSize is accepted', async () => {
      const res = await app.http.post(url('albums/records')).attach('docs', Buffer.alloc(300_000, 2), 'edge.bin');
      expect(res.status).toBe(200);
      expect(readStoredFile({ dataDir: app.dataDir, collectionId: ALBUMS, recordId: res.body.id, name: res.body.docs[0] }).length).toBe(300_000);
    });

    test('files each under maxFileSize but over maxBodySize together are a 413, nothing stored', async () => {
      const before = { rows: await countAlbums(), files: storageFiles(app) };
      const res = await app.http
        .post(url('albums/records'))
        .attach('docs', Buffer.alloc(250_000, 1), 'a.bin')
        .attach('docs', Buffer.alloc(250_000, 1), 'b.bin')
        .attach('docs', Buffer.alloc(250_000, 1), 'c.bin');
      expect(res.status).toBe(413);
      expect(await countAlbums()).toBe(before.rows);
      expect(storageFiles(app)).toEqual(before.files);
      expect(spooledFiles(app)).toEqual([]);
    });

    test('a chunked body (no Content-Length) over maxBodySize is counted as it streams: 413', async () => {
      const before = await countAlbums();
      const boundary = 'chunkyboundary';
      const chunks = [`--${boundary}\r\nContent-Disposition: form-data; name="title"\r\n\r\n${'t'.repeat(200_000)}\r\n`];
      for (const name of ['a', 'b', 'c', 'd']) {
        chunks.push(`--${boundary}\r\nContent-Disposition: form-data; name="docs"; filename="${name}.bin"\r\nContent-Type: application/octet-stream\r\n\r\n${'x'.repeat(200_000)}\r\n`);
      }
      chunks.push(`--${boundary}--\r\n`);
      const status = await new Promise<number>((resolve, reject) => {
        const req = http.request(`${app.baseUrl}${url('albums/records')}`, { method: 'POST', headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Transfer-Encoding': 'chunked' } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        Readable.from(chunks).pipe(req);
      });
      expect(status).toBe(413);
      expect(await countAlbums()).toBe(before);
      expect(spooledFiles(app)).toEqual([]);
    });

    test('a declared Content-Length over maxBodySize is refused before the body is read; nothing is stored', async () => {
      const before = { rows: await countAlbums(), files: storageFiles(app) };
      const res = await app.http.post(url('albums/records')).set('Content-Type', 'multipart/form-data; boundary=x').set('Content-Length', '900000').send(Buffer.alloc(10));
      expect(res.status).toBe(413);
      expect(res.body).toEqual({ status: 413, message: expect.any(String), data: {} });
      expect(await countAlbums()).toBe(before.rows);
      expect(storageFiles(app)).toEqual(before.files);
      expect(spooledFiles(app)).toEqual([]);
    });

    test("the field's maxSize, sniffed MIME type and maxSelect answer 422 under the field's key; nothing is stored", async () => {
      const before = { rows: await countAlbums(), files: storageFiles(app) };
      const tooBig = await app.http.post(url('albums/records')).attach('cover', Buffer.concat([PNG, Buffer.alloc(200_001)]), 'huge.png');
      expect(tooBig.status).toBe(422);
      expect(tooBig.body.data.cover.code).toBe('validation_file_size_limit');
      // text claiming to be a png: the bytes decide
      const fake = await app.http.post(url('albums/records')).attach('cover', Buffer.from('just text'), { filename: 'fake.png', contentType: 'image/png' });
      expect(fake.status).toBe(422);
      expect(fake.body.data.cover.code).toBe('validation_invalid_mime_type');
      const svg = await app.http.post(url('albums/records')).attach('cover', Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"></svg>'), 'x.png');
      expect(svg.body.data.cover.code).toBe('validation_invalid_mime_type');
      let many = app.http.post(url('albums/records'));
      for (let i = 0; i < 6; i++) many = many.attach('docs', Buffer.from(`d${i}`), `d${i}.txt`);
      const tooMany = await many;
      expect(tooMany.status).toBe(422);
      expect(tooMany.body.data.docs.code).toBe('validation_too_many_files');
      const two = await app.http.post(url('albums/records')).attach('cover', PNG, 'a.png').attach('cover', PNG, 'b.png');
      expect(two.status).toBe(422);
      expect(two.body.data.cover.code).toBe('validation_too_many_files');
      // file errors are reported together with the other fields' errors
      const mixed = await app.http.post(url('albums/records')).field('views', 'many').attach('cover', Buffer.from('text'), 'x.png');
      expect(mixed.status).toBe(422);
      expect(Object.keys(mixed.body.data).sort()).toEqual(['cover', 'views']);
      expect(await countAlbums()).toBe(before.rows);
      expect(storageFiles(app)).toEqual(before.files);
      expect(spooledFiles(app)).toEqual([]);
    });

    test('a refused create (rule: 403) and a duplicate (unique: 422) remove the files they wrote', async () => {
      const first = await app.http.post(url('albums/records')).field('code', 'unique-1').attach('docs', Buffer.from('a'), 'a.txt');
      expect(first.status).toBe(200);
      const before = storageFiles(app);
      const refused = await app.http.post(url('albums/records')).field('code', 'refuse').attach('docs', Buffer.from('b'), 'b.txt');
      expect(refused.status).toBe(403);
      const duplicate = await app.http.post(url('albums/records')).field('code', 'unique-1').attach('docs', Buffer.from('c'), 'c.txt');
      expect(duplicate.status).toBe(422);
      expect(duplicate.body.data.code.code).toBe('validation_not_unique');
      expect(storageFiles(app)).toEqual(before);
    });
  });

  describe('update (multipart PATCH follows the interface: unsent fields are cleared)', () => {
    async function createAlbum() {
      const res = await app.http
        .post(url('albums/records'))
        .field('title', 'Original')
        .field('views', '5')
        .field('tags', 'a')
        .attach('cover', PNG, 'cover.png')
        .attach('docs', Buffer.from('one'), 'one.txt')
        .attach('docs', Buffer.from('two'), 'two.txt');
      expect(res.status).toBe(200);
      // the hidden field is set by a superuser through JSON
      const secret = await app.http.patch(url(`albums/records/${res.body.id}`)).set('Authorization', 'token-root').send({ secret: 'keep me' });
      expect(secret.status).toBe(200);
      return res.body as { id: string; cover: string; docs: string[] };
    }

    test('only what is sent stays: an existing file resent by name plus a new upload; the dropped file leaves storage', async () => {
      const album = await createAlbum();
      const res = await app.http.patch(url(`albums/records/${album.id}`)).field('docs', album.docs[1]!).attach('docs', Buffer.from('three'), 'three.txt');
      expect(res.status).toBe(200);
      expect(res.body.docs).toHaveLength(2);
      expect(res.body.docs[0]).toBe(album.docs[1]);
      expect(res.body.docs[1]).toMatch(storedNamePattern('three', 'txt'));
      // unsent fields are cleared, file fields included
      expect(res.body).toMatchObject({ title: '', views: null, tags: [], cover: '' });
      const files = storageFiles(app).filter((f) => f.startsWith(`${ALBUMS}/${album.id}/`));
      expect(files.sort()).toEqual([`${ALBUMS}/${album.id}/${res.body.docs[0]}`, `${ALBUMS}/${album.id}/${res.body.docs[1]}`].sort());
      // a hidden field the caller cannot see is not cleared
      const asRoot = await app.http.get(url(`albums/records/${album.id}`)).set('Authorization', 'token-root');
      expect(asRoot.body.secret).toBe('keep me');
    });

    test('a superuser sees hidden fields, so an unsent hidden field is cleared for them', async () => {
      const album = await createAlbum();
      const res = await app.http.patch(url(`albums/records/${album.id}`)).set('Authorization', 'token-root').field('title', 'x');
      expect(res.status).toBe(200);
      expect(res.body.secret).toBe('');
    });

    test('modifiers: docs+ appends an upload, +docs prepends, docs- removes by name', async () => {
      const album = await createAlbum();
      const keep = { title: 'Original', cover: album.cover };
      let res = await app.http.patch(url(`albums/records/${album.id}`)).field(keep).field('docs', album.docs).attach('docs+', Buffer.from('end'), 'end.txt');
      expect(res.status).toBe(200);
      expect(res.body.docs).toHaveLength(3);
      expect(res.body.docs.slice(0, 2)).toEqual(album.docs);
      res = await app.http.patch(url(`albums/records/${album.id}`)).field(keep).field('docs', res.body.docs).attach('+docs', Buffer.from('start'), 'start.txt');
      expect(res.body.docs).toHaveLength(4);
      expect(res.body.docs[0]).toMatch(storedNamePattern('start', 'txt'));
      const removed = res.body.docs[1] as string;
      res = await app.http.patch(url(`albums/records/${album.id}`)).field(keep).field('docs', res.body.docs).field('docs-', removed);
      expect(res.status).toBe(200);
      expect(res.body.docs).toHaveLength(3);
      expect(res.body.docs).not.toContain(removed);
      expect(storageFiles(app)).not.toContain(`${ALBUMS}/${album.id}/${removed}`);
      expect(res.body.cover).toBe(album.cover);
    });

    test('a new upload to a single file field replaces the old file, which leaves storage', async () => {
      const album = await createAlbum();
      const res = await app.http.patch(url(`albums/records/${album.id}`)).field('docs', album.docs).attach('cover', PNG, 'new.png');
      expect(res.status).toBe(200);
      expect(res.body.cover).toMatch(storedNamePattern('new', 'png'));
      expect(storageFiles(app)).not.toContain(`${ALBUMS}/${album.id}/${album.cover}`);
      expect(storageFiles(app)).toContain(`${ALBUMS}/${album.id}/${res.body.cover}`);
    });

    test('clearing with "" or a @jsonPayload null removes the files', async () => {
      const album = await createAlbum();
      const res = await app.http.patch(url(`albums/records/${album.id}`)).field('cover', '').field('@jsonPayload', JSON.stringify({ docs: null }));
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ cover: '', docs: [] });
      expect(storageFiles(app).filter((f) => f.startsWith(`${ALBUMS}/${album.id}/`))).toEqual([]);
    });

    test('a JSON update that drops a file removes it too; a name the record never had is a 422', async () => {
      const album = await createAlbum();
      const res = await app.http.patch(url(`albums/records/${album.id}`)).send({ docs: [album.docs[0]] });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ title: 'Original', docs: [album.docs[0]], cover: album.cover });
      expect(storageFiles(app)).not.toContain(`${ALBUMS}/${album.id}/${album.docs[1]}`);
      const foreign = await app.http.patch(url(`albums/records/${album.id}`)).send({ docs: ['other_abcdefghij.txt'] });
      expect(foreign.status).toBe(422);
      expect(foreign.body.data.docs.code).toBe('validation_invalid_value');
    });

    test('a failed update (422) keeps the old files and removes the new ones', async () => {
      const album = await createAlbum();
      const before = storageFiles(app);
      const res = await app.http.patch(url(`albums/records/${album.id}`)).field('views', 'NaN!').attach('docs', Buffer.from('n'), 'n.txt');
      expect(res.status).toBe(422);
      expect(storageFiles(app)).toEqual(before);
    });

    test('deleting the record removes its folder', async () => {
      const album = await createAlbum();
      expect(storageFiles(app).some((f) => f.startsWith(`${ALBUMS}/${album.id}/`))).toBe(true);
      expect((await app.http.delete(url(`albums/records/${album.id}`))).status).toBe(204);
      expect(storageFiles(app).filter((f) => f.startsWith(`${ALBUMS}/${album.id}/`))).toEqual([]);
    });

    test('bulk delete removes the folders of every deleted record', async () => {
      const a = await createAlbum();
      const b = await createAlbum();
      const res = await app.http.delete(url(`albums/records?filter=${encodeURIComponent(`id = "${a.id}" || id = "${b.id}"`)}`));
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ deleted: 2 });
      expect(storageFiles(app).filter((f) => f.startsWith(`${ALBUMS}/${a.id}/`) || f.startsWith(`${ALBUMS}/${b.id}/`))).toEqual([]);
    });

    test('concurrent appends to one multi-file field: none is lost, and storage holds exactly what the record references', async () => {
      const created = await app.http.post(url('albums/records')).field('title', 'race');
      const id = created.body.id as string;
      const results = await Promise.all(
        Array.from({ length: 5 }, (_, i) => app.http.patch(url(`albums/records/${id}`)).field('title', 'race').attach('docs+', Buffer.from(`n${i}`), `n${i}.txt`)),
      );
      expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
      const final = await app.http.get(url(`albums/records/${id}`));
      expect(final.body.docs).toHaveLength(5);
      const onDisk = storageFiles(app).filter((f) => f.startsWith(`${ALBUMS}/${id}/`)).map((f) => f.split('/')[2]);
      expect(onDisk.sort()).toEqual([...final.body.docs].sort());
    });

    test('concurrent appends and a delete of the same record: the record ends deleted and its folder empty', async () => {
      const album = await createAlbum();
      const patches = Array.from({ length: 4 }, (_, i) =>
        app.http.patch(url(`albums/records/${album.id}`)).field('title', 't').attach('docs+', Buffer.from(`p${i}`), `p${i}.txt`),
      );
      const removal = app.http.delete(url(`albums/records/${album.id}`));
      const [deleted, ...updated] = await Promise.all([removal, ...patches]);
      expect(deleted.status).toBe(204);
      // each update ran either before the delete (200) or after it (404), never half-way
      for (const res of updated) expect([200, 404, 422]).toContain(res.status);
      expect((await app.http.get(url(`albums/records/${album.id}`))).status).toBe(404);
      expect(storageFiles(app).filter((f) => f.startsWith(`${ALBUMS}/${album.id}/`))).toEqual([]);
    });

    test('concurrent replacing updates: whoever wins, the record never references a missing file and nothing is orphaned', async () => {
      const album = await createAlbum();
      const results = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          app.http.patch(url(`albums/records/${album.id}`)).field('docs', album.docs[0]!).attach('docs', Buffer.from(`r${i}`), `r${i}.txt`),
        ),
      );
      // the first to lock keeps docs[0]; later ones resend a name that still exists, so all succeed
      expect(results.every((r) => r.status === 200)).toBe(true);
      const final = await app.http.get(url(`albums/records/${album.id}`));
      const onDisk = storageFiles(app).filter((f) => f.startsWith(`${ALBUMS}/${album.id}/`)).map((f) => f.split('/')[2]);
      expect(onDisk.sort()).toEqual([...final.body.docs].sort());
    });
  });

  test('a client that disconnects mid-upload leaves no record, no stored file and no spooled file', async () => {
    const before = { rows: await countAlbums(), files: storageFiles(app) };
    const boundary = 'abortboundary';
    await new Promise<void>((resolve) => {
      const req = http.request(`${app.baseUrl}${url('albums/records')}`, {
        method: 'POST',
        headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Content-Length': '600000' },
      });
      req.on('error', () => resolve());
      req.write(`--${boundary}\r\nContent-Disposition: form-data; name="docs"; filename="partial.bin"\r\n\r\n`);
      req.write(Buffer.alloc(100_000, 7));
      setTimeout(() => {
        req.destroy();
        resolve();
      }, 200);
    });
    // cleanup runs when the server notices the closed socket
    for (let i = 0; i < 50 && spooledFiles(app).length > 0; i++) await new Promise((r) => setTimeout(r, 50));
    expect(spooledFiles(app)).toEqual([]);
    expect(await countAlbums()).toBe(before.rows);
    expect(storageFiles(app)).toEqual(before.files);
  });

  test('the spool folder, removed while the app runs (a /tmp cleaner), is made again by the next upload', async () => {
    await app.http.post(url('albums/records')).field('title', 'before').attach('docs', PNG, 'a.png').expect(200);
    rmSync(path.join(app.dataDir, 'uploads-tmp'), { recursive: true, force: true });
    const res = await app.http.post(url('albums/records')).field('title', 'after').attach('docs', PNG, 'b.png');
    expect(res.status).toBe(200);
    expect(readStoredFile({ dataDir: app.dataDir, collectionId: ALBUMS, recordId: res.body.id, name: res.body.docs[0] })).toEqual(PNG);
    expect(spooledFiles(app)).toEqual([]);
  });
});

describe.each(testEngines())('uploads when storage fails, on %s', (engine) => {
  test('a write that fails on the second file: 500, no record, and the first file is removed', async () => {
    const root = path.join(process.env.TMPDIR ?? '/tmp', `rb-failing-${process.pid}-${Date.now()}`);
    const storage = failingStorage(root, { write: 2 });
    const app = await startTestApp(engine, { collections: fileCollections(), storage });
    try {
      const res = await app.http.post(url('albums/records')).field('title', 'x').attach('docs', Buffer.from('a'), 'a.txt').attach('docs', Buffer.from('b'), 'b.txt');
      expect(res.status).toBe(500);
      expect(res.body).toEqual({ status: 500, message: expect.any(String), data: {} });
      expect(res.body.message).not.toContain('disk on fire');
      expect(storage.writes).toBe(2);
      expect(listFilesUnder(root)).toEqual([]);
      const list = await app.http.get(url('albums/records')).set('Authorization', 'token-root');
      expect(list.body.totalItems).toBe(0);
    } finally {
      await app.close();
      rmSync(root, { recursive: true, force: true });
    }
  }, APP_START_TIMEOUT);

  test('a delete that cannot remove files still succeeds (the record is gone; the sweep removes the leftovers later)', async () => {
    const root = path.join(process.env.TMPDIR ?? '/tmp', `rb-nodelete-${process.pid}-${Date.now()}`);
    const storage = failingStorage(root, { delete: true });
    const app = await startTestApp(engine, { collections: fileCollections(), storage });
    try {
      const created = await app.http.post(url('albums/records')).attach('docs', Buffer.from('a'), 'a.txt');
      expect(created.status).toBe(200);
      const res = await app.http.delete(url(`albums/records/${created.body.id}`));
      expect(res.status).toBe(204);
      expect((await app.http.get(url(`albums/records/${created.body.id}`))).status).toBe(404);
      expect(listFilesUnder(root)).toHaveLength(1);
    } finally {
      await app.close();
      rmSync(root, { recursive: true, force: true });
    }
  }, APP_START_TIMEOUT);
});

describe.each(testEngines())("multipartUpdate: 'merge' on %s", (engine) => {
  test('a multipart update changes only what it sends', async () => {
    const app = await startTestApp(engine, { collections: fileCollections(), multipartUpdate: 'merge' });
    try {
      const created = await app.http.post(url('albums/records')).field('title', 'Kept').field('views', '3').attach('docs', Buffer.from('a'), 'a.txt');
      const res = await app.http.patch(url(`albums/records/${created.body.id}`)).attach('cover', PNG, 'c.png');
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ title: 'Kept', views: 3, docs: created.body.docs });
      expect(res.body.cover).toMatch(storedNamePattern('c', 'png'));
    } finally {
      await app.close();
    }
  }, APP_START_TIMEOUT);
});
