import type { Readable } from 'node:stream';
import { describeError, RecordbaseError } from '../errors.js';

/**
 * The storage adapter contract: where uploaded files and thumbnails live.
 *
 * A host may pass its own implementation (S3, GCS, memory...) as `storage`; `diskStorage()` is the
 * default. The interface is deliberately small and policy-free: naming, MIME checks, thumbnails,
 * access rules and cleanup decisions live in our code (lib/files), never in an adapter. Every
 * implementation must pass `describeStorageContract` (`recordbase/storage-contract`).
 *
 * Keys
 * ----
 * A key is a relative, `/`-separated path built by our code only (see file-names.ts):
 * `{collectionId}/{recordId}/{name}` and `{collectionId}/{recordId}/thumbs_{name}/{spec}_{name}`.
 * Keys are case-sensitive and compared byte for byte; they are never URL-decoded (`%2e%2e` is a
 * literal segment). Even so, every method first checks its key with `assertStorageKey` and rejects
 * an unsafe one with `InvalidStorageKeyError` before touching anything: a last line of defence in
 * case a client string ever reaches a key by mistake.
 *
 * Prefixes
 * --------
 * `list` and `deletePrefix` take a prefix made of whole segments (`{collectionId}/{recordId}`),
 * checked like a key. It selects the key equal to it and every key below `prefix + '/'`; it never
 * matches a partial segment: prefix `c/r1` does not select `c/r10/x`. (An object store that lists
 * by raw string prefix must therefore append the `/` itself.)
 *
 * Errors
 * ------
 * - A missing key: `read` rejects with `StorageNotFoundError`; `stat` resolves `undefined`;
 *   `delete` and `deletePrefix` resolve (nothing to do). A "folder" (a prefix with keys below it)
 *   is not an object: for `read`, `stat` and `delete` it counts as missing.
 * - An unsafe key or prefix: every method rejects with `InvalidStorageKeyError` (`list` when
 *   iteration starts), and nothing is read or written.
 * - A bad range: `read` rejects with a `RangeError`.
 * - Anything else (disk full, permissions, network): the method rejects with the underlying
 *   error; the caller turns it into a 500 and logs it. Adapters do not retry for the caller.
 */
export interface Storage {
  /**
   * Stores the bytes of `source` under `key`, replacing any previous object, and resolves with
   * the number of bytes stored once the object is complete and readable.
   *
   * - Atomic: a concurrent `read`/`stat`/`list` sees either the previous object (or none) or
   *   the complete new one, never a partial one. Concurrent writes to one key end with exactly
   *   one of them, complete (last one to finish wins).
   * - If `source` errors (a size limit hit, a client that disconnected) or the store fails, the
   *   promise rejects with that error, nothing of the new bytes remains (no partial object, no
   *   temporary file visible to `list`), and a previous object under the key is left unchanged.
   * - The source is consumed to its end (or destroyed on failure); the adapter does not close
   *   anything else.
   * - A write racing with `delete`/`deletePrefix` of the same key or folder either completes (the
   *   object then exists) or rejects; it never leaves a partial object.
   *
   * `options.contentType` is a hint for stores that keep metadata (object stores); it is never
   * trusted for serving (our code sniffs and decides), and the disk storage ignores it.
   */
  write(key: string, source: Readable, options?: StorageWriteOptions): Promise<StorageWriteResult>;

  /**
   * Optional fast path of `write` for a local file the caller gives up (an upload's spool file):
   * stores the file under `key` by moving it, with the guarantees of `write` (atomic, `size`
   * checked, durable when the adapter flushes writes). Resolves `undefined` without touching
   * anything when it cannot move it (another filesystem): the caller then streams the bytes
   * with `write`. After a move the file is gone from where it was.
   */
  adopt?(key: string, file: string, options?: StorageWriteOptions): Promise<StorageWriteResult | undefined>;

  /**
   * Opens the object under `key` and resolves with a stream of its bytes, or of the inclusive
   * byte `range` (`{start: 0, end: 9}` is the first ten bytes, as in HTTP Range and
   * `fs.createReadStream`).
   *
   * - Rejects with `StorageNotFoundError` when there is no object (the check happens before the
   *   promise resolves, so a caller can still answer 404 before sending headers).
   * - The stream delivers one complete version: if the object is replaced or deleted while it is
   *   read, the reader either keeps the version it opened or the stream errors; it never mixes two.
   * - Range: `start` and `end` are integers with `0 <= start <= end`, otherwise `RangeError`. An
   *   `end` past the object is clamped to its last byte; a `start` at or past the end gives an
   *   empty stream. Checking a range against the size (HTTP 416) is the caller's job, with `stat`.
   * - The caller must consume or destroy the stream, which releases what the adapter holds open.
   */
  read(key: string, range?: ByteRange): Promise<Readable>;

