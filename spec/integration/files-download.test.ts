import http, { type IncomingHttpHeaders } from 'node:http';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Jimp } from 'jimp';
import { createFileTokens } from '../../lib/auth/file-token.js';
import { binary } from '../support/binary-body.js';
import { ensureBuilt } from '../support/built-package.js';
import { fileCollections, listFilesUnder, makePng, readStoredFile, storedNamePattern } from '../support/file-fixtures.js';
import { startTestApp, TEST_FILE_TOKEN_SECRET, TEST_IDENTITIES, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/** Starting a PGlite app takes seconds; building dist/ for the thumbnail worker may take a minute more. */
const SETUP_TIMEOUT = 240_000;
const THUMB_TIMEOUT = 120_000;

const ROOT = { Authorization: 'token-root' };
const ALICE_ID = TEST_IDENTITIES['token-alice']!.id;
const BOB_ID = TEST_IDENTITIES['token-bob']!.id;


interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/**
 * A request whose path goes on the wire exactly as written: fetch and supertest normalise
 * `%2e%2e` and friends through the URL parser, which would hide what the server does with them.
 */
function rawRequest(app: TestApp, rawPath: string, options: { method?: string; headers?: Record<string, string> } = {}): Promise<RawResponse> {
  const { hostname, port } = new URL(app.baseUrl);
  return new Promise((resolve, reject) => {
    const req = http.request({ hostname, port, path: rawPath, method: options.method ?? 'GET', headers: options.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

interface AlbumRecord {
  id: string;
  collectionId: string;
  collectionName: string;
  title: string;
  cover: string;
  docs: string[];
  [field: string]: unknown;
}

interface Attachment {
  field: string;
  data: Buffer;
  name: string;
}

/** The exact error body of DESIGN 7 for `status`. */
function errorBody(status: number) {
  return { status, message: expect.any(String), data: {} };
}

/** Decoded width, height and the RGBA of one pixel of an encoded image. */
async function decode(bytes: Buffer): Promise<{ width: number; height: number; pixel(x: number, y: number): [number, number, number] }> {
  const { bitmap } = await Jimp.fromBuffer(bytes);
  return {
    width: bitmap.width,
    height: bitmap.height,
    pixel(x, y) {
      const i = (y * bitmap.width + x) * 4;
      return [bitmap.data[i]!, bitmap.data[i + 1]!, bitmap.data[i + 2]!];
    },
  };
}

function isRed([r, g, b]: [number, number, number]): boolean {
  return r > 200 && g < 60 && b < 60;
}

function isBlue([r, g, b]: [number, number, number]): boolean {
  return r < 60 && g < 60 && b > 200;
}

describe.each(testEngines())('file downloads on %s', (engine) => {
  let app: TestApp;
  /** A landscape album: cover 300x200 png; docs txt, html, svg. */
  let album: AlbumRecord;
  /** Another album whose files must never be served through `album`. */
  let other: AlbumRecord;
  /** A portrait album (cover 200x300): top, centre, bottom and stretch crops differ on it. */
  let portrait: AlbumRecord;
  let aliceVault: { id: string; collectionId: string; scan: string; note: string };
  let bobVault: { id: string; collectionId: string; scan: string };
  let sealed: { id: string; collectionId: string; scan: string };
  let gallery: { id: string; collectionId: string; photo: string };

  const cover = makePng(300, 200);
  const otherCover = makePng(301, 200);
  const portraitCover = makePng(200, 300);
  const text = Buffer.from('plain text, not an image\n');
  const html = Buffer.from('<!doctype html><html><body><script>alert(document.cookie)</script></body></html>\n');
  const svg = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>alert(1)</script></svg>\n');
  const aliceScan = Buffer.from('alice: protected scan bytes\n');
  const aliceNote = Buffer.from('alice: public note\n');
  const bobScan = Buffer.from('bob: protected scan bytes\n');
  const sealedScan = Buffer.from('sealed: superusers only\n');

  const fileUrl = (record: { collectionId: string; id: string }, name: string, query = '') =>
    `/backend/api/files/${record.collectionId}/${record.id}/${encodeURIComponent(name)}${query}`;
  const recordDir = (record: { collectionId: string; id: string }) => path.join(app.dataDir, 'storage', record.collectionId, record.id);
  const thumbsDir = (record: { collectionId: string; id: string }, name: string) => path.join(recordDir(record), `thumbs_${name}`);

  /** Creates a record through the multipart API, the way a browser form would. */
  async function createRecord<T>(collection: string, options: { fields?: Record<string, string>; files?: Attachment[]; headers?: Record<string, string> }): Promise<T> {
    let req = app.http.post(`/backend/api/collections/${collection}/records`);
    for (const [name, value] of Object.entries(options.headers ?? {})) req = req.set(name, value);
    for (const [name, value] of Object.entries(options.fields ?? {})) req = req.field(name, value);
    for (const file of options.files ?? []) req = req.attach(file.field, file.data, file.name);
    const res = await req;
    expect({ status: res.status, body: res.body }).toEqual({ status: 200, body: expect.any(Object) });
    return res.body as T;
  }

  function createAlbum(options: { fields?: Record<string, string>; files?: Attachment[] }): Promise<AlbumRecord> {
    return createRecord<AlbumRecord>('albums', options);
  }

  /** GET with the body as bytes. */
  function download(url: string, headers: Record<string, string> = {}) {
    let req = app.http.get(url).buffer(true).parse(binary);
    for (const [name, value] of Object.entries(headers)) req = req.set(name, value);
    return req;
  }

  beforeAll(async () => {
    await ensureBuilt(); // the thumbnail worker runs from dist/
    app = await startTestApp(engine, { collections: fileCollections() });
    album = await createAlbum({
      fields: { title: 'landscape' },
      files: [
        { field: 'cover', data: cover, name: 'cover.png' },
        { field: 'docs', data: text, name: 'notes.txt' },
        { field: 'docs', data: html, name: 'page.html' },
        { field: 'docs', data: svg, name: 'icon.svg' },
      ],
    });
    other = await createAlbum({ fields: { title: 'other' }, files: [{ field: 'cover', data: otherCover, name: 'other.png' }] });
    portrait = await createAlbum({ fields: { title: 'portrait' }, files: [{ field: 'cover', data: portraitCover, name: 'portrait.png' }] });
    aliceVault = await createRecord('vault', {
      headers: ROOT,
      fields: { owner: ALICE_ID },
      files: [
        { field: 'scan', data: aliceScan, name: 'scan.txt' },
        { field: 'note', data: aliceNote, name: 'note.txt' },
      ],
    });
    bobVault = await createRecord('vault', { headers: ROOT, fields: { owner: BOB_ID }, files: [{ field: 'scan', data: bobScan, name: 'scan.txt' }] });
    sealed = await createRecord('sealed', { headers: ROOT, files: [{ field: 'scan', data: sealedScan, name: 'sealed.txt' }] });
    gallery = await createRecord('gallery', { files: [{ field: 'photo', data: cover, name: 'photo.png' }] });
  }, SETUP_TIMEOUT);

  afterAll(async () => {
    await app?.close();
  });

  test('the fixtures were stored under sanitized names, with the bytes that were sent', () => {
    expect(album.collectionId).toBe('pbc_albums01');
    expect(album.cover).toMatch(storedNamePattern('cover', 'png'));
    expect(album.docs).toEqual([
      expect.stringMatching(storedNamePattern('notes', 'txt')),
      expect.stringMatching(storedNamePattern('page', 'html')),
      expect.stringMatching(storedNamePattern('icon', 'svg')),
    ]);
    expect(readStoredFile({ dataDir: app.dataDir, collectionId: album.collectionId, recordId: album.id, name: album.cover }).equals(cover)).toBe(true);
    expect(listFilesUnder(recordDir(album))).toEqual([album.cover, ...album.docs].sort());
  });

  describe('serving a public file', () => {
    test('GET returns the exact bytes with the type, the sandbox and inline disposition of a png', async () => {
      const res = await download(fileUrl(album, album.cover));
      expect(res.status).toBe(200);
      expect(Buffer.isBuffer(res.body)).toBe(true);
      expect((res.body as Buffer).equals(cover)).toBe(true);
      expect(res.headers['content-type']).toBe('image/png');
      expect(res.headers['content-length']).toBe(String(cover.length));
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['content-security-policy']).toContain('sandbox');
      expect(res.headers['content-security-policy']).toContain("default-src 'none'");
      expect(res.headers['content-disposition']).toMatch(/^inline\b/);
      expect(res.headers['content-disposition']).toContain(album.cover);
    });

    test('HEAD sends the same headers without a body', async () => {
      const res = await app.http.head(fileUrl(album, album.cover)).buffer(true).parse(binary);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('image/png');
      expect(res.headers['content-length']).toBe(String(cover.length));
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['etag']).toEqual(expect.any(String));
      expect((res.body as Buffer | undefined)?.length ?? 0).toBe(0);
    });

    test.each([
      ['txt', 0, /^text\/plain/],
      ['html', 1, /^text\/html/],
      ['svg', 2, /^image\/svg\+xml/],
    ])('a .%s file comes with its own Content-Type, as an attachment', async (_ext, index, type) => {
      const name = album.docs[index]!;
      const res = await download(fileUrl(album, name));
      expect(res.status).toBe(200);
      expect((res.body as Buffer).equals([text, html, svg][index]!)).toBe(true);
      expect(res.headers['content-type']).toMatch(type);
      expect(res.headers['content-disposition']).toMatch(/^attachment\b/);
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['content-security-policy']).toContain('sandbox');
    });

    test('?download=1 makes even a png an attachment', async () => {
      const res = await download(fileUrl(album, album.cover, '?download=1'));
      expect(res.status).toBe(200);
      expect((res.body as Buffer).equals(cover)).toBe(true);
      expect(res.headers['content-disposition']).toMatch(/^attachment\b/);
    });

    test('a Range request gets 206 with exactly those bytes', async () => {
      const res = await download(fileUrl(album, album.cover), { Range: 'bytes=10-99' });
      expect(res.status).toBe(206);
      expect((res.body as Buffer).equals(cover.subarray(10, 100))).toBe(true);
      expect(res.headers['content-range']).toBe(`bytes 10-99/${cover.length}`);
      expect(res.headers['content-length']).toBe('90');
      const tail = await download(fileUrl(album, album.cover), { Range: 'bytes=-16' });
      expect(tail.status).toBe(206);
      expect((tail.body as Buffer).equals(cover.subarray(cover.length - 16))).toBe(true);
    });

    test('the ETag comes back as If-None-Match and gets 304 without a body', async () => {
      const first = await download(fileUrl(album, album.cover));
      const etag = first.headers['etag'];
      expect(etag).toEqual(expect.stringMatching(/^(W\/)?".+"$/));
      const again = await download(fileUrl(album, album.cover), { 'If-None-Match': etag! });
      expect(again.status).toBe(304);
      expect((again.body as Buffer | undefined)?.length ?? 0).toBe(0);
      const otherEtag = (await download(fileUrl(other, other.cover))).headers['etag'];
      expect(otherEtag).not.toBe(etag);
      const stale = await download(fileUrl(album, album.cover), { 'If-None-Match': otherEtag! });
      expect(stale.status).toBe(200);
    });

    test('public files may be cached publicly for long; protected ones only privately', async () => {
      const pub = await download(fileUrl(album, album.cover));
      const cacheControl = pub.headers['cache-control']!;
      expect(cacheControl).toContain('public');
      const maxAge = Number(/max-age=(\d+)/.exec(cacheControl)?.[1]);
      expect(maxAge).toBeGreaterThanOrEqual(7 * 86400);
      const prot = await download(fileUrl(aliceVault, aliceVault.scan), { Authorization: 'token-alice' });
      expect(prot.status).toBe(200);
      expect(prot.headers['cache-control']).toContain('private');
      expect(prot.headers['cache-control']).not.toContain('public');
    });

    test('the collection may be addressed by its id or by its name', async () => {
      const byId = await download(`/backend/api/files/pbc_albums01/${album.id}/${album.cover}`);
      const byName = await download(`/backend/api/files/albums/${album.id}/${album.cover}`);
      expect(byId.status).toBe(200);
      expect(byName.status).toBe(200);
      expect((byId.body as Buffer).equals(cover)).toBe(true);
      expect((byName.body as Buffer).equals(cover)).toBe(true);
    });
  });

  describe('404 unless the name is in that record', () => {
    test.each([
      ["another record's file name", () => `/backend/api/files/albums/${album.id}/${other.cover}`],
      ['a made-up stored-looking name', () => `/backend/api/files/albums/${album.id}/cover_abcdefghij.png`],
      ['an unknown record', () => `/backend/api/files/albums/zzzzzzzzzzzzzzz/${album.cover}`],
      ['a malformed record id', () => `/backend/api/files/albums/NOT-AN-ID/${album.cover}`],
      ['a record id of the wrong length', () => `/backend/api/files/albums/${album.id}x/${album.cover}`],
      ['an unknown collection', () => `/backend/api/files/nope/${album.id}/${album.cover}`],
      ['the record in another collection', () => `/backend/api/files/gallery/${album.id}/${album.cover}`],
      ['a path with too few segments', () => `/backend/api/files/albums/${album.id}`],
    ])('%s', async (_case, url) => {
      const res = await app.http.get(url());
      expect(res.status).toBe(404);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.body).toEqual(errorBody(404));
    });

    test.each([
      ['../ to /etc/passwd', () => '..%2F..%2F..%2F..%2Fetc%2Fpasswd'],
      ["../ to the other record's real file", () => `..%2F${other.id}%2F${other.cover}`],
      ['../../ to the other record via the collection', () => `..%2F..%2Fpbc_albums01%2F${other.id}%2F${other.cover}`],
      ['backslash traversal', () => `..%5C${other.id}%5C${other.cover}`],
      ['encoded dot-dot', () => '%2e%2e'],
      ['encoded dot-dot-slash before a real name', () => `%2e%2e%2f${other.id}%2f${other.cover}`],
      ['a NUL alone', () => '%00'],
      ['a real name followed by NUL', () => `${album.cover}%00`],
      ['a NUL inside a real name', () => `${album.cover.slice(0, 5)}%00${album.cover.slice(5)}`],
      ['a very long name', () => 'a'.repeat(6000) + '.png'],
      ['a very long stored-looking name', () => `${'x'.repeat(3000)}_abcdefghij.png`],
      ['unicode', () => encodeURIComponent('café_☃_名前.png')],
      ['unicode look-alike of the real name', () => encodeURIComponent(album.cover.replace('c', 'с'))], // Cyrillic es
      ['the thumbs folder of the real file', () => `thumbs_${album.cover}`],
      ['a real name with a trailing slash-encoded suffix', () => `${album.cover}%2F`],
      ['an absolute path', () => '%2Fetc%2Fpasswd'],
    ])('a hostile name (%s) is a JSON 404, never foreign bytes', async (_case, name) => {
      const res = await rawRequest(app, `/backend/api/files/albums/${album.id}/${name()}`);
      expect(res.status).toBe(404);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(JSON.parse(res.body.toString('utf8'))).toEqual(errorBody(404));
      expect(res.body.includes(otherCover.subarray(0, 64))).toBe(false);
    });

    test.each([
      ['a malformed percent-escape in the name', () => `/backend/api/files/albums/${album.id}/%E0%A4%A`],
      ['a bare % in the name', () => `/backend/api/files/albums/${album.id}/100%`],
      ['a malformed percent-escape in the record id', () => `/backend/api/files/albums/%ZZ/${album.cover}`],
      ['a malformed percent-escape in a records API id (same error path)', () => `/backend/api/collections/albums/records/%ZZ`],
    ])('%s is a client error with the JSON body, never a 500', async (_case, url) => {
      const res = await rawRequest(app, url());
      expect([400, 404]).toContain(res.status);
      expect(JSON.parse(res.body.toString('utf8'))).toEqual(errorBody(res.status));
    });

    test('hostile names in HEAD requests are 404s too', async () => {
      const res = await rawRequest(app, `/backend/api/files/albums/${album.id}/..%2F${other.id}%2F${other.cover}`, { method: 'HEAD' });
      expect(res.status).toBe(404);
      expect(res.body.length).toBe(0);
    });
  });

  describe('protected files', () => {
    const scanUrl = () => fileUrl(aliceVault, aliceVault.scan);

    test('without a token: 401 with the JSON body', async () => {
      const res = await app.http.get(scanUrl());
      expect(res.status).toBe(401);
      expect(res.body).toEqual(errorBody(401));
    });

    test('a token auth() does not accept: 401', async () => {
      for (const headers of [{ Authorization: 'token-mallory' }, { Authorization: 'Bearer token-mallory' }, { Cookie: 'pb_session=token-mallory' }]) {
        const res = await app.http.get(scanUrl()).set(headers);
        expect({ headers, status: res.status }).toEqual({ headers, status: 401 });
        expect(res.body).toEqual(errorBody(401));
      }
      const viaQuery = await app.http.get(scanUrl() + '?token=token-mallory');
      expect(viaQuery.status).toBe(401);
    });

    test.each([
      ['Authorization: <token>', '', { Authorization: 'token-alice' }],
      ['Authorization: Bearer <token>', '', { Authorization: 'Bearer token-alice' }],
      ['the pb_session cookie', '', { Cookie: 'other=1; pb_session=token-alice' }],
      ['?token=', '?token=token-alice', {}],
    ])('the owner gets the bytes with the token in %s', async (_way, query, headers) => {
      const res = await download(scanUrl() + query, headers);
      expect(res.status).toBe(200);
      expect((res.body as Buffer).equals(aliceScan)).toBe(true);
    });

    test("another user who fails the view rule gets 404, even with the owner's record id", async () => {
      const res = await app.http.get(scanUrl()).set('Authorization', 'token-bob');
      expect(res.status).toBe(404);
      expect(res.body).toEqual(errorBody(404));
      const own = await download(fileUrl(bobVault, bobVault.scan), { Authorization: 'token-bob' });
      expect(own.status).toBe(200);
      expect((own.body as Buffer).equals(bobScan)).toBe(true);
    });

    test('a superuser gets the bytes', async () => {
      const res = await download(scanUrl(), ROOT);
      expect(res.status).toBe(200);
      expect((res.body as Buffer).equals(aliceScan)).toBe(true);
    });

    test('a public field of the same record needs no token and no rule', async () => {
      const res = await download(fileUrl(aliceVault, aliceVault.note));
      expect(res.status).toBe(200);
      expect((res.body as Buffer).equals(aliceNote)).toBe(true);
      const asBob = await download(fileUrl(aliceVault, aliceVault.note), { Authorization: 'token-bob' });
      expect(asBob.status).toBe(200);
    });

    test('a protected name that is not in the record is 404 before any auth check', async () => {
      const res = await app.http.get(fileUrl(aliceVault, bobVault.scan));
      expect(res.status).toBe(404);
    });

    test('a null view rule: 404 for a user, even with a token; 200 for a superuser', async () => {
      const asAlice = await app.http.get(fileUrl(sealed, sealed.scan)).set('Authorization', 'token-alice');
      expect(asAlice.status).toBe(404);
      expect(asAlice.body).toEqual(errorBody(404));
      const asGuest = await app.http.get(fileUrl(sealed, sealed.scan));
      expect(asGuest.status).toBe(401);
      const asRoot = await download(fileUrl(sealed, sealed.scan), ROOT);
      expect(asRoot.status).toBe(200);
      expect((asRoot.body as Buffer).equals(sealedScan)).toBe(true);
    });
  });

  describe('file tokens', () => {
    const tokenUrl = '/backend/api/files/token';
    const fileTokens = createFileTokens({ secret: TEST_FILE_TOKEN_SECRET });

    async function fileTokenFor(token: string): Promise<string> {
      const res = await app.http.post(tokenUrl).set('Authorization', token);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ token: expect.any(String) });
      return res.body.token as string;
    }

    test('without an identity: 401; with a token auth() refuses: 401', async () => {
      const anonymous = await app.http.post(tokenUrl);
      expect(anonymous.status).toBe(401);
      expect(anonymous.body).toEqual(errorBody(401));
      const unknown = await app.http.post(tokenUrl).set('Authorization', 'token-mallory');
      expect(unknown.status).toBe(401);
    });

    test("a file token in ?token= opens the owner's protected file, and nobody else's", async () => {
      const token = await fileTokenFor('token-alice');
      expect(token).not.toContain('token-alice');
      const own = await download(fileUrl(aliceVault, aliceVault.scan, `?token=${encodeURIComponent(token)}`));
      expect(own.status).toBe(200);
      expect((own.body as Buffer).equals(aliceScan)).toBe(true);
      const bobs = await app.http.get(fileUrl(bobVault, bobVault.scan, `?token=${encodeURIComponent(token)}`));
      expect(bobs.status).toBe(404);
      const sealedOne = await app.http.get(fileUrl(sealed, sealed.scan, `?token=${encodeURIComponent(token)}`));
      expect(sealedOne.status).toBe(404);
    });

    test('a bearer token also gets a file token; the cookie does not (it is a download token source only)', async () => {
      const viaCookie = await app.http.post(tokenUrl).set('Cookie', 'pb_session=token-bob');
      expect(viaCookie.status).toBe(401);
      const viaRaw = await app.http.post(tokenUrl).set('Authorization', 'token-bob');
      expect(viaRaw.status).toBe(200);
      const bobs = await download(fileUrl(bobVault, bobVault.scan, `?token=${encodeURIComponent(viaRaw.body.token)}`));
      expect(bobs.status).toBe(200);
      expect((bobs.body as Buffer).equals(bobScan)).toBe(true);
      const viaBearer = await app.http.post(tokenUrl).set('Authorization', 'Bearer token-root');
      expect(viaBearer.status).toBe(200);
      const sealedOne = await app.http.get(fileUrl(sealed, sealed.scan, `?token=${encodeURIComponent(viaBearer.body.token)}`));
      expect(sealedOne.status).toBe(200);
    });

    test('a tampered token: 401', async () => {
      const token = await fileTokenFor('token-alice');
      const dot = token.lastIndexOf('.');
      const at = dot + 5; // a character inside the signature
      const flipped = token.slice(0, at) + (token[at] === 'A' ? 'B' : 'A') + token.slice(at + 1);
      expect(flipped).not.toBe(token);
      const res = await app.http.get(fileUrl(aliceVault, aliceVault.scan, `?token=${encodeURIComponent(flipped)}`));
      expect(res.status).toBe(401);
      expect(res.body).toEqual(errorBody(401));
      // the payload changed to claim to be the superuser, signature kept: also 401
      const forgedPayload = Buffer.from(JSON.stringify({ v: 1, exp: Math.floor(Date.now() / 1000) + 100, identity: { id: 'x', superuser: true } })).toString('base64url');
      const forged = `rbft.${forgedPayload}.${token.slice(dot + 1)}`;
      const forgedRes = await app.http.get(fileUrl(sealed, sealed.scan, `?token=${encodeURIComponent(forged)}`));
      expect(forgedRes.status).toBe(401);
    });

    test('an expired token: 401; a fresh one signed with the same secret works', async () => {
      const expired = fileTokens.sign(TEST_IDENTITIES['token-alice']!, { now: Date.now() - 181_000 });
      const res = await app.http.get(fileUrl(aliceVault, aliceVault.scan, `?token=${encodeURIComponent(expired)}`));
      expect(res.status).toBe(401);
      expect(res.body).toEqual(errorBody(401));
      const fresh = fileTokens.sign(TEST_IDENTITIES['token-alice']!);
      const ok = await app.http.get(fileUrl(aliceVault, aliceVault.scan, `?token=${encodeURIComponent(fresh)}`));
      expect(ok.status).toBe(200);
    });

    test('a file token is not an identity for the records API', async () => {
      const token = await fileTokenFor('token-alice');
      const asAlice = await app.http.get('/backend/api/collections/vault/records').set('Authorization', 'token-alice');
      expect(asAlice.status).toBe(200);
      expect(asAlice.body.items.map((r: { id: string }) => r.id)).toEqual([aliceVault.id]);
      const withFileToken = await app.http.get('/backend/api/collections/vault/records').set('Authorization', token);
      expect(withFileToken.status).toBe(200);
      expect(withFileToken.body.items).toEqual([]);
      const view = await app.http.get(`/backend/api/collections/vault/records/${aliceVault.id}`).set('Authorization', token);
      expect(view.status).toBe(404);
      const mint = await app.http.post(tokenUrl).set('Authorization', token);
      expect(mint.status).toBe(401);
    });
  });

  describe('thumbnails', () => {
    const thumb = (record: { collectionId: string; id: string }, name: string, query: string) => download(fileUrl(record, name, `?${query}`));

    test('thumb=100x100 covers the box anchored at the top', async () => {
      const res = await thumb(album, album.cover, 'thumb=100x100');
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('image/png');
      const image = await decode(res.body as Buffer);
      expect([image.width, image.height]).toEqual([100, 100]);
      expect(isRed(image.pixel(50, 5))).toBe(true);
      expect(isBlue(image.pixel(50, 95))).toBe(true);

      const tall = await decode((await thumb(portrait, portrait.cover, 'thumb=100x100')).body as Buffer);
      expect([tall.width, tall.height]).toEqual([100, 100]);
      // 200x300 -> 100x150, top 100 rows kept: red down to row 75
      expect(isRed(tall.pixel(50, 60))).toBe(true);
      expect(isBlue(tall.pixel(50, 90))).toBe(true);
    }, THUMB_TIMEOUT);

    test('center crops from the centre, the b suffix from the bottom', async () => {
      const centred = await thumb(portrait, portrait.cover, 'thumb=100x100&center');
      expect(centred.status).toBe(200);
      const c = await decode(centred.body as Buffer);
      expect([c.width, c.height]).toEqual([100, 100]);
      // rows 25..125 of 150: red above 50, blue below
      expect(isRed(c.pixel(50, 40))).toBe(true);
      expect(isBlue(c.pixel(50, 60))).toBe(true);
      const bottom = await decode((await thumb(portrait, portrait.cover, 'thumb=100x100b')).body as Buffer);
      expect([bottom.width, bottom.height]).toEqual([100, 100]);
      // rows 50..150: red above 25
      expect(isRed(bottom.pixel(50, 15))).toBe(true);
      expect(isBlue(bottom.pixel(50, 40))).toBe(true);
    }, THUMB_TIMEOUT);

    test('0xH and Wx0 scale proportionally', async () => {
      const byHeight = await thumb(album, album.cover, 'thumb=0x50');
      expect(byHeight.status).toBe(200);
      const h = await decode(byHeight.body as Buffer);
      expect([h.width, h.height]).toEqual([75, 50]);
      const byWidth = await thumb(album, album.cover, 'thumb=100x0');
      expect(byWidth.status).toBe(200);
      const w = await decode(byWidth.body as Buffer);
      expect(w.width).toBe(100);
      expect(Math.abs(w.height - 200 * (100 / 300))).toBeLessThanOrEqual(1);
    }, THUMB_TIMEOUT);

    test('the f suffix fits the whole image inside the box', async () => {
      const wide = await decode((await thumb(album, album.cover, 'thumb=100x100f')).body as Buffer);
      expect(wide.width).toBe(100);
      expect(Math.abs(wide.height - 67)).toBeLessThanOrEqual(1);
      const tall = await decode((await thumb(portrait, portrait.cover, 'thumb=100x100f')).body as Buffer);
      expect(tall.height).toBe(100);
      expect(Math.abs(tall.width - 67)).toBeLessThanOrEqual(1);
      // nothing cropped: red on top, blue at the bottom, each half the height
      expect(isRed(tall.pixel(Math.floor(tall.width / 2), 40))).toBe(true);
      expect(isBlue(tall.pixel(Math.floor(tall.width / 2), 60))).toBe(true);
    }, THUMB_TIMEOUT);

    test('stretch fills the box exactly, ignoring the aspect ratio', async () => {
      const res = await thumb(portrait, portrait.cover, 'thumb=100x100&stretch');
      expect(res.status).toBe(200);
      const image = await decode(res.body as Buffer);
      expect([image.width, image.height]).toEqual([100, 100]);
      // the whole height squeezed: the colour changes at row 50 (a top crop keeps red to 75)
      expect(isRed(image.pixel(50, 40))).toBe(true);
      expect(isBlue(image.pixel(50, 60))).toBe(true);
    }, THUMB_TIMEOUT);

    test('format=webp gives a webp', async () => {
      const res = await thumb(album, album.cover, 'thumb=100x100&format=webp');
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('image/webp');
      const bytes = res.body as Buffer;
      expect(bytes.subarray(0, 4).toString('latin1')).toBe('RIFF');
      expect(bytes.subarray(8, 12).toString('latin1')).toBe('WEBP');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
    }, THUMB_TIMEOUT);

    test('format=jpeg honours quality', async () => {
      const low = await thumb(portrait, portrait.cover, 'thumb=200x300&format=jpeg&quality=20');
      const high = await thumb(portrait, portrait.cover, 'thumb=200x300&format=jpeg&quality=90');
      expect([low.status, high.status]).toEqual([200, 200]);
      expect(low.headers['content-type']).toBe('image/jpeg');
      const lowBytes = low.body as Buffer;
      const highBytes = high.body as Buffer;
      expect([lowBytes[0], lowBytes[1], lowBytes[2]]).toEqual([0xff, 0xd8, 0xff]);
      expect(lowBytes.length).toBeLessThan(highBytes.length);
      const decoded = await decode(lowBytes);
      expect([decoded.width, decoded.height]).toEqual([200, 300]);
    }, THUMB_TIMEOUT);

    test('a thumbnail is made once, stored beside the original, and served from storage afterwards', async () => {
      const fresh = await createAlbum({ files: [{ field: 'cover', data: makePng(300, 200), name: 'fresh.png' }] });
      expect(listFilesUnder(thumbsDir(fresh, fresh.cover))).toEqual([]);
      const first = await thumb(fresh, fresh.cover, 'thumb=100x100');
      expect(first.status).toBe(200);
      const stored = listFilesUnder(thumbsDir(fresh, fresh.cover));
      expect(stored).toEqual([`100x100_${fresh.cover}`]);
      const before = listFilesUnder(recordDir(fresh));
      const second = await thumb(fresh, fresh.cover, 'thumb=100x100');
      expect(second.status).toBe(200);
      expect((second.body as Buffer).equals(first.body as Buffer)).toBe(true);
      expect(listFilesUnder(recordDir(fresh))).toEqual(before);
      // the stored thumbnail is what was served
      const onDisk = readStoredFile({ dataDir: app.dataDir, collectionId: fresh.collectionId, recordId: fresh.id, name: path.join(`thumbs_${fresh.cover}`, stored[0]!) });
      expect(onDisk.equals(first.body as Buffer)).toBe(true);
      // thumbnails have their own validators, distinct from the original's
      const original = await download(fileUrl(fresh, fresh.cover));
      expect(second.headers['etag']).not.toBe(original.headers['etag']);
    }, THUMB_TIMEOUT);

    test('5 concurrent identical requests share one job: same bytes, one stored file', async () => {
      const fresh = await createAlbum({ files: [{ field: 'cover', data: makePng(300, 200), name: 'burst.png' }] });
      const results = await Promise.all(Array.from({ length: 5 }, () => thumb(fresh, fresh.cover, 'thumb=120x80')));
      expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
      const bytes = results.map((r) => r.body as Buffer);
      for (const b of bytes) expect(b.equals(bytes[0]!)).toBe(true);
      expect(listFilesUnder(thumbsDir(fresh, fresh.cover))).toEqual([`120x80_${fresh.cover}`]);
      const image = await decode(bytes[0]!);
      expect([image.width, image.height]).toEqual([120, 80]);
    }, THUMB_TIMEOUT);

    test.each([
      ['thumb=abc'],
      ['thumb=0x0'],
      ['thumb=3000x10'],
      ['thumb=10x3000'],
      ['thumb=100x100x'],
      ['thumb=-1x100'],
      ['thumb=100x100&quality=101'],
      ['thumb=100x100&quality=high'],
      ['thumb=100x100&format=gif'],
      ['thumb=100x100&format=svg'],
    ])('%s is a 400 with the JSON body', async (query) => {
      const res = await app.http.get(fileUrl(album, album.cover, `?${query}`));
      expect(res.status).toBe(400);
      expect(res.body).toEqual(errorBody(400));
    });

    test('a non-image file asked for a thumbnail is served as the original', async () => {
      const res = await download(fileUrl(album, album.docs[0]!, '?thumb=100x100'));
      expect(res.status).toBe(200);
      expect((res.body as Buffer).equals(text)).toBe(true);
      expect(res.headers['content-type']).toMatch(/^text\/plain/);
      expect(listFilesUnder(thumbsDir(album, album.docs[0]!))).toEqual([]);
      const svgRes = await download(fileUrl(album, album.docs[2]!, '?thumb=100x100'));
      expect(svgRes.status).toBe(200);
      expect((svgRes.body as Buffer).equals(svg)).toBe(true);
      expect(svgRes.headers['content-disposition']).toMatch(/^attachment\b/);
    });

    test('a field that lists thumb sizes makes only those', async () => {
      const refused = await app.http.get(fileUrl(gallery, gallery.photo, '?thumb=50x50'));
      expect(refused.status).toBe(400);
      expect(refused.body).toEqual(errorBody(400));
      const allowed = await thumb(gallery, gallery.photo, 'thumb=100x100');
      expect(allowed.status).toBe(200);
      const image = await decode(allowed.body as Buffer);
      expect([image.width, image.height]).toEqual([100, 100]);
      const proportional = await thumb(gallery, gallery.photo, 'thumb=0x50');
      expect(proportional.status).toBe(200);
      expect((await decode(proportional.body as Buffer)).height).toBe(50);
      expect(listFilesUnder(thumbsDir(gallery, gallery.photo))).toEqual([`0x50_${gallery.photo}`, `100x100_${gallery.photo}`]);
    }, THUMB_TIMEOUT);

    test('deleting the record removes its files and thumbnails from storage', async () => {
      const doomed = await createAlbum({
        files: [
          { field: 'cover', data: makePng(300, 200), name: 'doomed.png' },
          { field: 'docs', data: text, name: 'doomed.txt' },
        ],
      });
      expect((await thumb(doomed, doomed.cover, 'thumb=50x50')).status).toBe(200);
      expect(listFilesUnder(recordDir(doomed))).toEqual([doomed.cover, ...doomed.docs, path.join(`thumbs_${doomed.cover}`, `50x50_${doomed.cover}`)].sort());
      const del = await app.http.delete(`/backend/api/collections/albums/records/${doomed.id}`);
      expect(del.status).toBe(204);
      expect(listFilesUnder(recordDir(doomed))).toEqual([]);
      expect((await app.http.get(fileUrl(doomed, doomed.cover))).status).toBe(404);
      expect((await app.http.get(fileUrl(doomed, doomed.cover, '?thumb=50x50'))).status).toBe(404);
    }, THUMB_TIMEOUT);

    test('replacing the cover through a multipart PATCH removes the old file and its thumbnails', async () => {
      const changing = await createAlbum({ fields: { title: 'v1' }, files: [{ field: 'cover', data: makePng(300, 200), name: 'old.png' }] });
      expect((await thumb(changing, changing.cover, 'thumb=50x50')).status).toBe(200);
      expect(listFilesUnder(thumbsDir(changing, changing.cover))).toHaveLength(1);
      const replacement = makePng(120, 60);
      const res = await app.http
        .patch(`/backend/api/collections/albums/records/${changing.id}`)
        .field('title', 'v2')
        .attach('cover', replacement, 'new.png');
      expect(res.status).toBe(200);
      const updated = res.body as AlbumRecord;
      expect(updated.cover).toMatch(storedNamePattern('new', 'png'));
      expect(updated.title).toBe('v2');
      expect(listFilesUnder(recordDir(changing))).toEqual([updated.cover]);
      expect((await app.http.get(fileUrl(changing, changing.cover))).status).toBe(404);
      expect((await app.http.get(fileUrl(changing, changing.cover, '?thumb=50x50'))).status).toBe(404);
      const served = await download(fileUrl(changing, updated.cover));
      expect((served.body as Buffer).equals(replacement)).toBe(true);
    }, THUMB_TIMEOUT);

    test('the event loop stays responsive while big thumbnails are made', async () => {
      const big = makePng(2000, 2000);
      expect(big.length).toBeLessThan(200_000); // within albums.cover.maxSize
      const bigAlbum = await createAlbum({ files: [{ field: 'cover', data: big, name: 'big.png' }] });
      const histogram = monitorEventLoopDelay({ resolution: 10 });
      histogram.enable();
      let results;
      try {
        results = await Promise.all(['100x100', '400x300', '0x500', '640x0'].map((size) => thumb(bigAlbum, bigAlbum.cover, `thumb=${size}`)));
      } finally {
        histogram.disable();
      }
      expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
      const sizes = await Promise.all(results.map(async (r) => {
        const image = await decode(r.body as Buffer);
        return [image.width, image.height];
      }));
      expect(sizes).toEqual([[100, 100], [400, 300], [500, 500], [640, 640]]);
      expect(listFilesUnder(thumbsDir(bigAlbum, bigAlbum.cover))).toHaveLength(4);
      expect(histogram.max / 1e6).toBeLessThan(100);
    }, THUMB_TIMEOUT);
  });
});
