import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createRecordsRouter, diskStorage, type RequestLogEntry, type Storage } from '../../lib/index.js';
import type { CollectionDefinition } from '../../lib/schema/definitions.js';
import type { BackupManifest } from '../../lib/backups/backup-manifest.js';
import { readBackupArchive } from '../../lib/backups/read-backup-archive.js';
import type { Logger } from '../../lib/logger.js';
import { ensureBuilt } from '../support/built-package.js';
import { sdkOf, serveRouter, type ServedRouter } from '../support/served-router.js';
import { createMemoryLogger, TEST_FILE_TOKEN_SECRET, TEST_IDENTITIES } from '../support/test-app.js';
import { openTestDatabase, testEngines, type Engine, type TestDatabase } from '../support/test-database.js';

const run = promisify(execFile);

const collections: CollectionDefinition[] = [
  {
    name: 'notes',
    fields: [
      { name: 'seq', type: 'number' },
      { name: 'title', type: 'text' },
      { name: 'doc', type: 'file', maxSelect: 1 },
    ],
    rules: { list: '', view: '', create: '', update: '', delete: '' },
    indexes: [{ fields: ['seq'], unique: true }],
  },
];

/** A host app on a listening server: on PGlite, the embedded engine on disk in `dataDir` (what backups snapshot); on Postgres, a schema of the shared server. */
interface BackupApp extends ServedRouter {
  dataDir: string;
  /** What the router's `onRequest` was given. */
  requests: RequestLogEntry[];
}

async function startBackupApp(options: { engine: Engine; dataDir: string; database?: TestDatabase; maxCount?: number; storage?: Storage; logger?: Logger }): Promise<BackupApp> {
  const requests: RequestLogEntry[] = [];
  const router = createRecordsRouter({
    collections,
    dataDir: options.dataDir,
    ...(options.storage ? { storage: options.storage } : {}),
    auth: (token) => TEST_IDENTITIES[token] ?? null,
    logger: options.logger ?? createMemoryLogger(),
    fileSweep: false,
    realtime: false,
    fileTokenSecret: TEST_FILE_TOKEN_SECRET,
    backups: { maxCount: options.maxCount ?? 10 },
    onRequest: (entry) => void requests.push(entry),
    ...(options.engine === 'postgres' ? { database: options.database!.db } : {}),
  });
  return { ...(await serveRouter(router)), dataDir: options.dataDir, requests };
}

/** Downloads each row's `doc` from `app` and compares it with the bytes it was made of. */
async function expectFilesServed(app: BackupApp, rows: Record<string, unknown>[], bytesOf: (seq: number) => Buffer): Promise<void> {
  for (const row of rows) {
    const response = await fetch(`${app.baseUrl}/api/files/notes/${row.id as string}/${row.doc as string}`);
    expect(Buffer.from(await response.arrayBuffer())).toEqual(bytesOf(row.seq as number));
  }
}

/** The last request to `route` that `onRequest` got, once one has come (an entry is handed over when the response ends, possibly just after the client read it). */
async function lastLogged(app: BackupApp, method: string, route: string): Promise<RequestLogEntry | undefined> {
  const find = () => app.requests.filter((entry) => entry.method === method && entry.route === route).at(-1);
  for (let i = 0; i < 500 && find() === undefined; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  return find();
}

/** The body of the 4xx a call answered, as the SDK reports it. */
async function failureOf(call: Promise<unknown>): Promise<{ status: number; message: string }> {
  try {
    await call;
  } catch (error) {
    const { status, message } = error as { status: number; message: string };
    return { status, message };
  }
  throw new Error('the call succeeded');
}

/** The status of a request whose path is sent exactly as written. */
function rawStatus(app: BackupApp, method: string, requestPath: string, headers: Record<string, string> = {}): Promise<number> {
  const url = new URL(app.baseUrl);
  return new Promise((resolve, reject) => {
    const request = http.request({ host: url.hostname, port: url.port, method, path: url.pathname + requestPath, headers }, (response) => {
      response.resume();
      resolve(response.statusCode!);
    });
    request.on('error', reject);
    request.end();
  });
}

const temporary: string[] = [];
function tempDir(prefix: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  temporary.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of temporary) rmSync(dir, { recursive: true, force: true });
});

