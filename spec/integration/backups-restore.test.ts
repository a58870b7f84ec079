import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { createGzip, gzipSync } from 'node:zlib';
import tar from 'tar-stream';
import { createRecordsRouter } from '../../lib/index.js';
import { InvalidBackupError } from '../../lib/backups/backup-manifest.js';
import { restoreBackup, RestoreRefusedError } from '../../lib/backups/restore-backup.js';
import type { CollectionDefinition } from '../../lib/schema/definitions.js';
import { ensureBuilt } from '../support/built-package.js';
import { createMemoryLogger } from '../support/test-app.js';

const run = promisify(execFile);

const collections: CollectionDefinition[] = [
  { name: 'notes', fields: [{ name: 'title', type: 'text' }, { name: 'doc', type: 'file' }], rules: { list: '', view: '', create: '', update: '', delete: '' } },
];

/** Every folder of this file lives under one scratch folder, removed at the end. */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'rb-restore-test-'));
const tempDir = (prefix: string) => mkdtempSync(path.join(scratch, prefix));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** One entry of a crafted archive: a file by default, with `body` as its bytes. */
interface CraftedEntry {
  name: string;
  body?: Buffer;
  type?: tar.Headers['type'];
  linkname?: string;
}

function manifestOf(storage: { files: number; bytes: number }, extra: Record<string, unknown> = {}) {
  return {
    format: 'recordbase-backup',
    version: 1,
    created: new Date().toISOString(),
    engine: 'postgres',
    database: { included: false, files: 0, bytes: 0, note: '' },
    storage: { included: true, files: storage.files, bytes: storage.bytes, note: '' },
    ...extra,
  };
}

/** Writes a .tar.gz holding exactly `entries`, in order, whatever they say (an attacker's archive). */
async function craftArchive(entries: CraftedEntry[]): Promise<string> {
  const file = path.join(tempDir('rb-crafted-'), 'crafted.tar.gz');
  const pack = tar.pack();
  const written = pipeline(pack, createGzip(), createWriteStream(file));
  for (const entry of entries) {
    const body = entry.body ?? Buffer.alloc(0);
    await new Promise<void>((resolve, reject) => pack.entry({ name: entry.name, type: entry.type ?? 'file', linkname: entry.linkname, size: entry.type && entry.type !== 'file' ? 0 : body.length }, entry.type && entry.type !== 'file' ? undefined : body, (error) => (error ? reject(error) : resolve())));
  }
  pack.finalize();
  await written;
  return file;
}

/** Every file under `dir` with its bytes: what "the target is untouched" compares. */
function snapshotTree(dir: string): Record<string, string> {
  const found: Record<string, string> = {};
  if (!existsSync(dir)) return found;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const full = path.join(entry.parentPath, entry.name);
    found[path.relative(dir, full)] = entry.isFile() ? readFileSync(full, 'base64') : entry.isDirectory() ? 'dir' : 'other';
  }
  return found;
}

/** A data dir with something in it, as an app left it. */
function populatedDataDir(): string {
  const dataDir = path.join(tempDir('rb-target-'), 'data');
  mkdirSync(path.join(dataDir, 'storage', 'c1', 'r1'), { recursive: true });
  writeFileSync(path.join(dataDir, 'storage', 'c1', 'r1', 'keep.txt'), 'kept');
  mkdirSync(path.join(dataDir, 'db'), { recursive: true });
  writeFileSync(path.join(dataDir, 'db', 'PG_VERSION'), '17');
  return dataDir;
}

