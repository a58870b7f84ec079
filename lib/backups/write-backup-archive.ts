import { createReadStream, createWriteStream, promises as fs } from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import tar from 'tar-stream';
import { MANIFEST_ENTRY, type BackupManifest } from './backup-manifest.js';

/** A folder to put in the archive under `prefix` (`db/`, `storage/`). */
export interface ArchivePart {
  prefix: string;
  folder: string;
}

/**
 * Writes `file` (which must not exist) as a gzip-compressed tar: `manifest.json` first, then
 * every folder and file of each part, streamed from disk one file at a time (the archive never
 * sits in memory; back-pressure runs from the disk being written to the files being read).
 * Regular files and folders only. A failed write (a full disk) rejects; the caller removes the file.
 */
export async function writeBackupArchive(file: string, manifest: BackupManifest, parts: readonly ArchivePart[]): Promise<void> {
  const pack = tar.pack();
  const written = pipeline(pack, createGzip({ level: 6 }), createWriteStream(file, { flags: 'wx', mode: 0o600 }));
  // A failure of the writing end destroys the pack; entries waiting on it must not hang.
  const packing = (async () => {
    const body = Buffer.from(JSON.stringify(manifest, null, 2));
    await addEntry(pack, { name: MANIFEST_ENTRY, mtime: new Date(manifest.created), size: body.length }, body);
    for (const part of parts) await addFolder(pack, part.folder, part.prefix);
    pack.finalize();
  })();
  try {
    await Promise.all([written, packing]);
  } catch (error) {
    pack.destroy();
    await Promise.allSettled([written, packing]);
    throw error;
  }
}

/** Adds one entry with its bytes, resolving once the pack has taken them. */
function addEntry(pack: tar.Pack, header: tar.Headers, body: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    pack.entry({ mode: 0o644, ...header }, body, (error) => (error ? reject(error) : resolve()));
  });
}

/** Adds `folder` (its own entry, then its contents, depth first) as `prefix` and below. */
async function addFolder(pack: tar.Pack, folder: string, prefix: string): Promise<void> {
  const info = await fs.stat(folder);
  await addEntry(pack, { name: prefix, type: 'directory', mode: 0o755, mtime: info.mtime }, Buffer.alloc(0));
  for (const entry of await fs.readdir(folder, { withFileTypes: true })) {
    const full = path.join(folder, entry.name);
    if (entry.isDirectory()) await addFolder(pack, full, `${prefix}${entry.name}/`);
    else if (entry.isFile()) await addFile(pack, full, `${prefix}${entry.name}`);
  }
}

/** Streams one file into the pack under `name`. */
async function addFile(pack: tar.Pack, file: string, name: string): Promise<void> {
  const info = await fs.stat(file);
  await new Promise<void>((resolve, reject) => {
    const entry = pack.entry({ name, size: info.size, mode: 0o644, mtime: info.mtime }, (error) => (error ? reject(error) : resolve()));
    pipeline(createReadStream(file), entry).catch(reject);
  });
}
