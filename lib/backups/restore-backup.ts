import { randomBytes } from 'node:crypto';
import { promises as fs, type Stats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { acquireDataDirLock } from '../db/engine/data-dir-lock.js';
import { embeddedDatabaseDir } from '../db/engine/open-embedded-database.js';
import type { BackupManifest } from './backup-manifest.js';
import { readBackupArchive, type CheckedEntry, type EntrySink } from './read-backup-archive.js';

/** What `recordbase restore` was asked. */
export interface RestoreOptions {
  /** The backup archive. */
  file: string;
  /** The data directory to restore into: the database goes to `<dataDir>/db`. */
  dataDir: string;
  /** Where the storage's files go. Default `<dataDir>/storage`. */
  storageDir?: string;
  /** Replace a database or storage folder that is not empty (default: refuse). */
  force?: boolean;
}

/** What a restore did: the manifest, and the folders it filled. */
export interface RestoreReport {
  manifest: BackupManifest;
  restored: { part: CheckedEntry['part']; folder: string }[];
}

/** A restore refused before anything was written: a target in use or not empty, too little space. */
export class RestoreRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RestoreRefusedError';
  }
}

/** Whether `folder` exists with something in it. */
async function holdsSomething(folder: string): Promise<boolean> {
  try {
    return (await fs.readdir(folder)).length > 0;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
}

/**
 * Restores the backup `file` into a data directory no process holds (docs/deployment.md,
 * "Backups"), in three steps, so that a failure at any point leaves the targets as they were:
 *
 * 1. The data directory's lock is taken (refused, naming the holder, while an app or command has
 *    it open), and the whole archive is read and checked (readBackupArchive: names, entry types,
 *    counts and sizes against the manifest) without writing anything. A target folder that is not
 *    empty is refused unless `force`, and so is a disk without room for what the manifest declares.
 * 2. Each included part is written into a new folder beside its target (same file system), the
 *    archive checked again as it is read.
 * 3. Each target is swapped for its new folder by renames (the old one moved aside, then removed
 *    once every part is in place; a failed swap moves everything back).
 */
export async function restoreBackup(options: RestoreOptions): Promise<RestoreReport> {
  const dataDir = path.resolve(options.dataDir);
  const targets: Record<CheckedEntry['part'], string> = {
    database: embeddedDatabaseDir(dataDir),
    storage: path.resolve(options.storageDir ?? path.join(dataDir, 'storage')),
  };
  const lock = acquireDataDirLock(targets.database);
  const staged: Partial<Record<CheckedEntry['part'], string>> = {};
  try {
    const manifest = await readBackupArchive(options.file, { onManifest: (m) => checkTargets(m, targets, options.force === true) });
    const token = randomBytes(6).toString('hex');
    for (const part of ['database', 'storage'] as const) {
      if (!manifest[part].included) continue;
      staged[part] = path.join(path.dirname(targets[part]), `.rb-restore-${token}-${path.basename(targets[part])}`);
      await fs.mkdir(staged[part]!, { recursive: false, mode: 0o700 });
    }
    await readBackupArchive(options.file, { onEntry: (entry) => placeEntry(entry, staged as Record<CheckedEntry['part'], string>) });
    const restored = await swapInto(staged, targets);
    return { manifest, restored };
  } finally {
    for (const folder of Object.values(staged)) await fs.rm(folder, { recursive: true, force: true });
    lock.release();
  }
}

/** Refuses a restore into folders that hold something (unless `force`), or onto a disk without room for the archive's parts. */
async function checkTargets(manifest: BackupManifest, targets: Record<CheckedEntry['part'], string>, force: boolean): Promise<void> {
  let needed = 0;
  for (const part of ['database', 'storage'] as const) {
    if (!manifest[part].included) continue;
    needed += manifest[part].bytes;
    if (!force && (await holdsSomething(targets[part]))) {
      throw new RestoreRefusedError(`${targets[part]} is not empty: restore into an empty data directory, or pass --force to replace it (its contents are removed once the restore has succeeded).`);
    }
    await fs.mkdir(path.dirname(targets[part]), { recursive: true });
    const stats = await fs.statfs(path.dirname(targets[part]));
    if (stats.bavail * stats.bsize < needed) {
      throw new RestoreRefusedError(`Not enough free space to restore: the backup holds ${needed} bytes, ${stats.bavail * stats.bsize} are free under ${path.dirname(targets[part])}.`);
    }
  }
}

/** Writes one checked entry under its part's staging folder: folders made, files created new (never over anything, never through a link). */
async function placeEntry(entry: CheckedEntry, staged: Record<CheckedEntry['part'], string>): Promise<EntrySink | undefined> {
  const root = staged[entry.part];
  const target = path.join(root, ...entry.segments);
  if (target !== root && !target.startsWith(root + path.sep)) throw new Error(`refusing to write outside ${root}`);
  if (entry.type === 'directory') {
    await fs.mkdir(target, { recursive: true, mode: 0o700 });
    return undefined;
  }
  await fs.mkdir(path.dirname(target), { recursive: true, mode: 0o700 });
  const handle: FileHandle = await fs.open(target, 'wx', entry.part === 'database' ? 0o600 : 0o644);
  return {
    async write(chunk) {
      let offset = 0;
      while (offset < chunk.length) offset += (await handle.write(chunk, offset)).bytesWritten;
    },
    close: () => handle.close(),
  };
}

/**
 * Moves each staged folder into its target's place, the target's current folder (if any) moved
 * aside first; if a rename fails, every move made is undone. The old folders go once all are in.
 */
async function swapInto(staged: Partial<Record<CheckedEntry['part'], string>>, targets: Record<CheckedEntry['part'], string>): Promise<RestoreReport['restored']> {
  const undo: (() => Promise<void>)[] = [];
  const previous: string[] = [];
  const restored: RestoreReport['restored'] = [];
  try {
    for (const part of ['database', 'storage'] as const) {
      const from = staged[part];
      if (from === undefined) continue;
      const target = targets[part];
      const existing: Stats | undefined = await fs.lstat(target).catch(() => undefined);
      if (existing !== undefined) {
        const aside = `${from}-previous`;
        await fs.rename(target, aside);
        previous.push(aside);
        undo.push(() => fs.rename(aside, target));
      }
      await fs.rename(from, target);
      delete staged[part];
      undo.push(async () => {
        await fs.rename(target, from);
        staged[part] = from;
      });
      restored.push({ part, folder: target });
    }
  } catch (error) {
    for (const step of undo.reverse()) await step().catch(() => undefined);
    throw error;
  }
  for (const folder of previous) await fs.rm(folder, { recursive: true, force: true });
  return restored;
}