describe('recordbase restore: crafted archives are refused before anything is written, the target untouched', () => {
  const body = Buffer.from('pwned');
  const ok = (name: string): CraftedEntry => ({ name, body });
  const cases: [string, () => CraftedEntry[]][] = [
    ['a "../" entry that climbs out of storage/', () => [{ name: 'manifest.json', body: Buffer.from(JSON.stringify(manifestOf({ files: 1, bytes: 5 }))) }, ok('storage/../../evil.txt')]],
    ['a "../" entry outside the parts', () => [{ name: 'manifest.json', body: Buffer.from(JSON.stringify(manifestOf({ files: 1, bytes: 5 }))) }, ok('../evil.txt')]],
    ['an absolute entry', () => [{ name: 'manifest.json', body: Buffer.from(JSON.stringify(manifestOf({ files: 1, bytes: 5 }))) }, ok(path.join(os.tmpdir(), 'rb-absolute-evil.txt'))]],
    ['a backslash entry', () => [{ name: 'manifest.json', body: Buffer.from(JSON.stringify(manifestOf({ files: 1, bytes: 5 }))) }, ok('storage/..\\..\\evil.txt')]],
    ['a symlink', () => [{ name: 'manifest.json', body: Buffer.from(JSON.stringify(manifestOf({ files: 0, bytes: 0 }))) }, { name: 'storage/c1/link', type: 'symlink', linkname: '/etc/passwd' }]],
    ['a hard link', () => [{ name: 'manifest.json', body: Buffer.from(JSON.stringify(manifestOf({ files: 0, bytes: 0 }))) }, { name: 'storage/c1/link', type: 'link', linkname: '/etc/passwd' }]],
    ['a device', () => [{ name: 'manifest.json', body: Buffer.from(JSON.stringify(manifestOf({ files: 0, bytes: 0 }))) }, { name: 'storage/c1/dev', type: 'character-device' }]],
    ['no manifest first', () => [ok('storage/c1/a.txt'), { name: 'manifest.json', body: Buffer.from(JSON.stringify(manifestOf({ files: 1, bytes: 5 }))) }]],
    ['a foreign manifest', () => [{ name: 'manifest.json', body: Buffer.from('{"format":"pocketbase"}') }, ok('storage/c1/a.txt')]],
    ['a database entry the manifest leaves out', () => [{ name: 'manifest.json', body: Buffer.from(JSON.stringify(manifestOf({ files: 1, bytes: 5 }))) }, ok('db/PG_VERSION')]],
    ['an entry twice', () => [{ name: 'manifest.json', body: Buffer.from(JSON.stringify(manifestOf({ files: 2, bytes: 10 }))) }, ok('storage/c1/a.txt'), ok('storage/c1/a.txt')]],
    ['an entry below a file', () => [{ name: 'manifest.json', body: Buffer.from(JSON.stringify(manifestOf({ files: 2, bytes: 10 }))) }, ok('storage/c1'), ok('storage/c1/a.txt')]],
    ['more files than declared', () => [{ name: 'manifest.json', body: Buffer.from(JSON.stringify(manifestOf({ files: 1, bytes: 10 }))) }, ok('storage/c1/a.txt'), ok('storage/c1/b.txt')]],
    ['fewer bytes than declared', () => [{ name: 'manifest.json', body: Buffer.from(JSON.stringify(manifestOf({ files: 1, bytes: 6 }))) }, ok('storage/c1/a.txt')]],
    ['a gzip bomb: 64 MiB of zeros where the manifest declares 5 bytes', () => [{ name: 'manifest.json', body: Buffer.from(JSON.stringify(manifestOf({ files: 1, bytes: 5 }))) }, { name: 'storage/c1/bomb', body: Buffer.alloc(64 * 1024 * 1024) }]],
  ];

  test.each(cases)('%s', async (_label, entries) => {
    const archive = await craftArchive(entries());
    const dataDir = populatedDataDir();
    const before = snapshotTree(path.dirname(dataDir));
    await expect(restoreBackup({ file: archive, dataDir, force: true })).rejects.toThrow(InvalidBackupError);
    expect(snapshotTree(path.dirname(dataDir))).toEqual(before);
    expect(existsSync(path.join(path.dirname(dataDir), 'evil.txt'))).toBe(false);
    expect(existsSync(path.join(os.tmpdir(), 'rb-absolute-evil.txt'))).toBe(false);
  }, 60_000);

  test('a manifest that declares more bytes than the disk has free is refused before its entries are read', async () => {
    const archive = await craftArchive([{ name: 'manifest.json', body: Buffer.from(JSON.stringify(manifestOf({ files: 1, bytes: 2 ** 52 }))) }, { name: 'storage/c1/a', body: Buffer.alloc(10) }]);
    const dataDir = populatedDataDir();
    const before = snapshotTree(path.dirname(dataDir));
    await expect(restoreBackup({ file: archive, dataDir, force: true })).rejects.toThrow(/Not enough free space/);
    expect(snapshotTree(path.dirname(dataDir))).toEqual(before);
  });

  test('a truncated archive is refused', async () => {
    const archive = await craftArchive([{ name: 'manifest.json', body: Buffer.from(JSON.stringify(manifestOf({ files: 1, bytes: 200_000 }))) }, { name: 'storage/c1/a', body: randomBytes(200_000) }]);
    truncateSync(archive, Math.floor(statSync(archive).size / 2));
    const dataDir = populatedDataDir();
    const before = snapshotTree(path.dirname(dataDir));
    await expect(restoreBackup({ file: archive, dataDir, force: true })).rejects.toThrow(/cannot be read/);
    expect(snapshotTree(path.dirname(dataDir))).toEqual(before);
  });
});

