import { randomBytes } from 'node:crypto';
import { createWriteStream, promises as fs } from 'node:fs';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
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
  const watch = new Transform({
    transform(chunk: Buffer, _encoding, next) {
      size += chunk.length;
      if (options.maxBytes !== undefined && size > options.maxBytes) {
        next(new PayloadTooLargeError(`The file "${options.label ?? ''}" is larger than the maximum allowed file size.`, 'file_too_large'));
        return;
      }
      if (headLength < MIME_SNIFF_LENGTH) {
        head.push(chunk.subarray(0, MIME_SNIFF_LENGTH - headLength));
        headLength += Math.min(chunk.length, MIME_SNIFF_LENGTH - headLength);
      }
      next(null, chunk);
    },
  });
  await fs.mkdir(path.dirname(options.target), { recursive: true });
  const sink = createWriteStream(options.target, { flags: 'wx', mode: 0o600 });
  try {
    await pipeline(source, watch, sink);
  } catch (err) {
    // A source that fails at once (a truncated body) rejects the pipeline while the file may still
    // be opening: removed before the open completes, it would appear afterwards and stay.
    if (!sink.closed) await new Promise<void>((resolve) => sink.once('close', () => resolve()));
    await fs.rm(options.target, { force: true });
    throw err;
  }
  return { path: options.target, size, mimeType: sniffMimeType(Buffer.concat(head)) };
}
