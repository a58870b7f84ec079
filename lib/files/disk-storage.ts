import { randomBytes } from 'node:crypto';
import { promises as fs, type Dir } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import {
  assertByteRange,
  assertStorageKey,
  assertStoragePrefix,
  checkSourceSize,
  InvalidStorageKeyError,
  StorageNotFoundError,
  type ByteRange,
  type Storage,
  type StoredObject,
  type StoredObjectInfo,
  type StorageWriteOptions,
  type StorageWriteResult,
} from './storage.js';

/** Options of `diskStorage`. */
export interface DiskStorageOptions {
  /** The folder that holds every object; created on the first write. Relative paths resolve against the working directory once, at creation. */
  root: string;
  /**
   * Flush each file (and its folder entry) to the disk before `write` resolves. Default `true`:
   * a record is committed right after its files are written, and without the flush a power loss
   * could leave the committed record pointing at an empty file. Turn it off for tests or caches.
   */
  fsync?: boolean;
}

/** The disk storage: a `Storage` with `localPath`, plus the absolute root it writes under (for the CLI and logs). */
export interface DiskStorage extends Storage {
  readonly root: string;
  localPath(key: string): string;
}

/**
 * Names of files being written. They sit in the target's own folder so that the final `rename`
 * stays on one filesystem (and is therefore atomic); `list` skips them and keys may not use them.
 */
const TEMP_PREFIX = '.tmp-';
/** How often `write` recreates its folder when a concurrent delete removed it as it emptied. */
const FOLDER_RACE_RETRIES = 5;

/**
 * The default storage: objects are files under `root`, the key being the relative path.
 *
 * Writes go to a uniquely named temporary file beside the target and are renamed over it, so a
 * reader never sees half a file and concurrent writers never interleave. Every path is resolved and
 * checked to stay inside `root` after the key checks of `assertStorageKey`, and keys may not
 * contain `:` (Windows drives and alternate streams) or begin a segment with `.tmp-`. The contents
 * of `root` are trusted: symbolic links placed there by someone else are followed.
 */
