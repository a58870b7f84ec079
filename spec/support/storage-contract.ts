import { afterEach, beforeEach, describe, expect, test } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import {
  InvalidStorageKeyError,
  StorageNotFoundError,
  type Storage,
  type StoredObject,
} from '../../lib/files/storage.js';

/** What a contract run needs from an implementation: a fresh, empty store and a way to dispose of it. */
export interface StorageUnderTest {
  storage: Storage;
  cleanup(): Promise<void>;
}

/** Keys that every implementation must refuse with `InvalidStorageKeyError` before touching anything. */
export const UNSAFE_KEYS: ReadonlyArray<string> = [
  '',
  '../x',
  '/etc/passwd',
  'a/../../b',
  'a/..',
  '..',
  '.',
  './a',
  'a/./b',
  'a\\b',
  '..\\x',
  'a//b',
  'a/',
  '/',
  'a\u0000b',
  'a\nb',
  'a\u007fb',
  `a/${'x'.repeat(256)}`,
];

/** Reads a stream to the end. */
export async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array));
  return Buffer.concat(chunks);
}

/** Collects a listing, sorted by key (the contract promises no order). */
export async function collectList(listing: AsyncIterable<StoredObject>): Promise<StoredObject[]> {
  const all: StoredObject[] = [];
  for await (const entry of listing) all.push(entry);
  return all.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/** A source that yields `data` in chunks of `chunkSize`, yielding to the event loop between them. */
export function chunkedSource(data: Buffer, chunkSize = 64 * 1024): Readable {
  return Readable.from(
    (async function* () {
      for (let offset = 0; offset < data.length; offset += chunkSize) {
        await nextTurn();
        yield data.subarray(offset, offset + chunkSize);
      }
    })(),
    { objectMode: false },
  );
}

/** A source that sends some bytes and then fails, as an upload over its size limit or a dropped client would. */
export function failingSource(bytesBeforeFailure: number, error = new Error('source failed')): Readable {
  return Readable.from(
    (async function* () {
      yield randomBytes(bytesBeforeFailure);
      await nextTurn();
      throw error;
    })(),
    { objectMode: false },
  );
}

/** A Date from any realm (Jest's ESM sandbox has its own `Date`, so `instanceof` is unreliable there). */
function isDate(value: unknown): value is Date {
  return Object.prototype.toString.call(value) === '[object Date]' && !Number.isNaN((value as Date).getTime());
}

function bufferSource(data: Buffer | string): Readable {
  return Readable.from([Buffer.from(data)], { objectMode: false });
}

/**
 * The behaviour every `Storage` implementation promises (lib/files/storage.ts), as tests. Run it
 * from an implementation's own spec file with a factory that gives a fresh, empty store per test.
 */
export function describeStorageContract(name: string, makeStorage: () => Promise<StorageUnderTest>): void {
  describe(`Storage contract: ${name}`, () => {
    let subject: StorageUnderTest;
    let storage: Storage;

    beforeEach(async () => {
      subject = await makeStorage();
      storage = subject.storage;
    });

    afterEach(async () => {
      await subject.cleanup();
    });

    const keys = async (prefix = ''): Promise<string[]> => (await collectList(storage.list(prefix))).map((entry) => entry.key);

    describe('write and read', () => {
      test('round-trips bytes and reports the size', async () => {
        const data = Buffer.from([0, 1, 2, 255, 254, 10, 13, 0]);
        await expect(storage.write('c/r/a.bin', bufferSource(data))).resolves.toEqual({ size: data.length });
        expect(await readAll(await storage.read('c/r/a.bin'))).toEqual(data);
      });

      test('round-trips 3 MB streamed in chunks', async () => {
        const data = randomBytes(3 * 1024 * 1024 + 17);
        await expect(storage.write('c/r/big.bin', chunkedSource(data))).resolves.toEqual({ size: data.length });
        const back = await readAll(await storage.read('c/r/big.bin'));
        expect(back.length).toBe(data.length);
        expect(back.equals(data)).toBe(true);
        expect((await storage.stat('c/r/big.bin'))?.size).toBe(data.length);
      });

      test('stores an empty object', async () => {
        await expect(storage.write('c/r/empty.txt', Readable.from([], { objectMode: false }))).resolves.toEqual({ size: 0 });
        expect((await readAll(await storage.read('c/r/empty.txt'))).length).toBe(0);
        expect((await storage.stat('c/r/empty.txt'))?.size).toBe(0);
      });

      test('accepts a content type hint', async () => {
        await storage.write('c/r/a.png', bufferSource('png?'), { contentType: 'image/png' });
        expect((await readAll(await storage.read('c/r/a.png'))).toString()).toBe('png?');
      });

      test('an overwrite replaces the whole object, also with a shorter one', async () => {
        await storage.write('c/r/a.txt', bufferSource('a long first version'));
        await storage.write('c/r/a.txt', bufferSource('short'));
        expect((await readAll(await storage.read('c/r/a.txt'))).toString()).toBe('short');
        expect((await storage.stat('c/r/a.txt'))?.size).toBe(5);
        expect(await keys()).toEqual(['c/r/a.txt']);
      });

      test('keys are literal: percent-encoding is not decoded, unicode is kept', async () => {
        await storage.write('%2e%2e/x', bufferSource('literal'));
        await storage.write('c/r/名前_ünï.txt', bufferSource('unicode'));
        expect((await readAll(await storage.read('%2e%2e/x'))).toString()).toBe('literal');
        expect((await readAll(await storage.read('c/r/名前_ünï.txt'))).toString()).toBe('unicode');
        await expect(storage.read('../x')).rejects.toBeInstanceOf(InvalidStorageKeyError);
        expect(await keys()).toEqual(['%2e%2e/x', 'c/r/名前_ünï.txt']);
      });

      test('keys sit side by side with thumbnail folders', async () => {
        await storage.write('c/r/a_0123456789.png', bufferSource('original'));
        await storage.write('c/r/thumbs_a_0123456789.png/100x100_a_0123456789.png', bufferSource('thumb'));
        expect((await readAll(await storage.read('c/r/a_0123456789.png'))).toString()).toBe('original');
        expect((await readAll(await storage.read('c/r/thumbs_a_0123456789.png/100x100_a_0123456789.png'))).toString()).toBe('thumb');
      });
    });

    describe('read', () => {
      test('a missing key rejects with StorageNotFoundError (a 404) before any stream exists', async () => {
        const failure = storage.read('c/r/missing.txt');
        await expect(failure).rejects.toBeInstanceOf(StorageNotFoundError);
        await expect(failure).rejects.toMatchObject({ status: 404, key: 'c/r/missing.txt' });
      });

      test('a folder is not an object', async () => {
        await storage.write('c/r/a.txt', bufferSource('x'));
        await expect(storage.read('c/r')).rejects.toBeInstanceOf(StorageNotFoundError);
        await expect(storage.read('c')).rejects.toBeInstanceOf(StorageNotFoundError);
        await expect(storage.read('c/r/a.txt/deeper')).rejects.toBeInstanceOf(StorageNotFoundError);
      });

      test('ranges are inclusive and clamp at the end', async () => {
        await storage.write('c/r/abc.txt', bufferSource('0123456789'));
        const slice = async (start: number, end: number): Promise<string> =>
          (await readAll(await storage.read('c/r/abc.txt', { start, end }))).toString();
        expect(await slice(0, 0)).toBe('0');
        expect(await slice(2, 5)).toBe('2345');
        expect(await slice(9, 9)).toBe('9');
        expect(await slice(7, 1000)).toBe('789');
        expect(await slice(10, 20)).toBe('');
      });

      test('a range on 3 MB returns exactly those bytes', async () => {
        const data = randomBytes(3 * 1024 * 1024);
        await storage.write('c/r/big.bin', chunkedSource(data));
        const start = 1_000_003;
        const end = 2_500_001;
        expect((await readAll(await storage.read('c/r/big.bin', { start, end }))).equals(data.subarray(start, end + 1))).toBe(true);
      });

      test('a malformed range is a RangeError', async () => {
        await storage.write('c/r/abc.txt', bufferSource('0123456789'));
        for (const range of [{ start: 5, end: 4 }, { start: -1, end: 3 }, { start: 0.5, end: 3 }, { start: 0, end: Number.NaN }]) {
          await expect(storage.read('c/r/abc.txt', range)).rejects.toBeInstanceOf(RangeError);
        }
      });

      test('a reader keeps one complete version while the key is overwritten', async () => {
        const first = Buffer.alloc(1024 * 1024, 1);
        const second = Buffer.alloc(1024 * 1024, 2);
        await storage.write('c/r/v.bin', bufferSource(first));
        const stream = await storage.read('c/r/v.bin');
        await storage.write('c/r/v.bin', bufferSource(second));
        try {
          const seen = await readAll(stream);
          expect(seen.equals(first) || seen.equals(second)).toBe(true);
        } catch {
          // the contract also allows the stream to fail; it must never mix versions
        }
        expect((await readAll(await storage.read('c/r/v.bin'))).equals(second)).toBe(true);
      });
    });

    describe('stat', () => {
      test('reports size and modification time; undefined when missing', async () => {
        const before = Date.now();
        await storage.write('c/r/a.txt', bufferSource('hello'));
        const info = await storage.stat('c/r/a.txt');
        expect(info?.size).toBe(5);
        expect(isDate(info?.modified)).toBe(true);
        expect(info!.modified.getTime()).toBeGreaterThanOrEqual(before - 2000);
        expect(info!.modified.getTime()).toBeLessThanOrEqual(Date.now() + 2000);
        await expect(storage.stat('c/r/missing.txt')).resolves.toBeUndefined();
        await expect(storage.stat('c/r')).resolves.toBeUndefined();
        await expect(storage.stat('c/r/a.txt/deeper')).resolves.toBeUndefined();
      });
    });

    describe('delete', () => {
      test('removes one object and is idempotent', async () => {
        await storage.write('c/r/a.txt', bufferSource('a'));
        await storage.write('c/r/b.txt', bufferSource('b'));
        await storage.delete('c/r/a.txt');
        await expect(storage.read('c/r/a.txt')).rejects.toBeInstanceOf(StorageNotFoundError);
        await expect(storage.delete('c/r/a.txt')).resolves.toBeUndefined();
        await expect(storage.delete('never/was/here.txt')).resolves.toBeUndefined();
        expect(await keys()).toEqual(['c/r/b.txt']);
      });

      test('leaves the thumbnails and does not treat a folder as an object', async () => {
        await storage.write('c/r/a.png', bufferSource('a'));
        await storage.write('c/r/thumbs_a.png/10x10_a.png', bufferSource('t'));
        await storage.delete('c/r/a.png');
        await expect(storage.delete('c/r/thumbs_a.png')).resolves.toBeUndefined();
        expect(await keys()).toEqual(['c/r/thumbs_a.png/10x10_a.png']);
      });

      test('a key can be written again after it was deleted', async () => {
        await storage.write('c/r/a.txt', bufferSource('one'));
        await storage.delete('c/r/a.txt');
        await storage.write('c/r/a.txt', bufferSource('two'));
        expect((await readAll(await storage.read('c/r/a.txt'))).toString()).toBe('two');
      });
    });

    describe('deletePrefix', () => {
      test('removes a record folder, thumbnails included, and only whole segments', async () => {
        for (const key of ['c/r1/a.txt', 'c/r1/thumbs_a.png/10x10_a.png', 'c/r10/a.txt', 'c/r2/a.txt', 'c2/r1/a.txt']) {
          await storage.write(key, bufferSource(key));
        }
        await storage.deletePrefix('c/r1');
        expect(await keys()).toEqual(['c/r10/a.txt', 'c/r2/a.txt', 'c2/r1/a.txt']);
        await expect(storage.deletePrefix('c/r1')).resolves.toBeUndefined();
        await expect(storage.deletePrefix('nothing/here')).resolves.toBeUndefined();
      });

      test('removes one file\'s thumbnails', async () => {
        await storage.write('c/r/a.png', bufferSource('a'));
        await storage.write('c/r/thumbs_a.png/10x10_a.png', bufferSource('t1'));
        await storage.write('c/r/thumbs_a.png/20x20_a.png', bufferSource('t2'));
        await storage.deletePrefix('c/r/thumbs_a.png');
        expect(await keys()).toEqual(['c/r/a.png']);
      });

      test('refuses the empty prefix (the whole store)', async () => {
        await storage.write('c/r/a.txt', bufferSource('a'));
        await expect(storage.deletePrefix('')).rejects.toBeInstanceOf(InvalidStorageKeyError);
        expect(await keys()).toEqual(['c/r/a.txt']);
      });
    });

    describe('list', () => {
      test('lists objects with sizes and times, by whole-segment prefix', async () => {
        await storage.write('c/r1/a.txt', bufferSource('aaa'));
        await storage.write('c/r1/thumbs_a.png/10x10_a.png', bufferSource('tt'));
        await storage.write('c/r10/b.txt', bufferSource('b'));
        await storage.write('d/r/c.txt', bufferSource(''));
        const all = await collectList(storage.list(''));
        expect(all.map(({ key, size }) => ({ key, size }))).toEqual([
          { key: 'c/r1/a.txt', size: 3 },
          { key: 'c/r1/thumbs_a.png/10x10_a.png', size: 2 },
          { key: 'c/r10/b.txt', size: 1 },
          { key: 'd/r/c.txt', size: 0 },
        ]);
        for (const entry of all) expect(isDate(entry.modified)).toBe(true);
        expect(await keys('c/r1')).toEqual(['c/r1/a.txt', 'c/r1/thumbs_a.png/10x10_a.png']);
        expect(await keys('c')).toEqual(['c/r1/a.txt', 'c/r1/thumbs_a.png/10x10_a.png', 'c/r10/b.txt']);
        expect(await keys('c/r1/a.txt')).toEqual(['c/r1/a.txt']);
        expect(await keys('c/r')).toEqual([]);
        expect(await keys('missing/prefix')).toEqual([]);
      });

      test('an empty store lists nothing', async () => {
        expect(await keys()).toEqual([]);
      });

      test('listed keys can be deleted as given', async () => {
        await storage.write('c/r/a.txt', bufferSource('a'));
        await storage.write('c/r/thumbs_a.txt/1x1_a.txt', bufferSource('b'));
        for (const entry of await collectList(storage.list(''))) await storage.delete(entry.key);
        expect(await keys()).toEqual([]);
      });

      test('an unsafe prefix is refused when iteration starts', async () => {
        for (const prefix of ['../x', '/etc', 'a//b', 'a\\b']) {
          await expect(collectList(storage.list(prefix))).rejects.toBeInstanceOf(InvalidStorageKeyError);
        }
      });
    });

    describe('failures leave nothing behind', () => {
      test('a failing source rejects with its error and leaves no object', async () => {
        const error = new Error('too large');
        await expect(storage.write('c/r/fail.bin', failingSource(200_000, error))).rejects.toBe(error);
        await expect(storage.read('c/r/fail.bin')).rejects.toBeInstanceOf(StorageNotFoundError);
        await expect(storage.stat('c/r/fail.bin')).resolves.toBeUndefined();
        expect(await keys()).toEqual([]);
      });

      test('a failing overwrite keeps the previous version intact', async () => {
        await storage.write('c/r/keep.txt', bufferSource('previous'));
        await expect(storage.write('c/r/keep.txt', failingSource(100_000))).rejects.toThrow('source failed');
        expect((await readAll(await storage.read('c/r/keep.txt'))).toString()).toBe('previous');
        expect(await keys()).toEqual(['c/r/keep.txt']);
      });

      test('a source destroyed without an error is a failure too', async () => {
        const source = new Readable({ read() {} });
        source.push(Buffer.alloc(1000, 7));
        setTimeout(() => source.destroy(), 20);
        await expect(storage.write('c/r/cut.bin', source)).rejects.toThrow();
        expect(await keys()).toEqual([]);
      });

      test('a source that fails at once leaves nothing', async () => {
        const source = new Readable({
          read() {
            this.destroy(new Error('immediately'));
          },
        });
        await expect(storage.write('c/r/now.bin', source)).rejects.toThrow('immediately');
        expect(await keys()).toEqual([]);
      });
    });

    describe('concurrency', () => {
      test('concurrent writes to one key end with exactly one complete version', async () => {
        const versions = [1, 2, 3, 4, 5].map((fill) => Buffer.alloc(512 * 1024 + fill * 1000, fill));
        const results = await Promise.allSettled(versions.map((data) => storage.write('c/r/race.bin', chunkedSource(data, 16 * 1024))));
        expect(results.every((result) => result.status === 'fulfilled')).toBe(true);
        const final = await readAll(await storage.read('c/r/race.bin'));
        expect(versions.some((data) => data.equals(final))).toBe(true);
        expect(await collectList(storage.list(''))).toEqual([expect.objectContaining({ key: 'c/r/race.bin', size: final.length })]);
      });

      test('writes to different keys in one folder do not disturb each other', async () => {
        const names = Array.from({ length: 20 }, (_, i) => `c/r/f${i}.bin`);
        await Promise.all(names.map((key, i) => storage.write(key, chunkedSource(Buffer.alloc(40_000, i), 4096))));
        const listed = await collectList(storage.list('c/r'));
        expect(listed.map((entry) => entry.key).sort()).toEqual([...names].sort());
        for (const [i, key] of names.entries()) {
          expect((await readAll(await storage.read(key))).equals(Buffer.alloc(40_000, i))).toBe(true);
        }
      });

      test('writes racing with deletes of their folder never leave a partial object', async () => {
        const data = Buffer.alloc(100_000, 9);
        const work: Array<Promise<unknown>> = [];
        for (let i = 0; i < 10; i++) {
          work.push(storage.write(`c/r/x${i}.bin`, chunkedSource(data, 8192)).catch(() => undefined));
          work.push(storage.delete(`c/r/x${i - 1}.bin`));
          if (i % 3 === 0) work.push(storage.deletePrefix('c/r'));
        }
        await Promise.all(work);
        for (const entry of await collectList(storage.list(''))) {
          expect(entry.size).toBe(data.length);
          expect((await readAll(await storage.read(entry.key))).equals(data)).toBe(true);
        }
      });
    });

    describe('unsafe keys', () => {
      test.each(UNSAFE_KEYS.map((key) => [JSON.stringify(key), key]))('%s is refused by every method', async (_label, key) => {
        const source = bufferSource('should never be stored');
        await expect(storage.write(key, source)).rejects.toBeInstanceOf(InvalidStorageKeyError);
        await expect(storage.read(key)).rejects.toBeInstanceOf(InvalidStorageKeyError);
        await expect(storage.stat(key)).rejects.toBeInstanceOf(InvalidStorageKeyError);
        await expect(storage.delete(key)).rejects.toBeInstanceOf(InvalidStorageKeyError);
        await expect(storage.deletePrefix(key)).rejects.toBeInstanceOf(InvalidStorageKeyError);
        if (key !== '') await expect(collectList(storage.list(key))).rejects.toBeInstanceOf(InvalidStorageKeyError);
        expect(await keys()).toEqual([]);
      });

      test('the refusal says why and is a client error', async () => {
        const failure = storage.read('a/../../b');
        await expect(failure).rejects.toMatchObject({ status: 400, code: 'storage_invalid_key', key: 'a/../../b' });
        await expect(failure).rejects.toThrow(/\.\./);
      });
    });
  });
}
