import { createReadStream } from 'node:fs';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import tar from 'tar-stream';
import { DATABASE_PREFIX, InvalidBackupError, MANIFEST_ENTRY, MAX_MANIFEST_BYTES, parseManifest, STORAGE_PREFIX, type BackupManifest, type BackupPart } from './backup-manifest.js';

/** Where one checked entry's bytes go: a file being written (restore), or nowhere (verification). */
export interface EntrySink {
  write(chunk: Buffer): Promise<void>;
  close(): Promise<void>;
}

/** What the reader hands on for each checked entry: its relative path inside its part (`base/1/112`), split at `/`. */
export interface CheckedEntry {
  part: 'database' | 'storage';
  segments: string[];
  type: 'file' | 'directory';
}

/** The reader's callbacks: the manifest once read (may throw to refuse), then each entry (a file returns its sink). */
export interface ArchiveVisitor {
  onManifest?(manifest: BackupManifest): Promise<void> | void;
  onEntry?(entry: CheckedEntry): Promise<EntrySink | undefined>;
}

/** A failure of the visitor's own work (writing a restored file), passed on as it is rather than blamed on the archive. */
class VisitorFailure {
  constructor(readonly cause: unknown) {}
}

async function visit<T>(work: () => Promise<T> | T): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw new VisitorFailure(error);
  }
}

/** Longest entry name we accept: far beyond a data directory's or a storage key's. */
const MAX_NAME_LENGTH = 4096;
/**
 * Folders a part may hold for each file its manifest declares: a storage key puts a file under at
 * most three (`{collectionId}/{recordId}/thumbs_{name}/`), and a backup writes no folder without
 * a file below it except the database's own empty ones, which FOLDER_ALLOWANCE covers.
 */
const FOLDERS_PER_FILE = 3;
/** Folders a part may hold beyond FOLDERS_PER_FILE: the part's root and an embedded database's empty folders (`pg_twophase`, `pg_snapshots`, ...). */
const FOLDER_ALLOWANCE = 64;
/**
 * Decompressed bytes one entry may take besides its file bytes: its header, a pax header holding
 * a name of MAX_NAME_LENGTH, and the padding to the next 512-byte block.
 */
const ENTRY_OVERHEAD = 8 * 1024;
/**
 * Decompressed bytes an archive may hold beyond its entries (ENTRY_OVERHEAD each) and its
 * declared file bytes: the manifest entry, the end-of-archive blocks, a tar record's padding, and
 * what the streams have decompressed ahead of the entry being checked.
 */
const INFLATE_ALLOWANCE = 1024 * 1024;
const PARTS = [
  { prefix: DATABASE_PREFIX, part: 'database' },
  { prefix: STORAGE_PREFIX, part: 'storage' },
] as const;

/**
 * The path segments of an entry name below its part, or an InvalidBackupError: a name must be
 * relative, of plain segments (no `..`, `.`, empty segment, backslash or NUL), under `db/` or
 * `storage/` (a part the manifest says is included). Nothing a name says can point outside the
 * folder it is restored into.
 */
function checkEntryName(name: string, manifest: BackupManifest): { part: CheckedEntry['part']; segments: string[] } {
  const fail = (why: string) => new InvalidBackupError(`entry ${JSON.stringify(name.slice(0, 200))} ${why}`);
  if (name.length > MAX_NAME_LENGTH) throw fail('has a name that is too long');
  if (/[\\\0]/.test(name) || name.startsWith('/')) throw fail('is an absolute path or holds a backslash or NUL');
  const found = PARTS.find(({ prefix }) => name.startsWith(prefix));
  if (!found) throw fail('is outside db/ and storage/');
  if (!manifest[found.part].included) throw fail(`is in a part the manifest says is not included (${found.part})`);
  const segments = name.slice(found.prefix.length).replace(/\/$/, '').split('/');
  if (segments.length === 1 && segments[0] === '') return { part: found.part, segments: [] };
  if (segments.some((segment) => segment === '' || segment === '.' || segment === '..')) throw fail('has an empty, "." or ".." path segment');
  return { part: found.part, segments };
}

/**
 * Passes the decompressed stream on while it stays within `limit()` bytes (read at each chunk, as
 * it grows with the entries seen): bytes after the last entry, headers no entry follows or a gzip
 * member after the archive are cut off there instead of being decompressed to their end.
 */
function boundDecompressedBytes(limit: () => number): Transform {
  let total = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      total += chunk.length;
      const allowed = limit();
      if (total <= allowed) done(null, chunk);
      else done(new InvalidBackupError(`the archive decompresses to more than its manifest accounts for (over ${allowed} bytes: its files' bytes, ${ENTRY_OVERHEAD} per entry and ${INFLATE_ALLOWANCE} more), such as bytes after its last entry`));
    },
  });
}

