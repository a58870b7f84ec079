/** The first entry of every backup archive: what it holds, so that a restore can check it before writing. */
export const MANIFEST_ENTRY = 'manifest.json';
/** Entries under this folder are the embedded database's data directory. */
export const DATABASE_PREFIX = 'db/';
/** Entries under this folder are the storage's files (a storage that offers `localPath`), by storage key. */
export const STORAGE_PREFIX = 'storage/';

const FORMAT = 'recordbase-backup';
const VERSION = 1;
/** A manifest is a few hundred bytes; anything much larger is not ours. */
export const MAX_MANIFEST_BYTES = 64 * 1024;

/** One part of a backup: whether it is in the archive, how many files and bytes, and why not when it is not. */
export interface BackupPart {
  included: boolean;
  files: number;
  bytes: number;
  /** Why the part is not in the archive, or where it came from. */
  note: string;
}

/** What `manifest.json` says. */
export interface BackupManifest {
  format: typeof FORMAT;
  version: typeof VERSION;
  /** When the database snapshot was taken (ISO 8601). */
  created: string;
  /** `embedded` (PGlite on disk: its data directory is in the archive) or `postgres` (it is not: pg_dump it). */
  engine: 'embedded' | 'postgres';
  database: BackupPart;
  storage: BackupPart;
}

/** A manifest for an archive about to be written. */
export function describeBackup(options: { created: Date; engine: BackupManifest['engine']; database: BackupPart; storage: BackupPart }): BackupManifest {
  return { format: FORMAT, version: VERSION, created: options.created.toISOString(), engine: options.engine, database: options.database, storage: options.storage };
}

/** Thrown for an archive that is not a sound recordbase backup; the restore writes nothing. */
export class InvalidBackupError extends Error {
  constructor(message: string) {
    super(`Not a usable recordbase backup: ${message}`);
    this.name = 'InvalidBackupError';
  }
}

function readPart(value: unknown, name: string): BackupPart {
  const part = value as Partial<BackupPart> | null;
  const count = (n: unknown) => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
  if (typeof part !== 'object' || part === null || typeof part.included !== 'boolean' || !count(part.files) || !count(part.bytes) || typeof part.note !== 'string') {
    throw new InvalidBackupError(`the manifest's "${name}" is malformed`);
  }
  return { included: part.included, files: part.files!, bytes: part.bytes!, note: part.note };
}

/** The manifest in `text`, checked field by field; an InvalidBackupError otherwise. */
export function parseManifest(text: string): BackupManifest {
  let raw: Partial<BackupManifest>;
  try {
    raw = JSON.parse(text) as Partial<BackupManifest>;
  } catch {
    throw new InvalidBackupError('manifest.json is not JSON');
  }
  if (typeof raw !== 'object' || raw === null || raw.format !== FORMAT) throw new InvalidBackupError('manifest.json is not a recordbase backup manifest');
  if (raw.version !== VERSION) throw new InvalidBackupError(`manifest version ${String(raw.version)} is not supported (this recordbase reads version ${VERSION})`);
  if (typeof raw.created !== 'string' || Number.isNaN(Date.parse(raw.created))) throw new InvalidBackupError('the manifest\'s "created" is not a date');
  if (raw.engine !== 'embedded' && raw.engine !== 'postgres') throw new InvalidBackupError('the manifest\'s "engine" is unknown');
  return { format: FORMAT, version: VERSION, created: raw.created, engine: raw.engine, database: readPart(raw.database, 'database'), storage: readPart(raw.storage, 'storage') };
}
