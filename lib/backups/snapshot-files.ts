import { constants, promises as fs } from 'node:fs';
import path from 'node:path';
import type { Knex } from 'knex';
import { StatementRunner } from '../db/statements/statement-runner.js';
import type { Storage } from '../files/storage.js';

/** What a copy holds: its files and their bytes. */
export interface CopiedFiles {
  files: number;
  bytes: number;
}

/** Files of a Postgres data directory that describe the running server, not the data: never copied (as pg_basebackup leaves them out). */
const SERVER_STATE_FILES = new Set(['postmaster.pid', 'postmaster.opts']);
/** Copies run this many at a time: enough to keep the disk busy, few enough to hold few descriptors. */
const COPY_CONCURRENCY = 8;

/** Runs `jobs` with at most `limit` at once; rejects with the first failure once the running ones settle. */
async function runLimited(jobs: (() => Promise<void>)[], limit: number): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < jobs.length) await jobs[next++]!();
  };
  await Promise.all(Array.from({ length: Math.min(limit, jobs.length) }, lane));
}

/** Size and modification time of each file of a copied tree (by path relative to its root), and when the copy began. */
interface CopiedTree {
  files: Map<string, { size: number; mtimeMs: number }>;
  startedMs: number;
}

/**
 * A file whose recorded modification time is this close to the start of the copy (or later) is
 * compared again in the hold, whatever its time says now: file times move in clock ticks, and a
 * write in the same tick as the copy would leave the time unchanged.
 */
const CLOCK_SLACK_MS = 1_000;
/** How much of a file is compared (and, where it differs, rewritten) at once when a copy is brought up to date. */
const PATCH_CHUNK = 1024 * 1024;

/** Every file and folder under `root`, as paths relative to it (folders before what they hold). */
async function listTree(root: string): Promise<{ folders: string[]; files: string[] }> {
  const folders: string[] = [];
  const files: string[] = [];
  const walk = async (relative: string) => {
    for (const entry of await fs.readdir(path.join(root, relative), { withFileTypes: true })) {
      const child = path.join(relative, entry.name);
      if (entry.isDirectory()) {
        folders.push(child);
        await walk(child);
      } else if (entry.isFile() && !SERVER_STATE_FILES.has(entry.name)) files.push(child);
    }
  };
  await walk('');
  return { folders, files };
}

/**
 * Copies the folder `from` into the new folder `to`, files and folders only (a Postgres data
 * directory has nothing else), recording each file's size and time as read before its copy.
 * Taken while the database runs, the copy is not consistent: refreshTree makes it so.
 */
async function copyTree(from: string, to: string): Promise<CopiedTree> {
  const startedMs = Date.now();
  const { folders, files } = await listTree(from);
  await fs.mkdir(to, { mode: 0o700 });
  for (const folder of folders) await fs.mkdir(path.join(to, folder), { mode: 0o700 });
  const recorded: CopiedTree['files'] = new Map();
  await runLimited(
    files.map((file) => async () => {
      const info = await fs.stat(path.join(from, file)).catch(() => undefined);
      if (info === undefined) return; // removed meanwhile
      recorded.set(file, { size: info.size, mtimeMs: info.mtimeMs });
      await fs.copyFile(path.join(from, file), path.join(to, file), constants.COPYFILE_FICLONE);
    }),
    COPY_CONCURRENCY,
  );
  return { files: recorded, startedMs };
}

/**
 * Brings the copy `to` of `from` up to date (from must not change meanwhile): new files copied,
 * removed ones removed, and every file that may have changed since copyTree compared chunk by
 * chunk, only the chunks that differ rewritten. Postgres changes few pages between checkpoints,
 * so this reads much and writes little: it is what runs while the engine is held.
 */
async function refreshTree(from: string, to: string, copied: CopiedTree): Promise<CopiedFiles> {
  const { folders, files } = await listTree(from);
  for (const folder of folders) await fs.mkdir(path.join(to, folder), { recursive: true, mode: 0o700 });
  const present = new Set(files);
  for (const file of copied.files.keys()) if (!present.has(file)) await fs.rm(path.join(to, file), { force: true });
  const totals: CopiedFiles = { files: 0, bytes: 0 };
  await runLimited(
    files.map((file) => async () => {
      const info = await fs.stat(path.join(from, file));
      const before = copied.files.get(file);
      totals.files++;
      totals.bytes += info.size;
      if (before === undefined) await fs.copyFile(path.join(from, file), path.join(to, file), constants.COPYFILE_FICLONE);
      else if (before.size !== info.size || before.mtimeMs !== info.mtimeMs || before.mtimeMs > copied.startedMs - CLOCK_SLACK_MS) await patchFile(path.join(from, file), path.join(to, file));
    }),
    COPY_CONCURRENCY,
  );
  return totals;
}