/** Reads a whole entry of at most `limit` bytes (the manifest). */
async function readSmallEntry(entry: tar.Entry, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of entry) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new InvalidBackupError('manifest.json is too large');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Reads and checks the backup archive `file` from end to end, streaming (never whole in memory):
 * the manifest must come first; every entry must be a regular file or a folder (no links,
 * devices or fifos) with a safe name (checkEntryName), appear once, and not sit below a file; each
 * part may hold no more files and bytes than its manifest says, counted as the bytes come (so a
 * gzip bomb is cut off at the size it declared, and a manifest that lies about it is caught), and
 * exactly that many at the end, and no more folders than its files can need (FOLDERS_PER_FILE and
 * FOLDER_ALLOWANCE). The whole decompressed stream is bounded too (boundDecompressedBytes), so
 * bytes after the last entry are cut off as a file's extra bytes are. Rejects with an
 * InvalidBackupError (or the visitor's error) at the first fault; `visitor` sees the manifest and
 * each entry as it passes the checks.
 */
export async function readBackupArchive(file: string, visitor: ArchiveVisitor = {}): Promise<BackupManifest> {
  const extract = tar.extract();
  let manifest: BackupManifest | undefined;
  let entries = 0;
  const declaredBytes = () => (manifest === undefined ? 0 : PARTS.reduce((sum, { part }) => sum + (manifest![part].included ? manifest![part].bytes : 0), 0));
  const bound = boundDecompressedBytes(() => INFLATE_ALLOWANCE + declaredBytes() + entries * ENTRY_OVERHEAD);
  const reading = pipeline(createReadStream(file), createGunzip(), bound, extract);
  reading.catch(() => undefined);
  const counted: Record<CheckedEntry['part'], { files: number; bytes: number; folders: number }> = { database: { files: 0, bytes: 0, folders: 0 }, storage: { files: 0, bytes: 0, folders: 0 } };
  const names = new Set<string>();
  const files = new Set<string>();
  try {
    for await (const entry of extract) {
      const { name, type } = entry.header;
      entries++;
      if (manifest === undefined) {
        if (name !== MANIFEST_ENTRY || type !== 'file') throw new InvalidBackupError('the first entry is not manifest.json');
        manifest = parseManifest(await readSmallEntry(entry, MAX_MANIFEST_BYTES));
        await visit(() => visitor.onManifest?.(manifest!));
        continue;
      }
      if (type !== 'file' && type !== 'directory') throw new InvalidBackupError(`entry ${JSON.stringify(name.slice(0, 200))} is a ${type ?? 'special entry'}, not a file or folder`);
      const { part, segments } = checkEntryName(name, manifest);
      const key = `${part}:${segments.join('/')}`;
      if (names.has(key)) throw new InvalidBackupError(`entry ${JSON.stringify(name.slice(0, 200))} appears twice`);
      names.add(key);
      for (let i = 1; i < segments.length; i++) {
        if (files.has(`${part}:${segments.slice(0, i).join('/')}`)) throw new InvalidBackupError(`entry ${JSON.stringify(name.slice(0, 200))} lies below a file`);
      }
      const count = counted[part];
      const declared: BackupPart = manifest[part];
      if (type === 'directory') {
        const allowed = declared.files * FOLDERS_PER_FILE + FOLDER_ALLOWANCE;
        if (++count.folders > allowed) throw new InvalidBackupError(`the ${part} part holds more folders than its ${declared.files} files can need (${allowed}: ${FOLDERS_PER_FILE} per file and ${FOLDER_ALLOWANCE} more)`);
        await visit(() => visitor.onEntry?.({ part, segments, type }));
        entry.resume();
        continue;
      }
      files.add(key);
      if (++count.files > declared.files) throw new InvalidBackupError(`the ${part} part holds more files than its manifest says (${declared.files})`);
      const sink = await visit(() => visitor.onEntry?.({ part, segments, type }));
      try {
        for await (const chunk of entry) {
          count.bytes += (chunk as Buffer).length;
          if (count.bytes > declared.bytes) throw new InvalidBackupError(`the ${part} part holds more bytes than its manifest says (${declared.bytes})`);
          await visit(() => sink?.write(chunk as Buffer));
        }
      } finally {
        await visit(() => sink?.close());
      }
    }
    await reading;
  } catch (error) {
    extract.destroy();
    await reading.catch(() => undefined);
    if (error instanceof InvalidBackupError) throw error;
    if (error instanceof VisitorFailure) throw error.cause;
    throw new InvalidBackupError(`the archive cannot be read (${(error as Error).message})`);
  }
  if (manifest === undefined) throw new InvalidBackupError('the archive is empty');
  for (const { part } of PARTS) {
    const declared = manifest[part];
    if (counted[part].files !== declared.files || counted[part].bytes !== declared.bytes) {
      throw new InvalidBackupError(`the ${part} part holds ${counted[part].files} files of ${counted[part].bytes} bytes where its manifest says ${declared.files} of ${declared.bytes}`);
    }
  }
  if (manifest.database.included && !files.has('database:PG_VERSION')) throw new InvalidBackupError('the database part has no PG_VERSION: it is not a database folder');
  return manifest;
}
