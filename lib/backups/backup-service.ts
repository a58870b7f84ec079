import { randomBytes } from 'node:crypto';
import { createReadStream, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { Knex } from 'knex';
import { BadRequestError, NotFoundError, UnavailableError } from '../errors.js';
import type { Storage } from '../files/storage.js';
import type { Logger } from '../logger.js';
import { formatRecordDate } from '../schema/record-date.js';
import { checkBackupKey, isBackupKey, nameNewBackup } from './backup-names.js';
import { DATABASE_PREFIX, describeBackup, STORAGE_PREFIX, type BackupManifest, type BackupPart } from './backup-manifest.js';
import { asLocalFileStorage, copyEmbeddedDatabase, linkStorageFiles, measureTree, type CopiedFiles } from './snapshot-files.js';
import { writeBackupArchive, type ArchivePart } from './write-backup-archive.js';

/** One backup in the folder, as PocketBase's `GET /api/backups` lists it. */
export interface BackupInfo {
  key: string;
  /** Bytes of the archive. */
  size: number;
  /** When the archive was written, in the record date format. */
  modified: string;
}

/** What `records.backup()` returns: the new archive, where it is, what it holds. */
export interface CreatedBackup extends BackupInfo {
  /** The archive's absolute path. */
  path: string;
  manifest: BackupManifest;
  /** Milliseconds the embedded engine was held for the snapshot (no statement ran meanwhile); 0 without one. */
  heldMs: number;
}

/** Where backups are kept and how many: the router's `backups` option resolved (docs/deployment.md, "Backups"). */
export interface BackupSettings {
  /** The backups folder. Default `dataDir/backups`. */
  dir: string;
  /** Backups the folder may hold; creating one more is a 400 `backup_limit_reached`. Default 10. */
  maxCount: number;
}

/** What the service works with: the router's database and storage, and where backups go. */
export interface BackupServiceOptions extends BackupSettings {
  database: Knex;
  /** The embedded database's folder, when the router opened it; absent for a host's Postgres. */
  embeddedDirectory?: string;
  storage: Storage;
  logger: Logger;
}

/** The service behind `records.backup()` and the backups API. */
export interface BackupService {
  list(): Promise<BackupInfo[]>;
  create(options?: { name?: string }): Promise<CreatedBackup>;
  /** The archive's bytes for a download; 404 when there is no such backup. */
  open(key: string): Promise<{ info: BackupInfo; stream: Readable }>;
  remove(key: string): Promise<void>;
}

/** The folder, inside the backups folder, of the backup being made: its existence is the "one at a time" lock. */
const IN_PROGRESS = '.in-progress';
/** Room left free on the disk beyond what a backup needs, so that a backup never takes the last bytes the database writes into. */
const FREE_SPACE_RESERVE = 64 * 1024 * 1024;
/** Write errors that mean the disk (or this process's share of it) is full. */
const DISK_FULL = new Set(['ENOSPC', 'EDQUOT', 'EFBIG']);
/** How old an in-progress folder without its owner file must be before it counts as a crash's leftover. */
const UNOWNED_GRACE_MS = 60_000;
/** In-progress folders this process made: one of ours left by an earlier process with the same pid is stale, not ours. */
const inProgressHere = new Set<string>();

/** Why a storage without `localPath` is not in a backup: the manifest's note, and the warning's. */
const STORAGE_NOT_INCLUDED = 'the storage offers no localPath (S3, or an adapter of your own that does not keep its objects as local files): back it up with its own tools';

/** Creates the backup service of one router (docs/deployment.md, "Backups"). */
export function createBackupService(options: BackupServiceOptions): BackupService {
  const dir = path.resolve(options.dir);
  // The Storage contract says whether its objects are local files to link, not the adapter's shape (a `root` string proves nothing).
  const localFiles = asLocalFileStorage(options.storage);
  let warnedStorage = false;

  async function describe(key: string): Promise<BackupInfo | undefined> {
    try {
      const info = await fs.lstat(path.join(dir, key));
      return info.isFile() ? { key, size: info.size, modified: formatRecordDate(info.mtime) } : undefined;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  async function list(): Promise<BackupInfo[]> {
    let names: string[];
    try {
      names = await fs.readdir(dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
    const found = await Promise.all(names.filter(isBackupKey).map(describe));
    return found.filter((info): info is BackupInfo => info !== undefined).sort((a, b) => b.modified.localeCompare(a.modified) || a.key.localeCompare(b.key));
  }

  async function create(request: { name?: string } = {}): Promise<CreatedBackup> {
    const key = nameNewBackup(request.name, new Date());
    await fs.mkdir(dir, { recursive: true });
    const existing = await list();
    if (existing.some((backup) => backup.key === key)) throw new BadRequestError(`A backup named ${key} already exists.`, 'backup_exists');
    if (existing.length >= options.maxCount) {
      throw new BadRequestError(`The backups folder holds ${existing.length} backups, the most backups.maxCount allows: delete one first.`, 'backup_limit_reached');
    }
    const work = await claimInProgress(dir);
    try {
      return await makeBackup(key, work);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== undefined && DISK_FULL.has(code)) {
        options.logger.error(`backup ${key} failed: the disk is full (${code})`);
        throw new UnavailableError(`The backup could not be written: the disk holding ${dir} is full (${code}). Nothing was kept; free some space and try again.`, 'backup_disk_full', error);
      }
      throw error;
    } finally {
      await releaseInProgress(work);
    }
  }

  /** Stages the snapshot in `work` (storage linked, database copied), writes the archive there, then moves it into place. */
  async function makeBackup(key: string, work: string): Promise<CreatedBackup> {
    const parts: ArchivePart[] = [];
    const seen = new Set<string>();
    const storageFolder = path.join(work, 'storage');
    let storage: CopiedFiles | undefined;
    if (localFiles !== undefined) {
      await fs.mkdir(storageFolder);
      storage = await linkStorageFiles(localFiles, storageFolder, seen);
    }
    let database: (CopiedFiles & { taken: Date; heldMs: number }) | undefined;
    if (options.embeddedDirectory !== undefined) {
      await checkFreeSpace(dir, 2 * (await measureTree(options.embeddedDirectory)) + (storage?.bytes ?? 0));
      database = await copyEmbeddedDatabase(options.database, options.embeddedDirectory, path.join(work, 'db'));
      parts.push({ prefix: DATABASE_PREFIX, folder: path.join(work, 'db') });
    }
    if (storage !== undefined && localFiles !== undefined) {
      // Files uploaded while the database was being copied: linked now, as soon after the copy as can be.
      const late = await linkStorageFiles(localFiles, storageFolder, seen);
      storage = { files: storage.files + late.files, bytes: storage.bytes + late.bytes };
      parts.push({ prefix: STORAGE_PREFIX, folder: storageFolder });
    }
    const manifest = describeBackup({
      created: database?.taken ?? new Date(),
      engine: options.embeddedDirectory !== undefined ? 'embedded' : 'postgres',
      database: database
        ? { included: true, files: database.files, bytes: database.bytes, note: 'the embedded database\'s data directory, copied at "created"' }
        : { included: false, files: 0, bytes: 0, note: 'the database is a Postgres server the host runs: back it up with pg_dump (docs/deployment.md)' },
      storage: storage
        ? { included: true, files: storage.files, bytes: storage.bytes, note: 'the storage\'s files, by storage key' }
        : { included: false, files: 0, bytes: 0, note: STORAGE_NOT_INCLUDED },
    });
    const staged = path.join(work, key);
    await writeBackupArchive(staged, manifest, parts);
    const target = path.join(dir, key);
    // link, not rename: it fails when a backup of that name appeared meanwhile, instead of replacing it.
    await fs.link(staged, target).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'EEXIST') throw new BadRequestError(`A backup named ${key} already exists.`, 'backup_exists');
      throw error;
    });
    const info = (await describe(key))!;
    if (!manifest.storage.included && !warnedStorage) {
      // Once per router: every backup's own line below says it again, without the why.
      warnedStorage = true;
      options.logger.warn(`backups: the storage's files are not included: ${STORAGE_NOT_INCLUDED} (docs/deployment.md, "Backups")`);
    }
    options.logger.info(`backup ${key} written: ${info.size} bytes (${describePart('database', manifest.database)}, ${describePart('storage', manifest.storage)}; engine held ${database?.heldMs ?? 0} ms)`);
    return { ...info, path: target, manifest, heldMs: database?.heldMs ?? 0 };
  }

  async function open(key: string): Promise<{ info: BackupInfo; stream: Readable }> {
    const info = await describe(checkBackupKey(key));
    if (info === undefined) throw new NotFoundError(`No backup named ${key}.`, 'backup_not_found');
    return { info, stream: createReadStream(path.join(dir, key)) };
  }

  async function remove(key: string): Promise<void> {
    if ((await describe(checkBackupKey(key))) === undefined) throw new NotFoundError(`No backup named ${key}.`, 'backup_not_found');
    await fs.rm(path.join(dir, key), { force: true });
  }

  return { list, create, open, remove };
}

function describePart(name: string, part: BackupPart): string {
  return part.included ? `${name}: ${part.files} files, ${part.bytes} bytes` : `${name}: not included`;
}

/** Refuses to start a backup that would leave less than FREE_SPACE_RESERVE free on the disk of `dir`. */
async function checkFreeSpace(dir: string, needed: number): Promise<void> {
  const stats = await fs.statfs(dir);
  const free = stats.bavail * stats.bsize;
  if (free < needed + FREE_SPACE_RESERVE) {
    throw new UnavailableError(
      `Not enough free space for a backup in ${dir}: it needs about ${needed + FREE_SPACE_RESERVE} bytes (twice the database, the new storage files and a 64 MiB reserve), ${free} are free.`,
      'backup_disk_full',
    );
  }
}

/** Who is making a backup, written into the in-progress folder. */
interface InProgressOwner {
  pid: number;
  host: string;
  since: string;
}

/**
 * Takes the backups folder's "one backup at a time" lock: creates its in-progress folder, which
 * also holds the staged snapshot. Refused (400 `backup_in_progress`) while another backup, of this
 * process or another, has it; taken over when its owner is certainly gone (a process of this host
 * that no longer runs).
 */
async function claimInProgress(dir: string): Promise<string> {
  const work = path.join(dir, IN_PROGRESS);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await fs.mkdir(work);
      inProgressHere.add(work);
      const owner: InProgressOwner = { pid: process.pid, host: os.hostname(), since: new Date().toISOString() };
      await fs.writeFile(path.join(work, 'owner.json'), JSON.stringify(owner));
      return work;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const owner = await readOwner(work);
    if (owner !== undefined && !isGone(owner, work)) {
      throw new BadRequestError(`Try again later: another backup is being made (by process ${owner.pid} on ${owner.host}, since ${owner.since}).`, 'backup_in_progress');
    }
    // No owner yet: one that has just made the folder, unless the folder is old (a crash between the two).
    if (owner === undefined && (inProgressHere.has(work) || (await ageOf(work)) < UNOWNED_GRACE_MS)) {
      throw new BadRequestError('Try again later: another backup is being made.', 'backup_in_progress');
    }
    // A leftover of a process that is gone: take it over (a rename first, so that two takers cannot both win).
    const aside = `${work}-stale-${randomBytes(6).toString('hex')}`;
    await fs.rename(work, aside).catch(() => undefined);
    await fs.rm(aside, { recursive: true, force: true });
  }
  throw new BadRequestError('Try again later: another backup is being made.', 'backup_in_progress');
}

/** Milliseconds since `file` changed; 0 when it is gone (nothing stale to take over). */
async function ageOf(file: string): Promise<number> {
  const info = await fs.stat(file).catch(() => undefined);
  return info === undefined ? 0 : Date.now() - info.mtimeMs;
}

async function readOwner(work: string): Promise<InProgressOwner | undefined> {
  try {
    const owner = JSON.parse(await fs.readFile(path.join(work, 'owner.json'), 'utf8')) as Partial<InProgressOwner>;
    return typeof owner.pid === 'number' && typeof owner.host === 'string' && typeof owner.since === 'string' ? (owner as InProgressOwner) : undefined;
  } catch {
    return undefined;
  }
}

/** Whether the owner of an in-progress folder is certainly gone: another process of this host that no longer runs, or this process after a restart. */
function isGone(owner: InProgressOwner, work: string): boolean {
  if (owner.host !== os.hostname()) return false;
  if (owner.pid === process.pid) return !inProgressHere.has(work);
  try {
    process.kill(owner.pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'EPERM';
  }
}

async function releaseInProgress(work: string): Promise<void> {
  await fs.rm(work, { recursive: true, force: true });
  inProgressHere.delete(work);
}