describe.each(testEngines())('backups on %s', (engine) => {
  let database: TestDatabase | undefined;
  let app: BackupApp;

  beforeAll(async () => {
    if (engine === 'postgres') database = await openTestDatabase('postgres');
    app = await startBackupApp({ engine, dataDir: tempDir('rb-backup-'), database, maxCount: 4 });
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await database?.destroy();
  });

  test('backup while writing, then restore into a new data dir: a router on it serves exactly the records and files of the snapshot', async () => {
    const notes = app.router.api.collection('notes');
    const bytesOf = (seq: number) => Buffer.from(`file of note ${seq} `.repeat(50 + seq));
    let seq = 0;
    const write = async () => {
      seq++;
      await notes.create({ seq, title: `note ${seq}`, doc: { name: `n${seq}.txt`, data: bytesOf(seq) } }, { as: 'superuser' });
    };
    for (let i = 0; i < 20; i++) await write();
    // One writer, numbering its records: a consistent snapshot holds exactly seq 1..k.
    let writing = true;
    const writer = (async () => {
      while (writing) await write();
    })();
    const before = seq;
    const backup = await app.router.backup({ name: `while_writing_${engine}.tar.gz` });
    writing = false;
    await writer;

    expect(backup).toMatchObject({ key: `while_writing_${engine}.tar.gz`, path: path.join(app.dataDir, 'backups', backup.key) });
    expect(backup.size).toBeGreaterThan(0);
    const manifest = await readBackupArchive(backup.path);
    expect(manifest.storage.included).toBe(true);
    expect(manifest.storage.files).toBeGreaterThanOrEqual(before);
    expect(manifest.database.included).toBe(engine === 'pglite');
    if (engine === 'postgres') expect(manifest.database.note).toMatch(/pg_dump/);

    // The executable, as an operator runs it: into a data dir that does not exist yet.
    const restoredDir = path.join(tempDir('rb-restored-'), 'data');
    const root = await ensureBuilt();
    const { stdout } = await run(process.execPath, [path.join(root, 'dist/lib/cli/main.js'), 'restore', backup.path, '--data-dir', restoredDir]);
    expect(stdout).toContain(`restored ${backup.key}`);

    if (engine === 'pglite') {
      const restored = await startBackupApp({ engine, dataDir: restoredDir });
      try {
        const rows = await restored.router.api.collection('notes').getFullList({ as: 'superuser', sort: 'seq' });
        const seqs = rows.map((row) => row.seq as number);
        expect(seqs.length).toBeGreaterThanOrEqual(before);
        expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1));
        const original = await notes.getFullList({ as: 'superuser', sort: 'seq', filter: `seq <= ${seqs.length}` });
        expect(rows).toEqual(original);
        await expectFilesServed(restored, rows, bytesOf);
      } finally {
        await restored.close();
      }
    } else {
      // Postgres keeps the records; the archive gave back the files. A router on the same database and the restored storage serves them all.
      const restored = await startBackupApp({ engine, dataDir: restoredDir, database });
      try {
        const rows = await restored.router.api.collection('notes').getFullList({ as: 'superuser', filter: `seq <= ${before}`, sort: 'seq' });
        expect(rows).toHaveLength(before);
        await expectFilesServed(restored, rows, bytesOf);
      } finally {
        await restored.close();
      }
    }
  }, 120_000);

  test('the SDK\'s BackupService: create, list with sizes, download by a superuser file token, delete; upload and restore are refused while serving', async () => {
    const root = sdkOf(app, 'token-root');
    expect(await root.backups.create('sdk_made.tar.gz')).toBe(true);
    const listed = await root.backups.getFullList();
    const made = listed.find((backup) => backup.key === 'sdk_made.tar.gz')!;
    expect(made).toEqual({ key: 'sdk_made.tar.gz', size: expect.any(Number), modified: expect.stringMatching(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}Z$/) });

    const token = await root.files.getToken();
    const download = await fetch(root.backups.getDownloadURL(token, made.key));
    expect(download.status).toBe(200);
    expect(download.headers.get('content-disposition')).toBe('attachment; filename="sdk_made.tar.gz"');
    const bytes = Buffer.from(await download.arrayBuffer());
    expect(bytes.length).toBe(made.size);
    expect(bytes.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
    // The request log names whom the download was served as, as for a protected file by file token.
    expect(await lastLogged(app, 'GET', '/api/backups/:key')).toMatchObject({ status: 200, callerId: TEST_IDENTITIES['token-root']!.id });

    expect(await failureOf(root.backups.upload({ file: new Blob(['x']) }))).toMatchObject({ status: 400, message: expect.stringMatching(/recordbase restore/) });
    expect(await failureOf(root.backups.restore(made.key))).toMatchObject({ status: 400, message: expect.stringMatching(/recordbase restore/) });

    expect(await root.backups.delete(made.key)).toBe(true);
    expect((await root.backups.getFullList()).map((backup) => backup.key)).not.toContain(made.key);
    expect(await failureOf(root.backups.delete(made.key))).toMatchObject({ status: 404 });
  }, 60_000);

  test('guests and non-superusers get 401 and 403 on every backups route, and nothing is listed, made, sent or removed', async () => {
    await app.router.backup({ name: 'guarded.tar.gz' });
    const before = readdirSync(path.join(app.dataDir, 'backups')).sort();
    for (const [token, status] of [[undefined, 401], ['token-alice', 403]] as const) {
      const pb = sdkOf(app, token);
      const listing = await fetch(`${app.baseUrl}/api/backups`, { headers: token ? { Authorization: token } : {} });
      expect(listing.status).toBe(status);
      expect(await listing.json()).toMatchObject({ status, data: {} });
      expect(await failureOf(pb.backups.create('sneaky.tar.gz'))).toMatchObject({ status });
      expect(await failureOf(pb.backups.delete('guarded.tar.gz'))).toMatchObject({ status });
      expect((await fetch(`${app.baseUrl}/api/backups/guarded.tar.gz`, { headers: token ? { Authorization: token } : {} })).status).toBe(status);
    }
    // A non-superuser's file token opens no backup; a forged or expired one neither.
    const aliceToken = await sdkOf(app, 'token-alice').files.getToken();
    expect((await fetch(`${app.baseUrl}/api/backups/guarded.tar.gz?token=${aliceToken}`)).status).toBe(403);
    const rootToken = await sdkOf(app, 'token-root').files.getToken();
    const forged = rootToken.slice(0, -4) + (rootToken.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    expect((await fetch(`${app.baseUrl}/api/backups/guarded.tar.gz?token=${forged}`)).status).toBe(401);
    expect(readdirSync(path.join(app.dataDir, 'backups')).sort()).toEqual(before);
  }, 60_000);

  test('names and keys that try to leave the backups folder are 400s, and nothing is written or read outside it', async () => {
    const root = sdkOf(app, 'token-root');
    const outside = path.join(app.dataDir, 'escaped.tar.gz');
    for (const name of ['../escaped.tar.gz', '..%2fescaped.tar.gz', '%2e%2e.tar.gz', '..tar.gz', `${outside}`, 'a/b.tar.gz', 'nul\u0000.tar.gz', 'x.zip', 'UPPER.tar.gz', '.tar.gz', 'x'.repeat(151) + '.tar.gz']) {
      expect({ name, failure: await failureOf(root.backups.create(name)) }).toMatchObject({ name, failure: { status: 400 } });
    }
    const token = await root.files.getToken();
    writeFileSync(outside, 'secret');
    for (const key of ['..%2Fescaped.tar.gz', '%2e%2e%2fescaped.tar.gz', '..%5Cescaped.tar.gz', '%2Fetc%2Fpasswd', 'x%00.tar.gz', '%2E%2E']) {
      // Sent byte for byte: fetch() would resolve a dot segment (even %2E%2E) before sending.
      expect({ key, status: await rawStatus(app, 'GET', `/api/backups/${key}?token=${token}`) }).toEqual({ key, status: 400 });
      expect({ key, status: await rawStatus(app, 'DELETE', `/api/backups/${key}`, { Authorization: 'token-root' }) }).toEqual({ key, status: 400 });
    }
    expect(existsSync(outside)).toBe(true);
    const backupsDir = path.join(app.dataDir, 'backups');
    expect((existsSync(backupsDir) ? readdirSync(backupsDir) : []).filter((name) => name.includes('escaped'))).toEqual([]);
    expect(readdirSync(app.dataDir).filter((name) => name.includes('escaped'))).toEqual(['escaped.tar.gz']);
  }, 60_000);

  test('one backup at a time, and at most backups.maxCount of them: clear 400s', async () => {
    const outcomes = await Promise.allSettled([app.router.backup({ name: 'race_one.tar.gz' }), app.router.backup({ name: 'race_two.tar.gz' })]);
    expect(outcomes.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(1);
    expect(outcomes.find((outcome) => outcome.status === 'rejected')).toMatchObject({ reason: { status: 400, code: 'backup_in_progress' } });
    expect(existsSync(path.join(app.dataDir, 'backups', '.in-progress'))).toBe(false);
    const root = sdkOf(app, 'token-root');
    while ((await root.backups.getFullList()).length < 4) await root.backups.create('');
    expect(await failureOf(root.backups.create('one_too_many.tar.gz'))).toMatchObject({ status: 400, message: expect.stringMatching(/maxCount/) });
    expect(await failureOf(root.backups.create((await root.backups.getFullList())[0]!.key))).toMatchObject({ status: 400 });
  }, 60_000);
});

