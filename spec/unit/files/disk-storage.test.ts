import { afterEach, beforeEach, describe, expect, test } from '@jest/globals';
import { existsSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { diskStorage, type DiskStorage } from '../../../lib/files/disk-storage.js';
import { InvalidStorageKeyError, StorageNotFoundError } from '../../../lib/files/storage.js';
import {
  chunkedSource,
  collectList,
  describeStorageContract,
  failingSource,
  readAll,
  UNSAFE_KEYS,
} from '../../../lib/files/storage-contract.js';

/** A temp folder holding `root` and a sibling `secret.txt`, so escapes from root are visible. */
async function makeSandbox(): Promise<{ parent: string; root: string; secret: string }> {
  const parent = await fs.mkdtemp(path.join(os.tmpdir(), 'rb-disk-storage-'));
  const root = path.join(parent, 'root');
  const secret = path.join(parent, 'secret.txt');
  await fs.writeFile(secret, 'do not touch');
  return { parent, root, secret };
}

/** Every path under `dir`, relative, `/`-separated (directories end with `/`). */
async function walk(dir: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  let entries;
  try {
    entries = await fs.readdir(dir, { withFileTypes: true });
  } catch {
    return out;
  }
  for (const entry of entries) {
    const rel = prefix + entry.name;
    if (entry.isDirectory()) out.push(rel + '/', ...(await walk(path.join(dir, entry.name), rel + '/')));
    else out.push(rel);
  }
  return out.sort();
}

const source = (text: string): Readable => Readable.from([Buffer.from(text)], { objectMode: false });

describeStorageContract({
  name: 'diskStorage',
  testFunctions: { describe, test, beforeEach, afterEach },
  async makeStorage() {
    const sandbox = await makeSandbox();
    return {
      storage: diskStorage({ root: sandbox.root }),
      async cleanup() {
        // Nothing may ever land beside root, whatever the test did.
        expect((await fs.readdir(sandbox.parent)).sort()).toEqual(expect.arrayContaining(['secret.txt']));
        expect((await fs.readdir(sandbox.parent)).filter((name) => name !== 'root' && name !== 'secret.txt')).toEqual([]);
        expect(await fs.readFile(sandbox.secret, 'utf8')).toBe('do not touch');
        // No temp file survives a finished operation.
        expect((await walk(sandbox.root)).filter((p) => p.split('/').some((s) => s.startsWith('.tmp-')))).toEqual([]);
        await fs.rm(sandbox.parent, { recursive: true, force: true });
      },
    };
  },
});

describe('diskStorage on the filesystem', () => {
  let sandbox: { parent: string; root: string; secret: string };
  let storage: DiskStorage;

  beforeEach(async () => {
    sandbox = await makeSandbox();
    storage = diskStorage({ root: sandbox.root });
  });

  afterEach(async () => {
    await fs.rm(sandbox.parent, { recursive: true, force: true });
  });

  test('refuses a missing or empty root', () => {
    expect(() => diskStorage({ root: '' })).toThrow(TypeError);
    expect(() => diskStorage({ root: '   ' })).toThrow(TypeError);
    expect(() => diskStorage({} as never)).toThrow(TypeError);
  });

  test('exposes the absolute root and creates it only on the first write', async () => {
    const relative = diskStorage({ root: path.relative(process.cwd(), sandbox.root) });
    expect(relative.root).toBe(sandbox.root);
    expect(existsSync(sandbox.root)).toBe(false);
    await expect(storage.read('c/r/a.txt')).rejects.toBeInstanceOf(StorageNotFoundError);
    expect(await collectList(storage.list(''))).toEqual([]);
    await storage.delete('c/r/a.txt');
    await storage.deletePrefix('c/r');
    expect(existsSync(sandbox.root)).toBe(false);
    await storage.write('c/r/a.txt', source('x'));
    expect(await fs.readFile(path.join(sandbox.root, 'c', 'r', 'a.txt'), 'utf8')).toBe('x');
  });

  test('keys map to plain relative paths under root', async () => {
    await storage.write('pbc_1/abcdefghijklmno/a_0123456789.png', source('a'));
    await storage.write('pbc_1/abcdefghijklmno/thumbs_a_0123456789.png/100x100_a_0123456789.png', source('t'));
    expect(await walk(sandbox.root)).toEqual([
      'pbc_1/',
      'pbc_1/abcdefghijklmno/',
      'pbc_1/abcdefghijklmno/a_0123456789.png',
      'pbc_1/abcdefghijklmno/thumbs_a_0123456789.png/',
      'pbc_1/abcdefghijklmno/thumbs_a_0123456789.png/100x100_a_0123456789.png',
    ]);
  });

  test('localPath is the key\'s file under root, and refuses what the disk storage refuses (":", a ".tmp-" segment) without creating anything', () => {
    expect(storage.localPath('pbc_1/abcdefghijklmno/a_0123456789.png')).toBe(path.join(sandbox.root, 'pbc_1', 'abcdefghijklmno', 'a_0123456789.png'));
    for (const key of ['c/r/.tmp-deadbeef', 'c:/x', 'c/r/a:b']) expect(() => storage.localPath(key)).toThrow(InvalidStorageKeyError);
    expect(existsSync(sandbox.root)).toBe(false);
  });

  test('no temp file is left after successes, failures and races', async () => {
    await storage.write('c/r/ok.bin', chunkedSource(Buffer.alloc(300_000, 1)));
    await expect(storage.write('c/r/fail.bin', failingSource(150_000))).rejects.toThrow();
    await expect(storage.write('c/r/ok.bin', failingSource(150_000))).rejects.toThrow();
    await Promise.all([1, 2, 3].map((n) => storage.write('c/r/race.bin', chunkedSource(Buffer.alloc(200_000, n), 8192))));
    expect(await walk(sandbox.root)).toEqual(['c/', 'c/r/', 'c/r/ok.bin', 'c/r/race.bin']);
  });

  test('a failed first write into a new folder leaves neither a file nor the folders it made', async () => {
    await storage.write('c/keep.txt', source('k'));
    await expect(storage.write('c/r/s/fail.bin', failingSource(10))).rejects.toThrow();
    expect(await walk(sandbox.root)).toEqual(['c/', 'c/keep.txt']);
  });

  test('a stray temp file (a crash mid-write) is not listed and not addressable', async () => {
    await storage.write('c/r/a.txt', source('a'));
    await fs.writeFile(path.join(sandbox.root, 'c', 'r', '.tmp-deadbeef'), 'half');
    expect((await collectList(storage.list(''))).map((e) => e.key)).toEqual(['c/r/a.txt']);
    await expect(storage.read('c/r/.tmp-deadbeef')).rejects.toBeInstanceOf(InvalidStorageKeyError);
    await expect(storage.write('c/r/.tmp-x', source('no'))).rejects.toBeInstanceOf(InvalidStorageKeyError);
  });

  test('files a key could not name are skipped by list', async () => {
    await fs.mkdir(path.join(sandbox.root, 'c'), { recursive: true });
    await fs.writeFile(path.join(sandbox.root, 'c', 'bad\\name'), 'x');
    await fs.writeFile(path.join(sandbox.root, 'c', 'has:colon'), 'x');
    await fs.writeFile(path.join(sandbox.root, 'c', 'good.txt'), 'x');
    expect((await collectList(storage.list(''))).map((e) => e.key)).toEqual(['c/good.txt']);
  });

  test('delete and deletePrefix prune emptied folders up to, not including, root', async () => {
    await storage.write('c/r/a.txt', source('a'));
    await storage.write('c/r/thumbs_a.txt/1x1_a.txt', source('t'));
    await storage.write('c/other/b.txt', source('b'));
    await storage.deletePrefix('c/r/thumbs_a.txt');
    expect(await walk(sandbox.root)).toEqual(['c/', 'c/other/', 'c/other/b.txt', 'c/r/', 'c/r/a.txt']);
    await storage.delete('c/r/a.txt');
    expect(await walk(sandbox.root)).toEqual(['c/', 'c/other/', 'c/other/b.txt']);
    await storage.deletePrefix('c/other');
    expect(await walk(sandbox.root)).toEqual([]);
    expect(existsSync(sandbox.root)).toBe(true);
  });

  test('a reader keeps the version it opened when a write renames over it', async () => {
    await storage.write('c/r/v.bin', source('first version'));
    const stream = await storage.read('c/r/v.bin');
    await storage.write('c/r/v.bin', source('second'));
    await storage.delete('c/r/v.bin');
    expect((await readAll(stream)).toString()).toBe('first version');
  });

  test('writing where a file stands in for a folder fails cleanly', async () => {
    await storage.write('c/r', source('a file, not a folder'));
    await expect(storage.write('c/r/a.txt', source('x'))).rejects.toThrow();
    await storage.write('c/s/a.txt', source('x'));
    await expect(storage.write('c/s', source('over a folder'))).rejects.toThrow();
    expect((await collectList(storage.list(''))).map((e) => e.key)).toEqual(['c/r', 'c/s/a.txt']);
    expect((await walk(sandbox.root)).some((p) => p.includes('.tmp-'))).toBe(false);
  });

  test('works without fsync', async () => {
    const fast = diskStorage({ root: sandbox.root, fsync: false });
    await fast.write('c/r/a.txt', source('fast'));
    expect((await readAll(await fast.read('c/r/a.txt'))).toString()).toBe('fast');
  });

  test('adopt moves a local file into place: readable under its key, gone from where it was, replacing an older object', async () => {
    await storage.write('c/r/a.txt', source('old'));
    const spool = path.join(sandbox.parent, 'spool-1');
    await fs.writeFile(spool, 'moved bytes', { mode: 0o600 });
    expect(await storage.adopt!('c/r/a.txt', spool, { size: 11 })).toEqual({ size: 11 });
    expect(existsSync(spool)).toBe(false);
    expect((await readAll(await storage.read('c/r/a.txt'))).toString()).toBe('moved bytes');
    expect(await storage.stat('c/r/a.txt')).toMatchObject({ size: 11 });
    // The mode a written file gets, not the spool's private 0600.
    await storage.write('c/r/b.txt', source('written'));
    expect((await fs.stat(path.join(sandbox.root, 'c/r/a.txt'))).mode & 0o777).toBe((await fs.stat(path.join(sandbox.root, 'c/r/b.txt'))).mode & 0o777);
    expect((await walk(sandbox.root)).some((p) => p.includes('.tmp-'))).toBe(false);
  });

  test('adopt refuses a size that does not match, and an unsafe key, leaving the file and the store as they were', async () => {
    const spool = path.join(sandbox.parent, 'spool-2');
    await fs.writeFile(spool, 'twelve bytes');
    await expect(storage.adopt!('c/r/a.txt', spool, { size: 5 })).rejects.toThrow();
    await expect(storage.adopt!('../secret.txt', spool)).rejects.toThrow(InvalidStorageKeyError);
    expect(existsSync(spool)).toBe(true);
    expect(await storage.stat('c/r/a.txt')).toBeUndefined();
    expect(await fs.readFile(sandbox.secret, 'utf8')).toBe('do not touch');
  });

  describe('nothing escapes root', () => {
    const hostile = [
      ...UNSAFE_KEYS,
      '../secret.txt',
      '../root/../secret.txt',
      'c/../../secret.txt',
      '..\\secret.txt',
      '/tmp/evil',
      '//server/share/x',
      'C:/Windows/x',
      'C:\\Windows\\x',
      'c:evil',
      '\\\\server\\share',
      '../\u0000secret.txt',
      'secret.txt\u0000.png',
      'a/\u0085b',
    ];

    test.each(hostile.map((key) => [JSON.stringify(key), key]))('%s is refused and nothing changes outside root', async (_label, key) => {
      await expect(storage.write(key, source('pwned'))).rejects.toBeInstanceOf(InvalidStorageKeyError);
      await expect(storage.read(key)).rejects.toBeInstanceOf(InvalidStorageKeyError);
      await expect(storage.delete(key)).rejects.toBeInstanceOf(InvalidStorageKeyError);
      if (key !== '') await expect(storage.deletePrefix(key)).rejects.toBeInstanceOf(InvalidStorageKeyError);
      expect((await fs.readdir(sandbox.parent)).sort()).toEqual(['secret.txt']);
      expect(await fs.readFile(sandbox.secret, 'utf8')).toBe('do not touch');
    });

    test('encoded dots and slashes are literal names inside root', async () => {
      for (const key of ['%2e%2e/secret.txt', '..%2fsecret.txt', '%2e%2e%2fsecret.txt', '.%2e/x', '%252e%252e/x', '..%5csecret.txt', '\u202e../x', '..\u200b/x']) {
        await storage.write(key, source(key));
        expect(existsSync(path.join(sandbox.root, ...key.split('/')))).toBe(true);
        expect((await readAll(await storage.read(key))).toString()).toBe(key);
      }
      expect(await fs.readFile(sandbox.secret, 'utf8')).toBe('do not touch');
      expect((await fs.readdir(sandbox.parent)).sort()).toEqual(['root', 'secret.txt']);
    });

    test('names with leading dots (not "." or "..") are ordinary', async () => {
      await storage.write('c/...', source('three dots'));
      await storage.write('c/.hidden', source('hidden'));
      expect((await collectList(storage.list('c'))).map((e) => e.key)).toEqual(['c/...', 'c/.hidden']);
      expect(existsSync(path.join(sandbox.root, 'c', '...'))).toBe(true);
    });

    test('unicode keys are stored under their own names', async () => {
      const keys = ['c/r/名前.txt', 'c/r/ünï\u0301.txt', 'c/r/emoji_😀.txt', 'c/r/\u202eexe.txt'];
      for (const key of keys) await storage.write(key, source(key));
      for (const key of keys) expect((await readAll(await storage.read(key))).toString()).toBe(key);
      expect((await fs.readdir(path.join(sandbox.root, 'c', 'r'))).sort()).toEqual(keys.map((k) => k.slice(4)).sort());
    });

    test('a root of "/" still checks containment', async () => {
      const rootStorage = diskStorage({ root: '/' });
      await expect(rootStorage.read('../etc/passwd')).rejects.toBeInstanceOf(InvalidStorageKeyError);
      await expect(rootStorage.stat('definitely-not-here-rb-test/x')).resolves.toBeUndefined();
    });
  });
});