  /**
   * Resolves with the size and last-modified time of the object under `key`, or `undefined` when
   * there is none. Never rejects for a missing key: "does it exist" is a normal question (ETag,
   * Content-Length, the cleanup sweep).
   */
  stat(key: string): Promise<StoredObjectInfo | undefined>;

  /**
   * Removes the object under `key`. Idempotent: a missing key resolves without error, so a retried
   * cleanup never fails on what an earlier attempt already removed. Other keys (including
   * thumbnails under `thumbs_{name}/`) are untouched; use `deletePrefix` for those.
   */
  delete(key: string): Promise<void>;

  /**
   * Removes every object selected by `prefix` (see Prefixes above), typically a record's folder
   * `{collectionId}/{recordId}` or a file's thumbnails `{collectionId}/{recordId}/thumbs_{name}`.
   * Idempotent: nothing to remove resolves. An empty prefix (the whole store) is refused with
   * `InvalidStorageKeyError`, so one bug cannot wipe every file. Objects written concurrently
   * under the prefix may survive; the cleanup sweep catches them later.
   */
  deletePrefix(prefix: string): Promise<void>;

  /**
   * Yields every complete object selected by `prefix`, in no particular order, for the cleanup
   * sweep. `''` lists the whole store. In-progress writes are never yielded; objects written or
   * removed during the iteration may or may not appear. Keys are yielded exactly as `write`
   * accepted them, so they can be passed back to `delete`.
   */
  list(prefix: string): AsyncIterable<StoredObject>;

  /**
   * Optional: the absolute path of the local file that holds the object under `key`, for code that
   * takes a store's files as they lie instead of streaming each through `read` (a backup hard-links
   * every file `list` yields into its snapshot). Only an adapter whose objects are plain files on
   * this machine, byte for byte, offers it; one that keeps them elsewhere (an object store, memory)
   * or transforms them (encryption, compression) leaves it out, whatever other properties it has,
   * and backups then say its files are not included.
   *
   * - Synchronous and touching nothing: the path is computed from the key, not looked up. An
   *   unsafe key throws `InvalidStorageKeyError` (the adapter's own stricter rules included).
   * - While an object exists under `key`, the path names a regular file holding exactly the bytes
   *   `read(key)` gives; when none does, no regular file is there.
   * - The file is never changed in place: `write` puts a complete new file there (a rename over the
   *   old one), so a hard link or an open handle taken earlier keeps the version it had.
   * - The caller only reads or links what the path names; it never writes, moves or removes it.
   */
  localPath?(key: string): string;
}

/** Options for `Storage.write`; an object so that adapters can grow options without breaking callers. */
export interface StorageWriteOptions {
  /** The MIME type our code decided on, for stores that keep it as metadata. A hint only. */
  contentType?: string;
  /**
   * The exact number of bytes `source` delivers, when the caller knows it (an upload spooled to
   * disk). It lets an object store stream one PUT with a Content-Length instead of buffering the
   * file to learn its length. A promise, not a hint: a source that delivers a different count
   * fails the write (`checkSourceSize`), and nothing is stored.
   */
  size?: number;
}

/** What `Storage.write` reports: the stored size, so uploads need not count bytes twice. */
export interface StorageWriteResult {
  size: number;
}

/** An inclusive byte range, as HTTP Range requests and `fs.createReadStream` count. */
export interface ByteRange {
  start: number;
  end: number;
}

/** Enough metadata to serve a file (Content-Length, Last-Modified, ETag) and to age it for cleanup. */
export interface StoredObjectInfo {
  size: number;
  modified: Date;
}

/** One object as `Storage.list` yields it. */
export interface StoredObject extends StoredObjectInfo {
  key: string;
}

/**
 * Rejected by `Storage.read` for a key with no object. It is a 404 in the error hierarchy, so a
 * download handler that lets it propagate still answers correctly; the message stays generic
 * (the key is on `key`, for logs) because keys name internal ids.
 */
export class StorageNotFoundError extends RecordbaseError {
  readonly key: string;

  constructor(key: string) {
    super(describeError('storage_not_found'));
    this.key = key;
  }
}