/** Makes `target` a byte-for-byte copy of `source`, writing only the chunks that differ. */
async function patchFile(source: string, target: string): Promise<void> {
  const from = await fs.open(source, 'r');
  const to = await fs.open(target, 'r+');
  try {
    const wanted = Buffer.alloc(PATCH_CHUNK);
    const held = Buffer.alloc(PATCH_CHUNK);
    for (let offset = 0; ; offset += PATCH_CHUNK) {
      const { bytesRead } = await from.read(wanted, 0, PATCH_CHUNK, offset);
      if (bytesRead === 0) {
        await to.truncate(offset);
        break;
      }
      const { bytesRead: heldBytes } = await to.read(held, 0, PATCH_CHUNK, offset);
      if (heldBytes !== bytesRead || !wanted.subarray(0, bytesRead).equals(held.subarray(0, bytesRead))) await to.write(wanted, 0, bytesRead, offset);
      if (bytesRead < PATCH_CHUNK) {
        await to.truncate(offset + bytesRead);
        break;
      }
    }
  } finally {
    await from.close();
    await to.close();
  }
}

/** The bytes of the files under `folder` (0 when it does not exist): what a copy of it will need. */
export async function measureTree(folder: string): Promise<number> {
  let bytes = 0;
  let entries;
  try {
    entries = await fs.readdir(folder, { withFileTypes: true, recursive: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw error;
  }
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    const { size } = await fs.stat(path.join(entry.parentPath, entry.name)).catch(() => ({ size: 0 }));
    bytes += size;
  }
  return bytes;
}

/** A consistent copy of the embedded database, and how long the engine was held for it. */
export interface DatabaseCopy extends CopiedFiles {
  /** When the copy was taken: the backup holds every transaction committed before it, none after. */
  taken: Date;
  /** Milliseconds the engine's one connection was held (no other statement ran meanwhile). */
  heldMs: number;
}

/** Writes every changed page to the data files (the copy's first and its held pass). */
const CHECKPOINT = { sql: 'CHECKPOINT', bindings: [] };

/**
 * Copies the data directory of the embedded database (`directory`, opened by `database`) into
 * `to` while it serves. First a checkpoint and a copy of every file, while other statements run
 * (not consistent yet). Then the hold: the engine runs one statement at a time on one
 * connection, and holding that connection inside a transaction means no statement runs and, the
 * session not being idle, no background checkpoint either, so its files stand still. In the hold
 * a second checkpoint writes what changed since the first, and the copy is brought up to date
 * (refreshTree: only the chunks that changed are written), so it opens as a cleanly checkpointed
 * database (a transaction still open elsewhere is simply not in it). The hold costs the second
 * checkpoint and reading the files that changed (the write-ahead log's current segment, the
 * tables written to): about 150 ms for a busy 66 MB database, where the whole copy takes seconds.
 */
export async function copyEmbeddedDatabase(database: Knex, directory: string, to: string): Promise<DatabaseCopy> {
  const runner = new StatementRunner(database);
  await runner.query(CHECKPOINT);
  const copied = await copyTree(directory, to);
  return runner.transaction(async (trx) => {
    const started = performance.now();
    await trx.query(CHECKPOINT);
    const taken = new Date();
    const totals = await refreshTree(directory, to, copied);
    return { ...totals, taken, heldMs: Math.round(performance.now() - started) };
  });
}

/** A storage whose objects are local files: one that offers `Storage.localPath`. */
export type LocalFileStorage = Pick<Storage, 'list'> & Required<Pick<Storage, 'localPath'>>;

/** The storage as a LocalFileStorage when it offers `localPath`; undefined when its objects are not local files to link. */
export function asLocalFileStorage(storage: Storage): LocalFileStorage | undefined {
  return typeof storage.localPath === 'function' ? (storage as LocalFileStorage) : undefined;
}

/**
 * Links every file of the storage into `to` (a hard link: no bytes copied, and the file stays as
 * it was even if the storage removes it later; a copy where `to` is on another file system),
 * skipping the keys in `seen`, which it adds to. `localPath` promises that a stored file is never
 * changed in place (a write is a new file renamed over), so a link is a snapshot of the file. A
 * file removed between the listing and its link is skipped.
 */
export async function linkStorageFiles(storage: LocalFileStorage, to: string, seen: Set<string>): Promise<CopiedFiles> {
  const linked: CopiedFiles = { files: 0, bytes: 0 };
  for await (const object of storage.list('')) {
    if (seen.has(object.key)) continue;
    const source = storage.localPath(object.key);
    const target = path.join(to, ...object.key.split('/'));
    await fs.mkdir(path.dirname(target), { recursive: true });
    if (!(await placeFile(source, target))) continue;
    const { size } = await fs.stat(target);
    seen.add(object.key);
    linked.files++;
    linked.bytes += size;
  }
  return linked;
}

/** Links `source` at `target`, or copies it across file systems; false when `source` is gone. */
async function placeFile(source: string, target: string): Promise<boolean> {
  try {
    try {
      await fs.link(source, target);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'EXDEV' && code !== 'EPERM') throw error;
      await fs.copyFile(source, target, constants.COPYFILE_FICLONE | constants.COPYFILE_EXCL);
    }
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
}
