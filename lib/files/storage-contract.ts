// Over 500 lines: one suite, a test per promise of the Storage interface, shipped whole as the entry point recordbase/storage-contract.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { types } from 'node:util';
import { InvalidStorageKeyError, StorageNotFoundError, type Storage, type StoredObject } from './storage.js';

/** What a contract run needs from an implementation: a fresh, empty store and a way to dispose of it. */
export interface StorageUnderTest {
  storage: Storage;
  /** Called after each test; may assert on what the store left behind, then removes it. */
  cleanup(): Promise<void>;
}

/**
 * The test runner's functions the suite declares its tests with. Jest's, Vitest's, Mocha's and
 * `node:test`'s (`it` as `test`) all fit. They are passed in rather than imported so that loading
 * this module never needs a runner's globals; the assertions use `node:assert`.
 */
export interface ContractTestFunctions {
  describe(name: string, body: () => void): unknown;
  test(name: string, body: () => Promise<void>): unknown;
  beforeEach(body: () => Promise<void>): unknown;
  afterEach(body: () => Promise<void>): unknown;
}

/** Options of `describeStorageContract`. */
export interface StorageContractOptions {
  /** Shown in the suite's title. */
  name: string;
  /** A fresh, empty store per test. */
  makeStorage(): Promise<StorageUnderTest>;
  /** The runner's `describe`, `test`, `beforeEach` and `afterEach`. */
  testFunctions: ContractTestFunctions;
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

/** A Date from any realm (a test runner's sandbox may have its own `Date`, so `instanceof` is unreliable). */
function isDate(value: unknown): value is Date {
  return Object.prototype.toString.call(value) === '[object Date]' && !Number.isNaN((value as Date).getTime());
}

function bufferSource(data: Buffer | string): Readable {
  return Readable.from([Buffer.from(data)], { objectMode: false });
}

/**
 * Awaits `promise` and resolves with its rejection, failing unless it rejects with an instance of
 * `type`. Our own helper rather than `assert.rejects`, whose class check misfires across realms
 * (Jest's module sandbox).
 */
async function expectRejection<T>(promise: Promise<unknown>, type: abstract new (...args: never[]) => T, what: string): Promise<T> {
  let outcome: { value: unknown } | { error: unknown };
  try {
    outcome = { value: await promise };
  } catch (error) {
    outcome = { error };
  }
  return expectFailure(outcome, type, what);
}

/** Runs `work` and returns what it threw, failing unless it threw (synchronously) an instance of `type`. */
function expectThrow<T>(work: () => unknown, type: abstract new (...args: never[]) => T, what: string): T {
  let outcome: { value: unknown } | { error: unknown };
  try {
    outcome = { value: work() };
  } catch (error) {
    outcome = { error };
  }
  return expectFailure(outcome, type, what);
}

function expectFailure<T>(outcome: { value: unknown } | { error: unknown }, type: abstract new (...args: never[]) => T, what: string): T {
  if (!('error' in outcome)) assert.fail(`${what}: expected a ${type.name} failure, but it succeeded with ${JSON.stringify(outcome.value)}`);
  // Errors made by Node itself (a premature close) come from the outer realm in a sandbox.
  const isExpected = outcome.error instanceof type || ((type as unknown) === Error && types.isNativeError(outcome.error));
  if (!isExpected) {
    assert.fail(`${what}: expected a ${type.name} failure, got ${outcome.error instanceof Error ? `${outcome.error.name}: ${outcome.error.message}` : String(outcome.error)}`);
  }
  return outcome.error as T;
}

/** Whether `file` names a regular file (following links); false when nothing or a folder is there. */
async function isRegularFile(file: string): Promise<boolean> {
  try {
    return (await fs.stat(file)).isFile();
  } catch {
    return false;
  }
}

/**
 * The behaviour every `Storage` implementation promises (lib/files/storage.ts, docs/storage.md),
 * as tests. Call it from a test file with a factory that gives a fresh, empty store per test:
 *
 * ```ts
 * import { describe, test, beforeEach, afterEach } from '@jest/globals';
 * import { describeStorageContract } from 'recordbase/storage-contract';
 * describeStorageContract({ name: 'myStorage', makeStorage, testFunctions: { describe, test, beforeEach, afterEach } });
 * ```
 */
export function describeStorageContract(options: StorageContractOptions): void {
  const { name, makeStorage } = options;
  const { describe, test, beforeEach, afterEach } = options.testFunctions;

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
    const text = async (key: string): Promise<string> => (await readAll(await storage.read(key))).toString();

    describe('write and read', () => {
      test('round-trips bytes and reports the size', async () => {
        const data = Buffer.from([0, 1, 2, 255, 254, 10, 13, 0]);
        assert.deepEqual(await storage.write('c/r/a.bin', bufferSource(data)), { size: data.length });
        assert.ok((await readAll(await storage.read('c/r/a.bin'))).equals(data));
      });

      test('round-trips 3 MB streamed in chunks', async () => {
        const data = randomBytes(3 * 1024 * 1024 + 17);
        assert.deepEqual(await storage.write('c/r/big.bin', chunkedSource(data)), { size: data.length });
        const back = await readAll(await storage.read('c/r/big.bin'));
        assert.equal(back.length, data.length);
        assert.ok(back.equals(data), 'the bytes read back differ from those written');
        assert.equal((await storage.stat('c/r/big.bin'))?.size, data.length);
      });

      test('stores an empty object', async () => {
        assert.deepEqual(await storage.write('c/r/empty.txt', Readable.from([], { objectMode: false })), { size: 0 });
        assert.equal((await readAll(await storage.read('c/r/empty.txt'))).length, 0);
        assert.equal((await storage.stat('c/r/empty.txt'))?.size, 0);
      });

      test('accepts a content type hint', async () => {
        await storage.write('c/r/a.png', bufferSource('png?'), { contentType: 'image/png' });
        assert.equal(await text('c/r/a.png'), 'png?');
      });

      test('an overwrite replaces the whole object, also with a shorter one', async () => {
        await storage.write('c/r/a.txt', bufferSource('a long first version'));
        await storage.write('c/r/a.txt', bufferSource('short'));
        assert.equal(await text('c/r/a.txt'), 'short');
        assert.equal((await storage.stat('c/r/a.txt'))?.size, 5);
        assert.deepEqual(await keys(), ['c/r/a.txt']);
      });

      test('keys are literal: percent-encoding is not decoded, unicode is kept', async () => {
        await storage.write('%2e%2e/x', bufferSource('literal'));
        await storage.write('c/r/名前_ünï.txt', bufferSource('unicode'));
        assert.equal(await text('%2e%2e/x'), 'literal');
        assert.equal(await text('c/r/名前_ünï.txt'), 'unicode');
        await expectRejection(storage.read('../x'), InvalidStorageKeyError, 'read("../x")');
        assert.deepEqual(await keys(), ['%2e%2e/x', 'c/r/名前_ünï.txt']);
      });

      test('keys sit side by side with thumbnail folders', async () => {
        await storage.write('c/r/a_0123456789.png', bufferSource('original'));
        await storage.write('c/r/thumbs_a_0123456789.png/100x100_a_0123456789.png', bufferSource('thumb'));
        assert.equal(await text('c/r/a_0123456789.png'), 'original');
        assert.equal(await text('c/r/thumbs_a_0123456789.png/100x100_a_0123456789.png'), 'thumb');
      });
    });

    describe('read', () => {
      test('a missing key rejects with StorageNotFoundError (a 404) before any stream exists', async () => {
        const error = await expectRejection(storage.read('c/r/missing.txt'), StorageNotFoundError, 'read of a missing key');
        assert.equal(error.status, 404);
        assert.equal(error.key, 'c/r/missing.txt');
      });

      test('a folder is not an object', async () => {
        await storage.write('c/r/a.txt', bufferSource('x'));
        for (const key of ['c/r', 'c', 'c/r/a.txt/deeper']) {
          await expectRejection(storage.read(key), StorageNotFoundError, `read(${JSON.stringify(key)})`);
        }
      });

      test('ranges are inclusive and clamp at the end', async () => {
        await storage.write('c/r/abc.txt', bufferSource('0123456789'));
        const slice = async (start: number, end: number): Promise<string> =>
          (await readAll(await storage.read('c/r/abc.txt', { start, end }))).toString();
        assert.equal(await slice(0, 0), '0');
        assert.equal(await slice(2, 5), '2345');
        assert.equal(await slice(9, 9), '9');
        assert.equal(await slice(7, 1000), '789');
        assert.equal(await slice(10, 20), '');
      });

      test('a range on an empty object is empty', async () => {
        await storage.write('c/r/empty.bin', Readable.from([], { objectMode: false }));
        assert.equal((await readAll(await storage.read('c/r/empty.bin', { start: 0, end: 0 }))).length, 0);
      });

      test('a range on 3 MB returns exactly those bytes', async () => {
        const data = randomBytes(3 * 1024 * 1024);
        await storage.write('c/r/big.bin', chunkedSource(data));
        const start = 1_000_003;
        const end = 2_500_001;
        assert.ok((await readAll(await storage.read('c/r/big.bin', { start, end }))).equals(data.subarray(start, end + 1)));
      });

      test('a malformed range is a RangeError', async () => {
        await storage.write('c/r/abc.txt', bufferSource('0123456789'));
        for (const range of [{ start: 5, end: 4 }, { start: -1, end: 3 }, { start: 0.5, end: 3 }, { start: 0, end: Number.NaN }]) {
          await expectRejection(storage.read('c/r/abc.txt', range), RangeError, `read with ${JSON.stringify(range)}`);
        }
      });

      test('a reader keeps one complete version while the key is overwritten', async () => {
        const first = Buffer.alloc(1024 * 1024, 1);
        const second = Buffer.alloc(1024 * 1024, 2);
        await storage.write('c/r/v.bin', bufferSource(first));
        const stream = await storage.read('c/r/v.bin');
        await storage.write('c/r/v.bin', bufferSource(second));
        let seen: Buffer | undefined;
        try {
          seen = await readAll(stream);
        } catch {
          // the contract also allows the stream to fail; it must never mix versions
        }
        if (seen) assert.ok(seen.equals(first) || seen.equals(second), 'a reader saw a mix of two versions');
        assert.ok((await readAll(await storage.read('c/r/v.bin'))).equals(second));
      });
    });

    describe('stat', () => {
      test('reports size and modification time; undefined when missing', async () => {
        const before = Date.now();
        await storage.write('c/r/a.txt', bufferSource('hello'));
        const info = await storage.stat('c/r/a.txt');
        assert.equal(info?.size, 5);
        assert.ok(isDate(info?.modified), 'modified is a Date');
        // Object stores keep whole seconds; clocks of a store and its client differ a little.
        assert.ok(info!.modified.getTime() >= before - 2000, 'modified is not before the write');
        assert.ok(info!.modified.getTime() <= Date.now() + 2000, 'modified is not in the future');
        assert.equal(await storage.stat('c/r/missing.txt'), undefined);
        assert.equal(await storage.stat('c/r'), undefined);
        assert.equal(await storage.stat('c/r/a.txt/deeper'), undefined);
      });
    });

    describe('delete', () => {
      test('removes one object and is idempotent', async () => {
        await storage.write('c/r/a.txt', bufferSource('a'));
        await storage.write('c/r/b.txt', bufferSource('b'));
        await storage.delete('c/r/a.txt');
        await expectRejection(storage.read('c/r/a.txt'), StorageNotFoundError, 'read after delete');
        assert.equal(await storage.delete('c/r/a.txt'), undefined);
        assert.equal(await storage.delete('never/was/here.txt'), undefined);
        assert.deepEqual(await keys(), ['c/r/b.txt']);
      });

      test('leaves the thumbnails and does not treat a folder as an object', async () => {
        await storage.write('c/r/a.png', bufferSource('a'));
        await storage.write('c/r/thumbs_a.png/10x10_a.png', bufferSource('t'));
        await storage.delete('c/r/a.png');
        assert.equal(await storage.delete('c/r/thumbs_a.png'), undefined);
        assert.deepEqual(await keys(), ['c/r/thumbs_a.png/10x10_a.png']);
      });

      test('a key can be written again after it was deleted', async () => {
        await storage.write('c/r/a.txt', bufferSource('one'));
        await storage.delete('c/r/a.txt');
        await storage.write('c/r/a.txt', bufferSource('two'));
        assert.equal(await text('c/r/a.txt'), 'two');
      });
    });

    describe('deletePrefix', () => {
      test('removes a record folder, thumbnails included, and only whole segments', async () => {
        for (const key of ['c/r1/a.txt', 'c/r1/thumbs_a.png/10x10_a.png', 'c/r10/a.txt', 'c/r2/a.txt', 'c2/r1/a.txt']) {
          await storage.write(key, bufferSource(key));
        }
        await storage.deletePrefix('c/r1');
        assert.deepEqual(await keys(), ['c/r10/a.txt', 'c/r2/a.txt', 'c2/r1/a.txt']);
        assert.equal(await storage.deletePrefix('c/r1'), undefined);
        assert.equal(await storage.deletePrefix('nothing/here'), undefined);
      });

      test('removes one file\'s thumbnails', async () => {
        await storage.write('c/r/a.png', bufferSource('a'));
        await storage.write('c/r/thumbs_a.png/10x10_a.png', bufferSource('t1'));
        await storage.write('c/r/thumbs_a.png/20x20_a.png', bufferSource('t2'));
        await storage.deletePrefix('c/r/thumbs_a.png');
        assert.deepEqual(await keys(), ['c/r/a.png']);
      });

      test('removes the object the prefix names itself', async () => {
        await storage.write('c/r', bufferSource('an object named like a folder'));
        await storage.write('c/rr', bufferSource('a sibling'));
        await storage.deletePrefix('c/r');
        assert.deepEqual(await keys(), ['c/rr']);
      });

      test('refuses the empty prefix (the whole store)', async () => {
        await storage.write('c/r/a.txt', bufferSource('a'));
        await expectRejection(storage.deletePrefix(''), InvalidStorageKeyError, 'deletePrefix("")');
        assert.deepEqual(await keys(), ['c/r/a.txt']);
      });
    });

    describe('list', () => {
      test('lists objects with sizes and times, by whole-segment prefix', async () => {
        await storage.write('c/r1/a.txt', bufferSource('aaa'));
        await storage.write('c/r1/thumbs_a.png/10x10_a.png', bufferSource('tt'));
        await storage.write('c/r10/b.txt', bufferSource('b'));
        await storage.write('d/r/c.txt', bufferSource(''));
        const all = await collectList(storage.list(''));
        assert.deepEqual(
          all.map(({ key, size }) => ({ key, size })),
          [
            { key: 'c/r1/a.txt', size: 3 },
            { key: 'c/r1/thumbs_a.png/10x10_a.png', size: 2 },
            { key: 'c/r10/b.txt', size: 1 },
            { key: 'd/r/c.txt', size: 0 },
          ],
        );
        for (const entry of all) assert.ok(isDate(entry.modified), `${entry.key}: modified is a Date`);
        assert.deepEqual(await keys('c/r1'), ['c/r1/a.txt', 'c/r1/thumbs_a.png/10x10_a.png']);
        assert.deepEqual(await keys('c'), ['c/r1/a.txt', 'c/r1/thumbs_a.png/10x10_a.png', 'c/r10/b.txt']);
        assert.deepEqual(await keys('c/r1/a.txt'), ['c/r1/a.txt']);
        assert.deepEqual(await keys('c/r'), []);
        assert.deepEqual(await keys('missing/prefix'), []);
      });

      test('an empty store lists nothing', async () => {
        assert.deepEqual(await keys(), []);
      });

      test('lists more than 1000 objects (object stores page their listings)', async () => {
        const names = Array.from({ length: 1005 }, (_, i) => `c/many/f${String(i).padStart(4, '0')}.txt`);
        for (let i = 0; i < names.length; i += 50) {
          await Promise.all(names.slice(i, i + 50).map((key) => storage.write(key, bufferSource('x'))));
        }
        assert.deepEqual(await keys('c/many'), names);
        await storage.deletePrefix('c/many');
        assert.deepEqual(await keys(), []);
      });

      test('listed keys can be deleted as given', async () => {
        await storage.write('c/r/a.txt', bufferSource('a'));
        await storage.write('c/r/thumbs_a.txt/1x1_a.txt', bufferSource('b'));
        for (const entry of await collectList(storage.list(''))) await storage.delete(entry.key);
        assert.deepEqual(await keys(), []);
      });

      test('an unsafe prefix is refused when iteration starts', async () => {
        for (const prefix of ['../x', '/etc', 'a//b', 'a\\b']) {
          await expectRejection(collectList(storage.list(prefix)), InvalidStorageKeyError, `list(${JSON.stringify(prefix)})`);
        }
      });
    });

    describe('failures leave nothing behind', () => {
      test('a failing source rejects with its error and leaves no object', async () => {
        const error = new Error('too large');
        const seen = await expectRejection(storage.write('c/r/fail.bin', failingSource(200_000, error)), Error, 'write of a failing source');
        assert.equal(seen, error, 'the write rejects with the source\'s own error');
        await expectRejection(storage.read('c/r/fail.bin'), StorageNotFoundError, 'read after a failed write');
        assert.equal(await storage.stat('c/r/fail.bin'), undefined);
        assert.deepEqual(await keys(), []);
      });

      test('a failing overwrite keeps the previous version intact', async () => {
        await storage.write('c/r/keep.txt', bufferSource('previous'));
        const seen = await expectRejection(storage.write('c/r/keep.txt', failingSource(100_000)), Error, 'failing overwrite');
        assert.equal(seen.message, 'source failed');
        assert.equal(await text('c/r/keep.txt'), 'previous');
        assert.deepEqual(await keys(), ['c/r/keep.txt']);
      });

      test('a source destroyed without an error is a failure too', async () => {
        const source = new Readable({ read() {} });
        source.push(Buffer.alloc(1000, 7));
        setTimeout(() => source.destroy(), 20);
        await expectRejection(storage.write('c/r/cut.bin', source), Error, 'write of a destroyed source');
        assert.deepEqual(await keys(), []);
      });

      test('a source that fails at once leaves nothing', async () => {
        const source = new Readable({
          read() {
            this.destroy(new Error('immediately'));
          },
        });
        const seen = await expectRejection(storage.write('c/r/now.bin', source), Error, 'write of a source failing at once');
        assert.equal(seen.message, 'immediately');
        assert.deepEqual(await keys(), []);
      });
    });

    describe('a promised size', () => {
      test('a source that delivers the promised size is stored as without it', async () => {
        const small = Buffer.from('sized');
        assert.deepEqual(await storage.write('c/r/small.txt', bufferSource(small), { size: small.length }), { size: small.length });
        const big = randomBytes(3 * 1024 * 1024 + 5);
        assert.deepEqual(await storage.write('c/r/big.bin', chunkedSource(big), { size: big.length, contentType: 'application/octet-stream' }), { size: big.length });
        assert.ok((await readAll(await storage.read('c/r/big.bin'))).equals(big));
        assert.deepEqual(await storage.write('c/r/empty.txt', Readable.from([], { objectMode: false }), { size: 0 }), { size: 0 });
        assert.deepEqual(await keys(), ['c/r/big.bin', 'c/r/empty.txt', 'c/r/small.txt']);
      });

      test('a source longer or shorter than promised fails the write, stores nothing, keeps the previous version', async () => {
        await storage.write('c/r/keep.bin', bufferSource('previous'));
        const data = randomBytes(200_000);
        await expectRejection(storage.write('c/r/keep.bin', chunkedSource(data), { size: data.length - 1 }), Error, 'a source longer than promised');
        await expectRejection(storage.write('c/r/keep.bin', chunkedSource(data), { size: data.length + 1 }), Error, 'a source shorter than promised');
        await expectRejection(storage.write('c/r/new.bin', chunkedSource(data), { size: 10 }), Error, 'a new key, a source longer than promised');
        assert.equal(await text('c/r/keep.bin'), 'previous');
        assert.deepEqual(await keys(), ['c/r/keep.bin']);
      });

      test('a failing source with a promised size rejects with its error and leaves nothing', async () => {
        const error = new Error('cut off');
        const seen = await expectRejection(storage.write('c/r/cut.bin', failingSource(150_000, error), { size: 300_000 }), Error, 'a failing sized source');
        assert.equal(seen, error);
        assert.deepEqual(await keys(), []);
      });
    });

    describe('concurrency', () => {
      test('concurrent writes to one key end with exactly one complete version', async () => {
        const versions = [1, 2, 3, 4, 5].map((fill) => Buffer.alloc(512 * 1024 + fill * 1000, fill));
        const results = await Promise.allSettled(versions.map((data) => storage.write('c/r/race.bin', chunkedSource(data, 16 * 1024))));
        assert.deepEqual(results.map((result) => result.status), versions.map(() => 'fulfilled'));
        const final = await readAll(await storage.read('c/r/race.bin'));
        assert.ok(versions.some((data) => data.equals(final)), 'the object is one of the versions written, whole');
        assert.deepEqual((await collectList(storage.list(''))).map(({ key, size }) => ({ key, size })), [{ key: 'c/r/race.bin', size: final.length }]);
      });

      test('writes to different keys in one folder do not disturb each other', async () => {
        const names = Array.from({ length: 20 }, (_, i) => `c/r/f${i}.bin`);
        await Promise.all(names.map((key, i) => storage.write(key, chunkedSource(Buffer.alloc(40_000, i), 4096))));
        const listed = await collectList(storage.list('c/r'));
        assert.deepEqual(listed.map((entry) => entry.key).sort(), [...names].sort());
        for (const [i, key] of names.entries()) {
          assert.ok((await readAll(await storage.read(key))).equals(Buffer.alloc(40_000, i)), `${key} holds its own bytes`);
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
          assert.equal(entry.size, data.length);
          assert.ok((await readAll(await storage.read(entry.key))).equals(data), `${entry.key} is whole`);
        }
      });
    });

    describe('localPath, when the adapter offers it', () => {
      // Optional: an adapter without it only has to leave it absent (not some other value).
      const offeredLocalPath = (): ((key: string) => string) | undefined => {
        const method: unknown = storage.localPath;
        assert.ok(method === undefined || typeof method === 'function', `localPath is a method or absent, not a ${typeof method}`);
        return storage.localPath?.bind(storage);
      };

      test('an absolute path to a regular file holding exactly what read gives; no file for a missing key, a folder or a deleted object', async () => {
        const localPath = offeredLocalPath();
        if (localPath === undefined) return;
        const data = randomBytes(300_000);
        await storage.write('c/r/a.bin', chunkedSource(data));
        await storage.write('c/r/thumbs_a.bin/10x10_a.bin', bufferSource('thumb'));
        const file = localPath('c/r/a.bin');
        assert.ok(path.isAbsolute(file), `localPath gave ${file}, not an absolute path`);
        assert.ok((await fs.readFile(file)).equals(data), 'the file holds other bytes than were written');
        assert.ok((await readAll(await storage.read('c/r/a.bin'))).equals(await fs.readFile(file)), 'the file holds other bytes than read gives');
        assert.equal(await fs.readFile(localPath('c/r/thumbs_a.bin/10x10_a.bin'), 'utf8'), 'thumb');
        for (const key of ['c/r/missing.bin', 'c/r', 'c/r/thumbs_a.bin']) {
          assert.equal(await isRegularFile(localPath(key)), false, `a regular file at localPath(${JSON.stringify(key)}), which holds no object`);
        }
        await storage.delete('c/r/a.bin');
        assert.equal(await isRegularFile(file), false, 'the file is still there after delete');
      });

      test('an overwrite puts a new file at the path: one opened before keeps its bytes', async () => {
        const localPath = offeredLocalPath();
        if (localPath === undefined) return;
        await storage.write('c/r/v.txt', bufferSource('the first, longer version'));
        const opened = await fs.open(localPath('c/r/v.txt'), 'r');
        try {
          await storage.write('c/r/v.txt', bufferSource('second'));
          assert.equal((await opened.readFile()).toString(), 'the first, longer version', 'the file was changed in place');
        } finally {
          await opened.close();
        }
        assert.equal(await fs.readFile(localPath('c/r/v.txt'), 'utf8'), 'second');
      });

      test('an unsafe key throws InvalidStorageKeyError', async () => {
        const localPath = offeredLocalPath();
        if (localPath === undefined) return;
        for (const key of UNSAFE_KEYS) expectThrow(() => localPath(key), InvalidStorageKeyError, `localPath(${JSON.stringify(key)})`);
      });
    });

    describe('unsafe keys', () => {
      for (const key of UNSAFE_KEYS) {
        test(`${JSON.stringify(key)} is refused by every method`, async () => {
          const source = bufferSource('should never be stored');
          await expectRejection(storage.write(key, source), InvalidStorageKeyError, 'write');
          await expectRejection(storage.read(key), InvalidStorageKeyError, 'read');
          await expectRejection(storage.stat(key), InvalidStorageKeyError, 'stat');
          await expectRejection(storage.delete(key), InvalidStorageKeyError, 'delete');
          await expectRejection(storage.deletePrefix(key), InvalidStorageKeyError, 'deletePrefix');
          if (key !== '') await expectRejection(collectList(storage.list(key)), InvalidStorageKeyError, 'list');
          assert.deepEqual(await keys(), []);
        });
      }

      test('the refusal says why and is a client error', async () => {
        const error = await expectRejection(storage.read('a/../../b'), InvalidStorageKeyError, 'read("a/../../b")');
        assert.equal(error.status, 400);
        assert.equal(error.code, 'storage_invalid_key');
        assert.equal(error.key, 'a/../../b');
        assert.match(error.message, /\.\./);
      });
    });
  });
}