/** One 512-byte ustar header, written here rather than by tar-stream's pack, whose cost per entry makes a flood of entries slow to build. */
function tarHeader(name: string, options: { type: 'file' | 'directory' | 'pax-header'; size?: number }): Buffer {
  const header = Buffer.alloc(512);
  header.write(name, 0, 100, 'utf8');
  header.write('0000755\0', 100);
  header.write('0000000\0', 108);
  header.write('0000000\0', 116);
  header.write(`${(options.size ?? 0).toString(8).padStart(11, '0')}\0`, 124);
  header.write('00000000000\0', 136);
  header.write({ file: '0', directory: '5', 'pax-header': 'x' }[options.type], 156);
  header.write('ustar\u000000', 257);
  header.fill(' ', 148, 156);
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
  return header;
}

/** A tar file entry: its header, its bytes, and the padding to the next 512-byte block. */
function tarFile(name: string, body: Buffer): Buffer {
  return Buffer.concat([tarHeader(name, { type: 'file', size: body.length }), body, Buffer.alloc((512 - (body.length % 512)) % 512)]);
}

/**
 * Writes an archive of gzip members (Node's gunzip reads them as one stream): the manifest and one
 * sound file, then `rest` (compressed once) `times` over, so that gigabytes of inflated bytes cost
 * the test a few megabytes.
 */
function writeGzipMembers(options: { head: Buffer; rest?: Buffer; times?: number }): string {
  const file = path.join(tempDir('rb-crafted-'), 'crafted.tar.gz');
  const member = options.rest === undefined ? Buffer.alloc(0) : gzipSync(options.rest, { level: 1 });
  writeFileSync(file, Buffer.concat([gzipSync(options.head, { level: 1 }), ...Array.from({ length: options.times ?? 0 }, () => member)]));
  return file;
}

describe('recordbase restore bounds every entry kind and the bytes after the last entry by the manifest (issue 41, finding 6)', () => {
  const soundHead = () => Buffer.concat([tarFile('manifest.json', Buffer.from(JSON.stringify(manifestOf({ files: 1, bytes: 5 })))), tarFile('storage/c1/a.txt', Buffer.from('hello'))]);
  const cases: [string, () => string, RegExp][] = [
    [
      '200,000 folder entries where the manifest declares one file',
      () => {
        const folders: Buffer[] = [];
        for (let i = 0; i < 200_000; i++) folders.push(tarHeader(`storage/d${i}/`, { type: 'directory' }));
        return writeGzipMembers({ head: Buffer.concat([soundHead(), ...folders]) });
      },
      /the storage part holds more folders than its 1 files can need/,
    ],
    [
      '2 GiB of zeros after the last entry (2 MiB compressed)',
      () => writeGzipMembers({ head: soundHead(), rest: Buffer.alloc(16 * 1024 * 1024), times: 128 }),
      /decompresses to more than its manifest accounts for/,
    ],
    [
      '300 pax headers of 3 MiB that no entry follows',
      () => writeGzipMembers({ head: soundHead(), rest: Buffer.concat([tarHeader('pax', { type: 'pax-header', size: 3 * 1024 * 1024 }), Buffer.alloc(3 * 1024 * 1024, 'a')]), times: 300 }),
      /decompresses to more than its manifest accounts for/,
    ],
  ];

  test.each(cases)('%s: refused at once, nothing made, the target untouched', async (_label, build, message) => {
    const archive = build();
    const dataDir = populatedDataDir();
    const before = snapshotTree(path.dirname(dataDir));
    const started = performance.now();
    const outcome = await restoreBackup({ file: archive, dataDir, force: true }).then(
      () => undefined,
      (error: unknown) => error,
    );
    const elapsed = performance.now() - started;
    expect(outcome).toBeInstanceOf(InvalidBackupError);
    expect((outcome as Error).message).toMatch(message);
    expect(snapshotTree(path.dirname(dataDir))).toEqual(before);
    // Refused within the first megabytes, long before the whole archive could be decompressed and walked.
    expect(elapsed).toBeLessThan(5_000);
  }, 180_000);

  test('a sound archive of gzip members with nothing after its entries still restores', async () => {
    const archive = writeGzipMembers({ head: Buffer.concat([soundHead(), Buffer.alloc(1024)]) });
    const dataDir = path.join(tempDir('rb-target-'), 'data');
    const report = await restoreBackup({ file: archive, dataDir });
    expect(report.restored.map(({ part }) => part)).toEqual(['storage']);
    expect(readFileSync(path.join(dataDir, 'storage', 'c1', 'a.txt'), 'utf8')).toBe('hello');
  });
});

