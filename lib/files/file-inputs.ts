import { createReadStream, promises as fs } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { PayloadTooLargeError } from '../errors.js';
import { MIME_SNIFF_LENGTH, sniffMimeType } from './sniff-mime-type.js';
import { createSpoolPath, spoolToFile } from './spool-upload.js';
import type { Upload } from './upload.js';

/**
 * A file on the server's local disk, given to the server API. Made only by `fileFromPath`: a
 * class instance, which no JSON (nor any other parsed request body) can produce, so a body a
 * host forwards from a client can never name a server path (docs/server-api.md).
 */
export class PathFile {
  /** The file's name as uploaded (the stored name is made from it, as for an HTTP upload). */
  readonly name: string;
  /** Where the file lies; read when the write runs. */
  readonly path: string;

  constructor(filePath: string, name?: string) {
    if (typeof filePath !== 'string' || filePath === '') throw new TypeError('fileFromPath: the path must be a non-empty string');
    if (name !== undefined && typeof name !== 'string') throw new TypeError('fileFromPath: the name must be a string');
    this.path = filePath;
    this.name = name ?? path.basename(filePath);
    // Frozen, so what was checked is what is read.
    Object.freeze(this);
  }
}

/**
 * A file on local disk as a file input of the server API: `cover: fileFromPath('/srv/a.png')`.
 * `name` defaults to the path's last segment. The path is the host's to choose: never pass one
 * that came from a client.
 */
export function fileFromPath(filePath: string, name?: string): PathFile {
  return new PathFile(filePath, name);
}

/**
 * A file given to the server API (docs/server-api.md): a name and its bytes, as a Buffer (or any
 * Uint8Array) or a Readable stream; or a file on disk, as `fileFromPath` makes it. Nothing JSON
 * can produce is one: a string is never read as a path, nor `{ type: 'Buffer', data: [...] }` as bytes.
 */
export type FileInput = { name: string; data: Uint8Array | Readable } | PathFile;

/** Whether `value` is a FileInput (checked only for values of file fields). */
export function isFileInput(value: unknown): value is FileInput {
  if (value instanceof PathFile) return true;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const { name, data } = value as Record<string, unknown>;
  return typeof name === 'string' && (data instanceof Uint8Array || data instanceof Readable);
}

/** Uploads made from file inputs, and how to remove the temporary copies once the write is done. */
export interface PreparedUploads {
  readonly uploads: Upload[];
  discard(): Promise<void>;
}

/**
 * Turns file inputs into uploads the record service takes, each under its part name (`docs`,
 * `docs+`, `+docs`), with the same size limit as an HTTP upload (`maxFileSize`, 413) and the type
 * sniffed from the bytes. A Buffer is read where it is and a PathFile where it lies; a stream is
 * spooled to `tempDir` first (it can be read only once, and may be of any size), so nothing is
 * held in memory that the caller did not hold already.
 */
export async function prepareFileInputs(
  inputs: readonly { part: string; input: FileInput }[],
  options: { tempDir: string; maxFileSize: number },
): Promise<PreparedUploads> {
  const spools: string[] = [];
  const discard = () => Promise.all(spools.map((file) => fs.rm(file, { force: true }).catch(() => undefined))).then(() => undefined);
  const uploads: Upload[] = [];
  try {
    for (const { part, input } of inputs) {
      const tooLarge = () => new PayloadTooLargeError(`The file "${input.name}" is larger than the maximum allowed file size.`, 'file_too_large');
      if (input instanceof PathFile) {
        const file = input.path;
        const info = await fs.stat(file);
        if (!info.isFile()) throw new TypeError(`file input "${input.name}": ${file} is not a file`);
        if (info.size > options.maxFileSize) throw tooLarge();
        uploads.push({ field: part, originalName: input.name, size: info.size, mimeType: sniffMimeType(await readHead(file)), open: () => createReadStream(file) });
      } else if (input.data instanceof Uint8Array) {
        const bytes = Buffer.from(input.data.buffer, input.data.byteOffset, input.data.byteLength);
        if (bytes.length > options.maxFileSize) throw tooLarge();
        uploads.push({ field: part, originalName: input.name, size: bytes.length, mimeType: sniffMimeType(bytes.subarray(0, MIME_SNIFF_LENGTH)), open: () => Readable.from([bytes]) });
      } else {
        const target = createSpoolPath(options.tempDir);
        spools.push(target);
        const spool = await spoolToFile(input.data, { target, maxBytes: options.maxFileSize, label: input.name });
        uploads.push({ field: part, originalName: input.name, size: spool.size, mimeType: spool.mimeType, open: () => createReadStream(spool.path) });
      }
    }
  } catch (err) {
    await discard();
    throw err;
  }
  return { uploads, discard };
}

/** The first bytes of a file, for sniffing. */
async function readHead(file: string): Promise<Buffer> {
  const handle = await fs.open(file, 'r');
  try {
    const buffer = Buffer.alloc(MIME_SNIFF_LENGTH);
    const { bytesRead } = await handle.read(buffer, 0, MIME_SNIFF_LENGTH, 0);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}