/** A logger that keeps each line with its level, so a test can tell a warning from the info line of every backup. */
function createLevelLogger() {
  const lines: { level: 'error' | 'warn' | 'info'; message: string }[] = [];
  const at = (level: 'error' | 'warn' | 'info') => (message: string) => void lines.push({ level, message });
  return { lines, error: at('error'), warn: at('warn'), info: at('info') };
}

/**
 * A host's own adapter (an encrypting or caching wrapper, say): its objects live in a disk storage
 * under `filesDir`, and it has a `root` string of its own, a scratch folder that holds none of them.
 * It offers no `localPath`: nothing tells recordbase where its objects are as files.
 */
function hostAdapter(filesDir: string, scratchDir: string, options: { offerLocalPath: boolean }): Storage & { root: string } {
  const inner = diskStorage({ root: filesDir, fsync: false });
  return {
    root: scratchDir,
    write: (key, source, writeOptions) => inner.write(key, source, writeOptions),
    read: (key, range) => inner.read(key, range),
    stat: (key) => inner.stat(key),
    delete: (key) => inner.delete(key),
    deletePrefix: (prefix) => inner.deletePrefix(prefix),
    list: (prefix) => inner.list(prefix),
    ...(options.offerLocalPath ? { localPath: (key: string) => inner.localPath(key) } : {}),
  };
}