describe('recordbase restore of a real backup', () => {
  let backupFile: string;
  let sourceDir: string;

  beforeAll(async () => {
    sourceDir = tempDir('rb-source-');
    const router = createRecordsRouter({ collections, dataDir: sourceDir, logger: createMemoryLogger(), realtime: false, fileSweep: false });
    await router.ready;
    for (let i = 0; i < 5; i++) await router.api.collection('notes').create({ title: `n${i}`, doc: { name: 'a.bin', data: randomBytes(300_000) } }, { as: 'superuser' });
    backupFile = (await router.backup()).path;
    await router.close();
  }, 60_000);

  test('refused, naming the holder, while an app holds the data dir; refused into a non-empty dir without --force; done with it', async () => {
    const dataDir = tempDir('rb-held-');
    const holder = createRecordsRouter({ collections, dataDir, logger: createMemoryLogger(), realtime: false, fileSweep: false });
    await holder.ready;
    try {
      await expect(restoreBackup({ file: backupFile, dataDir, force: true })).rejects.toThrow(new RegExp(`in use by this process \\(pid ${process.pid}`));
    } finally {
      await holder.close();
    }
    const target = populatedDataDir();
    const before = snapshotTree(target);
    await expect(restoreBackup({ file: backupFile, dataDir: target })).rejects.toThrow(RestoreRefusedError);
    await expect(restoreBackup({ file: backupFile, dataDir: target })).rejects.toThrow(/--force/);
    expect(snapshotTree(target)).toEqual(before);

    const report = await restoreBackup({ file: backupFile, dataDir: target, force: true });
    expect(report.restored.map(({ part }) => part)).toEqual(['database', 'storage']);
    expect(existsSync(path.join(target, 'storage', 'c1'))).toBe(false);
    expect(readdirSync(target).filter((name) => name.startsWith('.rb-restore'))).toEqual([]);
    const restored = createRecordsRouter({ collections, dataDir: target, logger: createMemoryLogger(), realtime: false, fileSweep: false });
    await restored.ready;
    try {
      expect(await restored.api.collection('notes').getFullList({ as: 'superuser' })).toHaveLength(5);
    } finally {
      await restored.close();
    }
  }, 120_000);

  test('a restore that fails half-way (a real write limit: ulimit -f) leaves the target as it was', async () => {
    const root = await ensureBuilt();
    const target = populatedDataDir();
    const before = snapshotTree(path.dirname(target));
    // 256 KiB per file: the archive's 300 KB files cannot be written. SIGXFSZ ignored, so the write fails with EFBIG instead of killing the process.
    const script = `ulimit -f 256; trap '' XFSZ; exec "${process.execPath}" "${path.join(root, 'dist/lib/cli/main.js')}" restore "${backupFile}" --data-dir "${target}" --force`;
    const failure = await run('bash', ['-c', script]).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(failure).toMatchObject({ code: 1, stderr: expect.stringMatching(/EFBIG|too large/i) });
    expect(snapshotTree(path.dirname(target))).toEqual(before);
  }, 120_000);
});

describe('a backup that fills the disk', () => {
  test('fails with a clear 503 backup_disk_full, keeps nothing, and the app serves on (a real write limit: ulimit -f in a child process)', async () => {
    const root = await ensureBuilt();
    const dir = tempDir('rb-full-');
    const script = path.join(dir, 'fill.mjs');
    writeFileSync(
      script,
      `import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { createRecordsRouter } from ${JSON.stringify(path.join(root, 'dist/lib/index.js'))};
const dataDir = ${JSON.stringify(path.join(dir, 'data'))};
const router = createRecordsRouter({ dataDir, collections: ${JSON.stringify(collections)}, realtime: false, fileSweep: false, logger: { error() {}, warn() {}, info() {} } });
await router.ready;
const notes = router.api.collection('notes');
// 24 MiB of incompressible files: the archive outgrows the 20 MiB limit while the 16 MiB write-ahead log still fits.
for (let i = 0; i < 24; i++) await notes.create({ title: 'n' + i, doc: { name: 'r.bin', data: randomBytes(1024 * 1024) } }, { as: 'superuser' });
const outcome = await router.backup().then(() => ({ ok: true }), (error) => ({ status: error.status, code: error.code, message: error.message }));
const after = await notes.create({ title: 'after' }, { as: 'superuser' });
const left = readdirSync(dataDir + '/backups');
console.log(JSON.stringify({ outcome, left, served: (await notes.getOne(after.id, { as: 'superuser' })).title }));
await router.close();
`,
    );
    const { stdout } = await run('bash', ['-c', `ulimit -f 20480; trap '' XFSZ; exec "${process.execPath}" "${script}"`], { maxBuffer: 1 << 20 });
    const result = JSON.parse(stdout.trim().split('\n').pop()!) as { outcome: { status: number; code: string; message: string }; left: string[]; served: string };
    expect(result.outcome).toMatchObject({ status: 503, code: 'backup_disk_full', message: expect.stringMatching(/disk .* is full \(EFBIG\)/) });
    expect(result.left).toEqual([]);
    expect(result.served).toBe('after');
  }, 180_000);
});