export function diskStorage(options: DiskStorageOptions): DiskStorage {
  if (typeof options?.root !== 'string' || options.root.trim() === '') {
    throw new TypeError('diskStorage: `root` must be a non-empty path');
  }
  const root = path.resolve(options.root);
  const rootWithSep = root.endsWith(path.sep) ? root : root + path.sep;
  const flush = options.fsync ?? true;

  /** Maps a checked key or prefix to its absolute path, refusing anything that lands outside root. */
  function resolveInside(key: string): string {
    for (const segment of key.split('/')) {
      if (segment.includes(':')) throw new InvalidStorageKeyError(key, 'a segment contains ":"');
      if (segment.startsWith(TEMP_PREFIX)) throw new InvalidStorageKeyError(key, `a segment starts with the reserved "${TEMP_PREFIX}"`);
    }
    const full = path.resolve(root, ...key.split('/'));
    if (!full.startsWith(rootWithSep)) throw new InvalidStorageKeyError(key, 'the path leaves the storage root');
    return full;
  }

  function resolveKey(key: string): string {
    assertStorageKey(key);
    return resolveInside(key);
  }

  /** Removes folders emptied by a delete, up to (not including) root; best effort, a race just stops it. */
  async function pruneEmptyFolders(folder: string): Promise<void> {
    let current = folder;
    while (current.startsWith(rootWithSep)) {
      try {
        await fs.rmdir(current);
      } catch {
        return; // not empty (the usual case), already gone, or not ours to remove
      }
      current = path.dirname(current);
    }
  }

  async function* walk(folder: string, keyPrefix: string): AsyncGenerator<StoredObject> {
    let dir: Dir;
    try {
      dir = await fs.opendir(folder);
    } catch (error) {
      if (isMissing(error)) return; // removed while we walked
      throw error;
    }
    for await (const entry of dir) {
      if (entry.name.startsWith(TEMP_PREFIX)) continue;
      const key = keyPrefix === '' ? entry.name : `${keyPrefix}/${entry.name}`;
      if (!isUsableKey(key)) continue; // a stray file we could not address again; leave it alone
      const full = path.join(folder, entry.name);
      if (entry.isDirectory()) {
        yield* walk(full, key);
      } else if (entry.isFile()) {
        const info = await statFile(full);
        if (info) yield { key, ...info };
      }
    }
  }

  function isUsableKey(key: string): boolean {
    try {
      resolveKey(key);
      return true;
    } catch {
      return false;
    }
  }

  return {
    root,

    async write(key: string, source: Readable, options?: StorageWriteOptions): Promise<StorageWriteResult> {
      let target: string;
      try {
        target = resolveKey(key);
      } catch (error) {
        source.destroy();
        throw error;
      }
      const folder = path.dirname(target);
      const temp = path.join(folder, TEMP_PREFIX + randomBytes(12).toString('hex'));
      let handle: FileHandle | undefined;
      try {
        handle = await openNewFile(folder, temp);
        let size = 0;
        // for-await applies back-pressure, rethrows a source error and destroys the source when we
        // leave the loop early (our own write failing).
        for await (const chunk of source) {
          const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Uint8Array);
          checkSourceSize({ expected: options?.size, delivered: size + bytes.length, ended: false });
          await writeFully(handle, bytes);
          size += bytes.length;
        }
        checkSourceSize({ expected: options?.size, delivered: size, ended: true });
        if (flush) await handle.sync();
        await handle.close();
        handle = undefined;
        await fs.rename(temp, target);
        if (flush) await syncFolder(folder);
        return { size };
      } catch (error) {
        source.destroy();
        if (handle) await handle.close().catch(() => undefined);
        await fs.rm(temp, { force: true }).catch(() => undefined);
        await pruneEmptyFolders(folder);
        throw error;
      }
    },

    /**
     * Moves a local file into place (rename, so atomic): flushed first, its folder entry after,
     * as `write` does; undefined when the file is on another filesystem (EXDEV), before anything
     * changed. The file gets the mode a written file would have.
     */
    async adopt(key: string, file: string, options?: StorageWriteOptions): Promise<StorageWriteResult | undefined> {
      const target = resolveKey(key);
      const folder = path.dirname(target);
      const handle = await fs.open(file, 'r');
      let size: number;
      try {
        size = (await handle.stat()).size;
        checkSourceSize({ expected: options?.size, delivered: size, ended: true });
        await handle.chmod(FILE_MODE);
        if (flush) await handle.sync();
      } finally {
        await handle.close();
      }
      try {
        // A missing source is not a pruned folder: retry only while the file is still there.
        await inFolder(folder, () => fs.rename(file, target), () => exists(file));
      } catch (error) {
        if (errorCode(error) !== 'EXDEV') throw error;
        await pruneEmptyFolders(folder);
        return undefined;
      }
      if (flush) await syncFolder(folder);
      return { size };
    },

    async read(key: string, range?: ByteRange): Promise<Readable> {
      const file = resolveKey(key);
      if (range !== undefined) assertByteRange(range);
      let handle: FileHandle;
      try {
        handle = await fs.open(file, 'r');
      } catch (error) {
        if (isMissing(error)) throw new StorageNotFoundError(key);
        throw error;
      }
      try {
        if (!(await handle.stat()).isFile()) throw new StorageNotFoundError(key);
      } catch (error) {
        await handle.close().catch(() => undefined);
        throw error;
      }
      // Reading through the open handle keeps the version we opened even if a write renames a
      // new file over the key meanwhile; the stream closes the handle when it ends or is destroyed.
      return handle.createReadStream(range ? { start: range.start, end: range.end } : {});
    },

    async stat(key: string): Promise<StoredObjectInfo | undefined> {
      return statFile(resolveKey(key));
    },

    async delete(key: string): Promise<void> {
      const file = resolveKey(key);
      try {
        await fs.unlink(file);
      } catch (error) {
        if (isMissing(error)) return;
        const code = errorCode(error);
        if ((code === 'EISDIR' || code === 'EPERM') && (await isFolder(file))) return; // a folder is not an object
        throw error;
      }
      await pruneEmptyFolders(path.dirname(file));
    },

    async deletePrefix(prefix: string): Promise<void> {
      assertStoragePrefix(prefix, { allowEmpty: false });
      const target = resolveInside(prefix);
      try {
        // maxRetries covers ENOTEMPTY when a concurrent write adds a file while we remove.
        await fs.rm(target, { recursive: true, force: true, maxRetries: 3 });
      } catch (error) {
        if (!isMissing(error)) throw error;
      }
      await pruneEmptyFolders(path.dirname(target));
    },

    /** The key's file under root: every object is one, and `write` and `adopt` only ever rename a complete file over it. */
    localPath(key: string): string {
      return resolveKey(key);
    },

    list(prefix: string): AsyncIterable<StoredObject> {
      return {
        async *[Symbol.asyncIterator]() {
          assertStoragePrefix(prefix, { allowEmpty: true });
          if (prefix === '') {
            yield* walk(root, '');
            return;
          }
          const start = resolveInside(prefix);
          const info = await statFile(start);
          if (info) {
            yield { key: prefix, ...info }; // the prefix names one object
            return;
          }
          yield* walk(start, prefix);
        },
      };
    },
  };
}