/** Uploads `count` notes with a file each over HTTP, as a client does; resolves with each file's bytes by its storage key's last segment. */
async function uploadNotes(app: BackupApp, count: number): Promise<Map<string, Buffer>> {
  const pb = sdkOf(app, 'token-root');
  const uploaded = new Map<string, Buffer>();
  for (let i = 0; i < count; i++) {
    const bytes = Buffer.from(`bytes of note ${i} `.repeat(40 + i));
    const record = await pb.collection('notes').create({ title: `note ${i}`, doc: new File([bytes], `n${i}.txt`) });
    uploaded.set(record.doc as string, bytes);
  }
  return uploaded;
}

/** Makes a backup over HTTP as a superuser, downloads it with the SDK's file token, and reads it: its manifest and the storage part's files (by key). */
async function backUpOverHttp(app: BackupApp, name: string): Promise<{ manifest: BackupManifest; storageFiles: Map<string, Buffer> }> {
  const pb = sdkOf(app, 'token-root');
  expect(await pb.backups.create(name)).toBe(true);
  const response = await fetch(pb.backups.getDownloadURL(await pb.files.getToken(), name));
  expect(response.status).toBe(200);
  const file = path.join(tempDir('rb-backup-download-'), name);
  writeFileSync(file, Buffer.from(await response.arrayBuffer()));
  const storageFiles = new Map<string, Buffer>();
  const manifest = await readBackupArchive(file, {
    async onEntry(entry) {
      if (entry.part !== 'storage' || entry.type !== 'file') return undefined;
      const chunks: Buffer[] = [];
      return {
        write: async (chunk) => void chunks.push(chunk),
        close: async () => void storageFiles.set(entry.segments.join('/'), Buffer.concat(chunks)),
      };
    },
  });
  return { manifest, storageFiles };
}

