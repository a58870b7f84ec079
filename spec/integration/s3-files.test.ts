import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { Jimp } from 'jimp';
import type { S3Storage } from '../../lib/files/s3-storage.js';
import { collectList, readAll } from '../../lib/files/storage-contract.js';
import { sweepUnreferencedFiles } from '../../lib/files/sweep-files.js';
import { buildSchemaRegistry } from '../../lib/schema/collection-schema.js';
import { binary } from '../support/binary-body.js';
import { ensureBuilt } from '../support/built-package.js';
import { fileCollections, makePng } from '../support/file-fixtures.js';
import { startS3TestServer, type S3TestServer } from '../support/s3-test-server.js';
import { startTestApp, TEST_IDENTITIES, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

const run = promisify(execFile);
const MIB = 1024 * 1024;
const DAY = 24 * 60 * 60 * 1000;
const ROOT = { Authorization: 'token-root' };


interface StoredRecord {
  id: string;
  collectionId: string;
  [field: string]: unknown;
}

/** The bytes s3rver holds for an object (its own file layout: `<key>._S3rver_object`), read beside the protocol. */
async function readBucketFile(server: S3TestServer, objectKey: string): Promise<Buffer> {
  return fs.readFile(path.join(server.bucketDirectory, ...objectKey.split('/')) + '._S3rver_object');
}

describe.each(testEngines())('files on S3 storage through the router (%s)', (engine) => {
  let server: S3TestServer;
  let storage: S3Storage;
  let app: TestApp;
  const registry = buildSchemaRegistry(fileCollections());

  beforeAll(async () => {
    await ensureBuilt(); // the thumbnail worker runs from dist/
    server = await startS3TestServer();
    storage = server.createStorage({ prefix: `app-${engine}` });
    app = await startTestApp(engine, { collections: fileCollections(), storage, limits: { maxFileSize: 8 * MIB, maxBodySize: 12 * MIB } });
  }, 240_000);

  afterAll(async () => {
    await app?.close();
    await server?.close();
  });

  const fileUrl = (record: StoredRecord, name: string, query = ''): string => `/backend/api/files/${record.collectionId}/${record.id}/${name}${query}`;
  const download = (url: string, headers: Record<string, string> = {}) => app.http.get(url).set(headers).buffer(true).parse(binary);

  test('upload (one small file, one multipart), ranged download, thumbnail, record delete', async () => {
    const cover = makePng(64, 64);
    const big = randomBytes(6 * MIB + 7); // over 5 MiB: a multipart upload to S3
    const created = await app.http
      .post('/backend/api/collections/albums/records')
      .set(ROOT)
      .field('title', 'on s3')
      .attach('cover', cover, { filename: 'cover.png', contentType: 'image/png' })
      .attach('docs', big, { filename: 'big.bin', contentType: 'application/octet-stream' });
    expect(created.status).toBe(200);
    const album = created.body as StoredRecord & { cover: string; docs: string[] };
    const folder = `${album.collectionId}/${album.id}`;

    // The bytes in the bucket, under the prefix, are the bytes sent.
    expect((await readBucketFile(server, `app-${engine}/${folder}/${album.cover}`)).equals(cover)).toBe(true);
    expect((await readBucketFile(server, `app-${engine}/${folder}/${album.docs[0]}`)).equals(big)).toBe(true);

    const whole = await download(fileUrl(album, album.docs[0]!));
    expect(whole.status).toBe(200);
    expect((whole.body as Buffer).equals(big)).toBe(true);
    const ranged = await download(fileUrl(album, album.docs[0]!), { Range: `bytes=${5 * MIB - 10}-${5 * MIB + 9}` });
    expect(ranged.status).toBe(206);
    expect(ranged.headers['content-range']).toBe(`bytes ${5 * MIB - 10}-${5 * MIB + 9}/${big.length}`);
    expect((ranged.body as Buffer).equals(big.subarray(5 * MIB - 10, 5 * MIB + 10))).toBe(true);
    const pastEnd = await app.http.get(fileUrl(album, album.docs[0]!)).set('Range', `bytes=${big.length}-`);
    expect(pastEnd.status).toBe(416);

    const thumb = await download(fileUrl(album, album.cover, '?thumb=20x10'));
    expect(thumb.status).toBe(200);
    expect(thumb.headers['content-type']).toBe('image/png');
    const { bitmap } = await Jimp.fromBuffer(thumb.body as Buffer);
    expect([bitmap.width, bitmap.height]).toEqual([20, 10]);
    const thumbKey = `${folder}/thumbs_${album.cover}/20x10_${album.cover}`;
    expect((await readAll(await storage.read(thumbKey))).equals(thumb.body as Buffer)).toBe(true);

    expect((await collectList(storage.list(folder))).map((entry) => entry.key).sort()).toEqual(
      [`${folder}/${album.cover}`, `${folder}/${album.docs[0]}`, thumbKey].sort(),
    );
    const deleted = await app.http.delete(`/backend/api/collections/albums/records/${album.id}`).set(ROOT);
    expect(deleted.status).toBe(204);
    expect(await collectList(storage.list(folder))).toEqual([]);
    expect(await server.listPendingUploads()).toEqual([]);
  }, 120_000);

  test('a protected file needs an identity; a file token opens it', async () => {
    const scan = randomBytes(4000);
    const created = await app.http
      .post('/backend/api/collections/vault/records')
      .set('Authorization', 'token-alice')
      .field('owner', TEST_IDENTITIES['token-alice']!.id)
      .attach('scan', scan, { filename: 'scan.pdf', contentType: 'application/pdf' });
    expect(created.status).toBe(200);
    const vault = created.body as StoredRecord & { scan: string };
    expect((await download(fileUrl(vault, vault.scan))).status).toBe(401);
    const issued = await app.http.post('/backend/api/files/token').set('Authorization', 'token-alice');
    expect(issued.status).toBe(200);
    const opened = await download(fileUrl(vault, vault.scan, `?token=${encodeURIComponent(issued.body.token as string)}`));
    expect(opened.status).toBe(200);
    expect((opened.body as Buffer).equals(scan)).toBe(true);
  });

  test('the sweep removes an old unreferenced object and keeps the referenced ones', async () => {
    const created = await app.http
      .post('/backend/api/collections/albums/records')
      .set(ROOT)
      .attach('docs', Buffer.from('kept'), { filename: 'kept.txt', contentType: 'text/plain' });
    expect(created.status).toBe(200);
    const album = created.body as StoredRecord & { docs: string[] };
    const folder = `${album.collectionId}/${album.id}`;
    const stray = `${folder}/stray_abcdefghij.txt`;
    await storage.write(stray, Readable.from([Buffer.from('left by a crash')]));

    const report = await sweepUnreferencedFiles({
      database: app.database.db,
      registry,
      storage,
      minAgeMs: DAY,
      now: new Date(Date.now() + 2 * DAY), // S3 keeps its own modification times: age the objects by moving the clock
    });
    expect(report).toMatchObject({ removed: 1, failed: 0, locked: true });
    expect(await storage.stat(stray)).toBeUndefined();
    expect((await collectList(storage.list(folder))).map((entry) => entry.key)).toEqual([`${folder}/${album.docs[0]}`]);
  });

  if (engine === 'postgres') {
    test('recordbase clean works on S3 from a config file', async () => {
      const root = await ensureBuilt();
      const created = await app.http
        .post('/backend/api/collections/albums/records')
        .set(ROOT)
        .attach('docs', Buffer.from('kept'), { filename: 'kept.txt', contentType: 'text/plain' });
      const album = created.body as StoredRecord & { docs: string[] };
      const stray = `${album.collectionId}/${album.id}/stray_klmnopqrst.txt`;
      await storage.write(stray, Readable.from([Buffer.from('left behind')]));
      const schema = ((await app.database.db.raw('SELECT current_schema() AS s')) as { rows: { s: string }[] }).rows[0]!.s;
      const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'rb-s3-clean-'));
      try {
        // The config lives in a temp folder, so it imports from this repository by path.
        const knexUrl = pathToFileURL(path.join(root, 'node_modules/knex/knex.js')).href;
        const s3Url = pathToFileURL(path.join(root, 'dist/lib/files/s3-storage.js')).href;
        await fs.writeFile(
          path.join(dir, 'recordbase.config.js'),
          `import knex from ${JSON.stringify(knexUrl)};\nimport { s3Storage } from ${JSON.stringify(s3Url)};\n` +
            `export default { dataDir: ${JSON.stringify(path.join(dir, 'data'))}, collections: ${JSON.stringify(fileCollections())},\n` +
            `  database: knex({ client: 'pg', connection: ${JSON.stringify(process.env.RB_TEST_POSTGRES)}, searchPath: [${JSON.stringify(schema)}] }),\n` +
            `  storage: s3Storage({ bucket: ${JSON.stringify(server.bucket)}, prefix: ${JSON.stringify(storage.prefix)}, client: ${JSON.stringify(server.clientSettings)} }) };\n`,
        );
        const cleaned = await run(process.execPath, [path.join(root, 'dist/lib/cli/main.js'), 'clean', '--days', '0'], { cwd: dir });
        expect(cleaned.stdout.trim()).toMatch(/^Scanned \d+ files, removed 1 \(11 B freed\), skipped 0\.$/);
        expect(await storage.stat(stray)).toBeUndefined();
        expect(await storage.stat(`${album.collectionId}/${album.id}/${album.docs[0]}`)).toMatchObject({ size: 4 });
      } finally {
        await fs.rm(dir, { recursive: true, force: true });
      }
    }, 60_000);
  }
});
