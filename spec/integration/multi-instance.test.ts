import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Jimp } from 'jimp';
import { SETTINGS_TABLE } from '../../lib/db/shared-names.js';
import { ensureBuilt } from '../support/built-package.js';
import { fileCollections, makePng } from '../support/file-fixtures.js';
import { startInstances, type Instance, type SharedStorage } from '../support/multi-instance.js';
import { startRoundRobinProxy, type RoundRobinProxy } from '../support/round-robin-proxy.js';
import { startS3TestServer, type S3TestServer } from '../support/s3-test-server.js';
import { engineOptions, TEST_IDENTITIES } from '../support/test-app.js';
import { openTestDatabase, testEngines, type TestDatabase, type TestEngine } from '../support/test-database.js';

const ALICE_ID = TEST_IDENTITIES['token-alice']!.id;

interface StoredRecord {
  id: string;
  collectionId: string;
  [field: string]: unknown;
}

async function readJson<T>(response: Response): Promise<T> {
  const text = await response.text();
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new Error(`HTTP ${response.status}, not JSON: ${text.slice(0, 200)}`);
  }
}

/** A multipart create through `base`; the parts are text fields and files. */
async function createWithFiles(base: string, options: { collection: string; token: string; fields?: Record<string, string>; files: Array<{ field: string; name: string; type: string; data: Buffer }> }): Promise<StoredRecord> {
  const form = new FormData();
  for (const [name, value] of Object.entries(options.fields ?? {})) form.append(name, value);
  for (const file of options.files) form.append(file.field, new Blob([file.data], { type: file.type }), file.name);
  const response = await fetch(`${base}/backend/api/collections/${options.collection}/records`, { method: 'POST', headers: { Authorization: options.token }, body: form });
  const body = await readJson<StoredRecord>(response);
  expect(response.status).toBe(200);
  return body;
}

async function download(url: string): Promise<{ status: number; type: string | null; bytes: Buffer }> {
  const response = await fetch(url);
  return { status: response.status, type: response.headers.get('content-type'), bytes: Buffer.from(await response.arrayBuffer()) };
}

// Several processes on one database need a real Postgres server: PGlite belongs to one process.
// Through PgBouncer (transaction mode) on disk storage only: the storage kinds do not touch the pooler.
const cases: Array<[SharedStorage['kind'], TestEngine]> = testEngines({ pooler: true })
  .filter((engine) => engine !== 'pglite')
  .flatMap((engine) => (engine === 'pgbouncer' ? (['disk'] as const) : (['disk', 's3'] as const)).map((kind): [SharedStorage['kind'], TestEngine] => [kind, engine]));
if (cases.length === 0) console.warn('Postgres is not reachable: the multi-instance suite does not run.');