describe.each(testEngines())('backups ask the storage for local files, on %s', (engine) => {
  let database: TestDatabase | undefined;
  /** A backup app on `storage`, with a logger that keeps levels. */
  const startStorageApp = async (storage: Storage) => {
    const logger = createLevelLogger();
    return { app: await startBackupApp({ engine, dataDir: tempDir('rb-backup-storage-'), database, storage, logger }), logger };
  };

  beforeAll(async () => {
    if (engine === 'postgres') database = await openTestDatabase('postgres');
  }, 60_000);
  afterAll(async () => {
    await database?.destroy();
  });

  test('an adapter with a `root` string but no localPath: the backup says storage is not included (not "0 files"), and a warning says so once', async () => {
    const { app, logger } = await startStorageApp(hostAdapter(tempDir('rb-host-files-'), tempDir('rb-host-scratch-'), { offerLocalPath: false }));
    try {
      const uploaded = await uploadNotes(app, 3);
      expect(uploaded.size).toBe(3);

      const first = await backUpOverHttp(app, 'host_adapter_one.tar.gz');
      expect(first.manifest.storage).toEqual({ included: false, files: 0, bytes: 0, note: expect.stringMatching(/localPath/) });
      expect(first.storageFiles.size).toBe(0);
      expect(first.manifest.database.included).toBe(engine === 'pglite');

      const second = await backUpOverHttp(app, 'host_adapter_two.tar.gz');
      expect(second.manifest.storage.included).toBe(false);
      const warnings = logger.lines.filter((line) => line.level === 'warn' && /storage/.test(line.message));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]!.message).toMatch(/not included/);
      expect(warnings[0]!.message).toMatch(/localPath/);
      // Each backup's own line still says what it holds.
      expect(logger.lines.filter((line) => line.level === 'info' && /backup host_adapter_\w+\.tar\.gz written: .*storage: not included/.test(line.message))).toHaveLength(2);
    } finally {
      await app.close();
    }
  }, 60_000);

  test('the same adapter offering localPath: the backup holds every file it stores, byte for byte, and nothing is warned', async () => {
    const { app, logger } = await startStorageApp(hostAdapter(tempDir('rb-host-files-'), tempDir('rb-host-scratch-'), { offerLocalPath: true }));
    try {
      const uploaded = await uploadNotes(app, 3);
      const { manifest, storageFiles } = await backUpOverHttp(app, 'local_adapter.tar.gz');
      const bytes = [...uploaded.values()].reduce((sum, data) => sum + data.length, 0);
      expect(manifest.storage).toMatchObject({ included: true, files: 3, bytes });
      // Keys are {collectionId}/{recordId}/{name}: compare by name.
      expect(new Map([...storageFiles].map(([key, data]) => [key.split('/').at(-1)!, data]))).toEqual(uploaded);
      expect(logger.lines.filter((line) => line.level !== 'info')).toEqual([]);
    } finally {
      await app.close();
    }
  }, 60_000);
});
