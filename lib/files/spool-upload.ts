import { randomBytes } from 'node:crypto';
import { createWriteStream, open, promises as fs } from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { PayloadTooLargeError } from '../errors.js';
import { MIME_SNIFF_LENGTH, sniffMimeType } from './sniff-mime-type.js';

/** A file spooled to local disk: its size and its type, sniffed from the first bytes as they passed. */
export interface Spool {
  readonly path: string;
  readonly size: number;
  readonly mimeType: string;
}

/** A new, unused path for a spool file in `tempDir` (`upload-<random>`, which removeStaleSpools recognises). */
export function createSpoolPath(tempDir: string): string {
  return path.join(tempDir, `upload-${randomBytes(12).toString('hex')}`);
}

/**
 * Streams `source` to a new file at `target` (mode 0600, never overwriting), counting its bytes and
 * keeping the first ones for MIME sniffing, so that an upload never sits in memory and is checked
 * by what it holds. Over `maxBytes` it stops with a 413 (`file_too_large`). On any failure the
 * file is removed before the promise rejects with the error.
 */
export async function spoolToFile(source: Readable, options: { target: string; maxBytes?: number; label?: string }): Promise<Spool> {
  const head: Buffer[] = [];
  let headLength = 0;
  let size = 0;
  let fd: number;
  try {
    fd = await openSpoolFile(options.target);
  } catch (err) {
    source.destroy();
    throw err;
  }
  // A listener beside the pipe, not a stream in it: no extra buffering per chunk. Attached in the
  // same turn as the pipe, so that no chunk flows before the pipe takes it too.
  source.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (options.maxBytes !== undefined && size > options.maxBytes) {
      source.destroy(new PayloadTooLargeError(`The file "${options.label ?? ''}" is larger than the maximum allowed file size.`, 'file_too_large'));
      return;
    }
    if (headLength < MIME_SNIFF_LENGTH) {
      head.push(chunk.subarray(0, MIME_SNIFF_LENGTH - headLength));
      headLength += Math.min(chunk.length, MIME_SNIFF_LENGTH - headLength);
    }
  });
  // The write stream owns the descriptor from here and closes it when the pipeline ends, either
  // way (autoClose); nothing else may close it, since a closed number can be reused at once. A
  // numeric descriptor, not a FileHandle: its writes are fs.write callbacks, where a FileHandle's
  // go through a promise each, garbage for every chunk.
  const sink = createWriteStream('', { fd });
  try {
    await pipeline(source, sink);
  } catch (err) {
    if (!sink.closed) await new Promise<void>((resolve) => sink.once('close', () => resolve()));
    await fs.rm(options.target, { force: true });
    throw err;
  }
  return { path: options.target, size, mimeType: sniffMimeType(Buffer.concat(head)) };
}

/** Opens a new spool file exclusively (its descriptor), creating its folder only when it is missing (not once per upload). */
async function openSpoolFile(target: string): Promise<number> {
  try {
    return await openExclusive(target);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    await fs.mkdir(path.dirname(target), { recursive: true });
    return openExclusive(target);
  }
}

const openExclusive = (target: string): Promise<number> =>
  new Promise((resolve, reject) => open(target, 'wx', 0o600, (err, fd) => (err ? reject(err) : resolve(fd))));