describe.each(cases)('three instances on one Postgres and one %s storage, behind a round-robin proxy, on %s', (kind, engine) => {
  let database: TestDatabase;
  let s3: S3TestServer | undefined;
  let diskRoot: string | undefined;
  let instances: Instance[];
  let stopAll: () => Promise<void>;
  let proxy: RoundRobinProxy;
  const api = (base: string, rest: string) => `${base}/backend/api/${rest}`;

  beforeAll(async () => {
    await ensureBuilt();
    database = await openTestDatabase(engine);
    let storage: SharedStorage;
    if (kind === 's3') {
      s3 = await startS3TestServer();
      storage = { kind: 's3', bucket: s3.bucket, prefix: 'shared', client: s3.clientSettings };
    } else {
      diskRoot = await fs.mkdtemp(path.join(os.tmpdir(), 'rb-shared-storage-'));
      storage = { kind: 'disk', root: diskRoot };
    }
    // All three start at once on an empty schema: their schema syncs and secrets race.
    ({ instances, stopAll } = await startInstances({
      count: 3,
      databaseUrl: database.url!,
      schema: database.schema,
      ...engineOptions(database, {}),
      storage,
      collections: fileCollections(),
      identities: TEST_IDENTITIES,
    }));
    proxy = await startRoundRobinProxy(instances.map((instance) => instance.url));
  }, 120_000);

  afterAll(async () => {
    await proxy?.close();
    await stopAll?.();
    await s3?.close();
    if (diskRoot) await fs.rm(diskRoot, { recursive: true, force: true });
    await database?.destroy();
  });

  test('concurrent starts made one schema and one file-token secret', async () => {
    expect(await database.db.select('key').from(SETTINGS_TABLE)).toEqual([{ key: 'file_token_secret' }]);
    const tables = await database.db.select('table_name').from('information_schema.tables').whereRaw('table_schema = current_schema()').orderBy('table_name');
    expect(tables.map((row: { table_name: string }) => row.table_name)).toEqual([
      '_rb_collections',
      '_recordbase_realtime_clients',
      '_recordbase_realtime_instances',
      '_recordbase_realtime_outbox',
      '_recordbase_settings',
      'albums',
      'gallery',
      'sealed',
      'vault',
    ]);
  });

  test('a record written through one instance is read through every other', async () => {
    const created = await fetch(api(instances[0]!.url, 'collections/albums/records'), {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ title: 'written on 0', views: 1 }),
    });
    const record = await readJson<StoredRecord>(created);
    expect(created.status).toBe(200);
    for (const instance of instances) {
      const read = await fetch(api(instance.url, `collections/albums/records/${record.id}`));
      expect(read.status).toBe(200);
      expect(await readJson(read)).toEqual(record);
    }
    const updated = await fetch(api(instances[1]!.url, `collections/albums/records/${record.id}`), {
      method: 'PATCH',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ title: 'changed on 1' }),
    });
    expect(updated.status).toBe(200);
    const seen = await readJson<StoredRecord>(await fetch(api(instances[2]!.url, `collections/albums/records/${record.id}`)));
    expect(seen.title).toBe('changed on 1');
  });

  test('60 concurrent "views+": 1 through the proxy, spread over the three, give 60', async () => {
    const created = await readJson<StoredRecord>(
      await fetch(api(proxy.url, 'collections/albums/records'), { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ title: 'counter', views: 0 }) }),
    );
    const before = [...proxy.served];
    const answers = await Promise.all(
      Array.from({ length: 60 }, () =>
        fetch(api(proxy.url, `collections/albums/records/${created.id}`), { method: 'PATCH', headers: { 'Content-Type': 'application/json' }, body: '{"views+":1}' }).then(async (response) => ({
          status: response.status,
          upstream: response.headers.get('x-upstream'),
          body: await response.text(),
        })),
      ),
    );
    expect(answers.filter((answer) => answer.status !== 200)).toEqual([]);
    expect(proxy.served.map((count, index) => count - before[index]!)).toEqual([20, 20, 20]);
    for (const instance of instances) {
      const read = await readJson<StoredRecord>(await fetch(api(instance.url, `collections/albums/records/${created.id}`)));
      expect(read.views).toBe(60);
    }
  });

  test('a file uploaded through one instance downloads, whole, from each', async () => {
    const data = randomBytes(300_000);
    const record = await createWithFiles(instances[0]!.url, { collection: 'albums', token: 'token-root', files: [{ field: 'docs', name: 'data.bin', type: 'application/octet-stream', data }] });
    const name = (record.docs as string[])[0]!;
    for (const instance of instances) {
      const got = await download(api(instance.url, `files/${record.collectionId}/${record.id}/${name}`));
      expect(got.status).toBe(200);
      expect(got.bytes.equals(data)).toBe(true);
    }
  });

  test('a file token from one instance opens a protected file on the others', async () => {
    const scan = randomBytes(5000);
    const record = await createWithFiles(instances[1]!.url, {
      collection: 'vault',
      token: 'token-alice',
      fields: { owner: ALICE_ID },
      files: [{ field: 'scan', name: 'scan.pdf', type: 'application/pdf', data: scan }],
    });
    const url = (base: string, query: string) => api(base, `files/${record.collectionId}/${record.id}/${record.scan as string}${query}`);
    expect((await download(url(instances[2]!.url, ''))).status).toBe(401);
    const issued = await fetch(api(instances[0]!.url, 'files/token'), { method: 'POST', headers: { Authorization: 'token-alice' } });
    const { token } = await readJson<{ token: string }>(issued);
    for (const instance of instances) {
      const got = await download(url(instance.url, `?token=${encodeURIComponent(token)}`));
      expect(got.status).toBe(200);
      expect(got.bytes.equals(scan)).toBe(true);
    }
  });

  test('a thumbnail asked of all three at once is whole everywhere', async () => {
    const record = await createWithFiles(instances[2]!.url, { collection: 'albums', token: 'token-root', files: [{ field: 'cover', name: 'cover.png', type: 'image/png', data: makePng(400, 300) }] });
    const path = `files/${record.collectionId}/${record.id}/${record.cover as string}?thumb=120x90`;
    const thumbs = await Promise.all(instances.map((instance) => download(api(instance.url, path))));
    for (const thumb of thumbs) {
      expect(thumb.status).toBe(200);
      expect(thumb.type).toBe('image/png');
      expect(thumb.bytes.equals(thumbs[0]!.bytes)).toBe(true);
    }
    const { bitmap } = await Jimp.fromBuffer(thumbs[0]!.bytes);
    expect([bitmap.width, bitmap.height]).toEqual([120, 90]);
    // Asked again, each serves the stored one, identical.
    for (const instance of instances) expect((await download(api(instance.url, path))).bytes.equals(thumbs[0]!.bytes)).toBe(true);
  });

  test('with one instance killed (SIGKILL), the proxy keeps serving from the others', async () => {
    const created = await readJson<StoredRecord>(
      await fetch(api(proxy.url, 'collections/albums/records'), { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ title: 'survivor' }) }),
    );
    await instances[1]!.kill();
    const before = [...proxy.served];
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) {
      const read = await fetch(api(proxy.url, `collections/albums/records/${created.id}`));
      statuses.push(read.status);
      await read.arrayBuffer();
    }
    expect(statuses).toEqual(Array(12).fill(200));
    const write = await fetch(api(proxy.url, `collections/albums/records/${created.id}`), { method: 'PATCH', headers: { 'Content-Type': 'application/json' }, body: '{"views+":5}' });
    expect(write.status).toBe(200);
    expect([...proxy.dead]).toEqual([1]);
    const after = proxy.served.map((count, index) => count - before[index]!);
    expect(after[1]).toBe(0);
    expect(after[0]! + after[2]!).toBe(13);
  });
});