/**
 * Rejected for a key or prefix that could escape the store or be read two ways (absolute, `..`,
 * backslashes, control characters, empty segments). Our code never builds such keys, so reaching
 * this means hostile input slipped through somewhere: it answers 400, never touches the store,
 * and the `reason` says what was wrong (for logs and tests).
 */
export class InvalidStorageKeyError extends RecordbaseError {
  readonly key: string;
  readonly reason: string;

  constructor(key: string, reason: string) {
    super(describeError('storage_invalid_key', `Invalid file path: ${reason}.`));
    this.key = key;
    this.reason = reason;
  }
}

/** Longest segment in UTF-8 bytes: the common file-name limit of filesystems (ext4, APFS, NTFS). */
const MAX_SEGMENT_BYTES = 255;
/** Longest key in UTF-8 bytes: the S3 limit, so a key valid here is valid on object stores too. */
export const MAX_STORAGE_KEY_BYTES = 1024;
// C0 controls (NUL included), DEL and the C1 controls: never in a name we build, and NUL truncates
// paths in some APIs.
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * Throws `InvalidStorageKeyError` unless `key` is a safe relative key: non-empty `/`-separated
 * segments, none of them `.` or `..`, no leading or trailing `/`, no backslash, no control
 * character, segments at most 255 and the key at most 1024 UTF-8 bytes. Exported so that every
 * adapter applies the same rule instead of its own guess; an adapter may add stricter rules.
 */
export function assertStorageKey(key: string): void {
  checkKeyShape(key, 'key');
}

/**
 * Like `assertStorageKey`, for the prefix of `list`/`deletePrefix`; `allowEmpty` lets `list('')`
 * mean the whole store while `deletePrefix('')` stays refused.
 */
export function assertStoragePrefix(prefix: string, options: { allowEmpty: boolean }): void {
  if (prefix === '' && options.allowEmpty) return;
  checkKeyShape(prefix, 'prefix');
}

function checkKeyShape(key: string, what: 'key' | 'prefix'): void {
  const refuse = (reason: string): never => {
    throw new InvalidStorageKeyError(String(key), reason);
  };
  if (typeof key !== 'string') refuse(`the ${what} is not a string`);
  if (key === '') refuse(`the ${what} is empty`);
  if (CONTROL_CHARACTERS.test(key)) refuse(`the ${what} contains a control character`);
  if (key.includes('\\')) refuse(`the ${what} contains a backslash`);
  if (key.startsWith('/')) refuse(`the ${what} is absolute`);
  if (Buffer.byteLength(key, 'utf8') > MAX_STORAGE_KEY_BYTES) refuse(`the ${what} is longer than ${MAX_STORAGE_KEY_BYTES} bytes`);
  for (const segment of key.split('/')) {
    if (segment === '') refuse(`the ${what} has an empty segment`);
    if (segment === '.' || segment === '..') refuse(`the ${what} has a "${segment}" segment`);
    if (Buffer.byteLength(segment, 'utf8') > MAX_SEGMENT_BYTES) {
      refuse(`a segment of the ${what} is longer than ${MAX_SEGMENT_BYTES} bytes`);
    }
  }
}

/**
 * Throws unless `delivered` bytes (so far, or in all once `ended`) agree with the `expected` size
 * a writer was promised (`StorageWriteOptions.size`; undefined: nothing promised): a `RangeError`
 * for a size that is not a non-negative integer, an `Error` for a source that delivers more, or
 * ends with fewer. Shared so that every adapter keeps the promise the same way.
 */
export function checkSourceSize(options: { expected: number | undefined; delivered: number; ended: boolean }): void {
  const { expected, delivered, ended } = options;
  if (expected === undefined) return;
  if (!Number.isSafeInteger(expected) || expected < 0) throw new RangeError(`Invalid size ${String(expected)}: need an integer >= 0`);
  if (delivered > expected) throw new Error(`the source delivered more than the ${expected} bytes announced`);
  if (ended && delivered < expected) throw new Error(`the source ended after ${delivered} of the ${expected} bytes announced`);
}

/**
 * Throws a `RangeError` unless `range` holds integers with `0 <= start <= end`: the one range rule
 * of `Storage.read`, shared so that adapters agree. Clamping to the object's size is not checked
 * here (the adapter knows the size; the HTTP layer answers 416 from `stat`).
 */
export function assertByteRange(range: ByteRange): void {
  const start = range?.start;
  const end = range?.end;
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || end < start) {
    throw new RangeError(`Invalid byte range ${JSON.stringify(range)}: need integers 0 <= start <= end`);
  }
}