/** The mode a newly written file gets (`open(…, 'wx')` with the default 0o666 and the process's umask), given to adopted files too. */
const FILE_MODE = 0o666 & ~readUmask();

function readUmask(): number {
  try {
    return process.umask();
  } catch {
    return 0o022; // worker threads cannot read it
  }
}

async function exists(file: string): Promise<boolean> {
  return fs.access(file).then(
    () => true,
    () => false,
  );
}

/**
 * Creates `folder` as needed and runs `step` in it; both run again (up to FOLDER_RACE_RETRIES
 * times) when `step` fails with ENOENT because a concurrent delete pruned the folder between the
 * two, as long as `canRetry` says a retry may succeed.
 */
async function inFolder<T>(folder: string, step: () => Promise<T>, canRetry: () => Promise<boolean> = async () => true): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    await fs.mkdir(folder, { recursive: true });
    try {
      return await step();
    } catch (error) {
      if (errorCode(error) !== 'ENOENT' || attempt >= FOLDER_RACE_RETRIES || !(await canRetry())) throw error;
    }
  }
}

/** Creates `folder` as needed and opens a new file exclusively there. */
function openNewFile(folder: string, file: string): Promise<FileHandle> {
  return inFolder(folder, () => fs.open(file, 'wx'));
}

async function writeFully(handle: FileHandle, bytes: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < bytes.length) {
    const { bytesWritten } = await handle.write(bytes, offset, bytes.length - offset);
    offset += bytesWritten;
  }
}

/** Makes the rename durable; some platforms (Windows) cannot open a folder, which is fine to skip. */
async function syncFolder(folder: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await fs.open(folder, 'r');
    await handle.sync();
  } catch {
    // best effort
  } finally {
    await handle?.close().catch(() => undefined);
  }
}

async function statFile(file: string): Promise<StoredObjectInfo | undefined> {
  try {
    const stats = await fs.stat(file);
    return stats.isFile() ? { size: stats.size, modified: stats.mtime } : undefined;
  } catch (error) {
    if (isMissing(error)) return undefined;
    throw error;
  }
}

async function isFolder(file: string): Promise<boolean> {
  try {
    return (await fs.lstat(file)).isDirectory();
  } catch {
    return false;
  }
}

function errorCode(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null ? (error as NodeJS.ErrnoException).code : undefined;
}

/** ENOENT, and ENOTDIR when a path component is a file: both mean "no such object" for a key. */
function isMissing(error: unknown): boolean {
  const code = errorCode(error);
  return code === 'ENOENT' || code === 'ENOTDIR';
}
