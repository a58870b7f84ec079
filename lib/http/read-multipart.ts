import { createReadStream, promises as fs } from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { Request, Response } from 'express';
import multer, { MulterError, type StorageEngine } from 'multer';
import { BadRequestError, PayloadTooLargeError, RecordbaseError } from '../errors.js';
import { createSpoolPath, spoolToFile } from '../files/spool-upload.js';
import type { Upload } from '../files/upload.js';

/** A multipart body as the record service takes it: text fields (with `@jsonPayload` merged) and uploads. */
export interface MultipartBody {
  /** Text parts by name: one part is a string, a repeated part an array of strings; `@jsonPayload` objects merged over them. */
  readonly fields: Record<string, unknown>;
  /** File parts, spooled to temporary files. */
  readonly uploads: readonly Upload[];
  /** Removes the temporary files; call it once the request is done, whatever happened. */
  discard(): Promise<void>;
}

/** Reads one request's multipart body (made by createMultipartReader, one per body limit). */
export type MultipartReader = (req: Request, res: Response) => Promise<MultipartBody>;

/** What the reader needs: the limits, and where to spool uploads. */
export interface MultipartReaderOptions {
  maxFileSize: number;
  maxBodySize: number;
  /** Folder for the temporary copies of uploads (created on demand). */
  tempDir: string;
}

/** Upper bounds on the shape of a body, so a request of many tiny parts cannot cost more than a few big ones. */
const MAX_PARTS = 2000;
const MAX_FIELD_NAME_BYTES = 200;
const JSON_PAYLOAD = '@jsonPayload';
/** How long a failed request waits for its spool writes to end before removing them anyway. */
const SPOOL_SETTLE_MS = 10_000;

/** A file part while multer handles it; `spool` is what our engine adds. */
interface SpooledFile extends Express.Multer.File {
  spool?: { path: string; size: number; mimeType: string };
}

/** The multer engine, plus what multer cannot do for us: wait for every spool of a failed request before removing them. */
interface SpoolEngine extends StorageEngine {
  /**
   * Waits until every spool write of `req` has ended, then removes all of them. multer answers an
   * aborted body as soon as its bookkeeping allows, while a spool write may still be closing (or
   * multer may still remove a late one in the background): without the wait, the error response
   * could reach the client before its temporary files are gone.
   */
  removeAll(req: Request): Promise<void>;
}

/** Marks a failure of our own temp-file writing, which is the server's problem (500), unlike a malformed body. */
class SpoolError extends Error {}

/**
 * The multer storage engine: streams each file part to a temporary file while keeping its first
 * bytes for MIME sniffing. Spooling to disk (as PocketBase does) keeps memory flat, lets the record
 * id and validation be settled before anything reaches the real storage, and means a client that
 * disconnects mid-upload leaves nothing in it.
 */
function createSpoolEngine(tempDir: string): SpoolEngine {
  /** Every spool file of a request, with the moment its write ended (success or failure). */
  const spoolsOf = new WeakMap<object, { path: string; ended: Promise<void> }[]>();
  return {
    _handleFile(req, file, callback) {
      const target = createSpoolPath(tempDir);
      let markEnded!: () => void;
      const ended = new Promise<void>((resolve) => (markEnded = resolve));
      spoolsOf.set(req, [...(spoolsOf.get(req) ?? []), { path: target, ended }]);
      spoolToFile(file.stream, { target }).then(
        (spool) => {
          markEnded();
          callback(null, { spool, size: spool.size } as Partial<SpooledFile>);
        },
        (err: Error) => {
          markEnded();
          callback(err instanceof RecordbaseError || isClientStreamError(err) ? err : new SpoolError(err.message, { cause: err }));
        },
      );
    },
    _removeFile(_req, file, callback) {
      const spool = (file as SpooledFile).spool;
      if (!spool) return callback(null);
      fs.rm(spool.path, { force: true }).then(
        () => callback(null),
        (err: Error) => callback(err),
      );
    },
    async removeAll(req) {
      const spools = spoolsOf.get(req) ?? [];
      // Bounded, so that a stream nobody ends can never hang the error answer; a spool it misses is
      // removed at the next start (removeStaleSpools).
      let timer: NodeJS.Timeout | undefined;
      const giveUp = new Promise<void>((resolve) => (timer = setTimeout(resolve, SPOOL_SETTLE_MS).unref()));
      await Promise.race([Promise.all(spools.map((spool) => spool.ended)), giveUp]);
      clearTimeout(timer);
      await Promise.all(spools.map((spool) => fs.rm(spool.path, { force: true }).catch(() => undefined)));
    },
  };
}

/** Errors a file stream raises because the client or the body went wrong (busboy's messages), not the disk. */
function isClientStreamError(err: Error): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === undefined || code === 'ERR_STREAM_PREMATURE_CLOSE';
}

/** multer's and busboy's failures in the one error hierarchy: sizes are 413, shapes 400, our disk 500. */
function translateMultipartError(err: unknown): unknown {
  if (err instanceof RecordbaseError) return err;
  if (err instanceof MulterError) {
    switch (err.code) {
      case 'LIMIT_FILE_SIZE':
        return new PayloadTooLargeError(`The file "${err.field ?? ''}" is larger than the maximum allowed file size.`, 'file_too_large');
      case 'LIMIT_PART_COUNT':
      case 'LIMIT_FILE_COUNT':
      case 'LIMIT_FIELD_COUNT':
        return new PayloadTooLargeError('The request has too many parts.', 'too_many_parts');
      case 'LIMIT_FIELD_VALUE':
        return new PayloadTooLargeError('A form field is larger than the maximum allowed request size.', 'payload_too_large');
      default:
        return new BadRequestError(`Invalid multipart body: ${err.message}.`, 'invalid_multipart');
    }
  }
  if (err instanceof SpoolError) return err.cause ?? err;
  const message = err instanceof Error ? err.message : String(err);
  return new BadRequestError(`Invalid multipart body: ${message}.`, 'invalid_multipart');
}

/**
 * Merges the `@jsonPayload` parts (the SDK sends every array, object, null or Date this way, one
 * part per key or one for all) over the plain text parts.
 */
function mergeJsonPayload(body: Record<string, unknown>): Record<string, unknown> {
  const fields: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const key of Object.keys(body)) if (key !== JSON_PAYLOAD) fields[key] = body[key];
  const raw = body[JSON_PAYLOAD];
  if (raw === undefined) return fields;
  for (const text of Array.isArray(raw) ? raw : [raw]) {
    let payload: unknown;
    try {
      payload = JSON.parse(String(text));
    } catch {
      throw new BadRequestError('The @jsonPayload part is not valid JSON.', 'invalid_json');
    }
    if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) {
      throw new BadRequestError('The @jsonPayload part must hold a JSON object.', 'invalid_json');
    }
    for (const key of Object.keys(payload)) fields[key] = (payload as Record<string, unknown>)[key];
  }
  return fields;
}

/**
 * Removes spooled files, never failing the caller over a temp file that is already gone: one the
 * storage took (`Storage.adopt`) is. A plain unlink, as a spool is always a file (`fs.rm` would
 * stat it twice first).
 */
async function removeSpools(files: readonly SpooledFile[]): Promise<void> {
  await Promise.all(files.map((file) => (file.spool ? fs.unlink(file.spool.path).catch(() => undefined) : undefined)));
}

/** Spooled uploads older than this belong to a process that died mid-request. */
const STALE_SPOOL_MS = 60 * 60 * 1000;

/**
 * Removes spooled uploads left behind by a process that crashed mid-request (a live request's
 * spool is removed when it ends). Run at start-up; files younger than an hour are left alone in
 * case another instance shares the folder.
 */
export async function removeStaleSpools(tempDir: string, now = Date.now()): Promise<number> {
  let names: string[];
  try {
    names = await fs.readdir(tempDir);
  } catch {
    return 0;
  }
  let removed = 0;
  for (const name of names) {
    if (!name.startsWith('upload-')) continue;
    const file = path.join(tempDir, name);
    const info = await fs.stat(file).catch(() => undefined);
    if (info && now - info.mtimeMs > STALE_SPOOL_MS) {
      await fs.rm(file, { force: true });
      removed++;
    }
  }
  return removed;
}

/**
 * Builds the reader of multipart create/update bodies (docs/records-api.md, docs/files.md): one part per
 * field, repeated parts for multi-valued fields, `@jsonPayload` merged, files spooled to disk.
 * Over `maxFileSize` (one file) or `maxBodySize` (the whole body, counted as it streams) is a 413
 * with every spooled file removed; a malformed body is a 400.
 */
export function createMultipartReader(options: MultipartReaderOptions): MultipartReader {
  const engine = createSpoolEngine(options.tempDir);
  const upload = multer({
    storage: engine,
    // Browsers and the SDK send file names as raw UTF-8 bytes; busboy would read them as latin1.
    defParamCharset: 'utf8',
    limits: {
      fileSize: options.maxFileSize,
      fieldSize: options.maxBodySize,
      parts: MAX_PARTS,
      fieldNameSize: MAX_FIELD_NAME_BYTES,
      // Field names are taken literally (`a[b]` is no nesting): names with brackets are refused.
      fieldNestingDepth: 0,
    },
    // The whole body is counted on its way to busboy, so that many parts cannot add up past the limit.
    // A listener beside the pipe rather than a stream in it: no extra buffering per chunk.
    streamHandler: (req: Request, busboy: NodeJS.WritableStream & { destroy(err?: Error): void }) => {
      let seen = 0;
      const count = (chunk: Buffer) => {
        seen += chunk.length;
        if (seen <= options.maxBodySize) return;
        req.off('data', count);
        req.unpipe(busboy);
        busboy.destroy(new PayloadTooLargeError('The request body is larger than the maximum allowed size.'));
      };
      req.on('data', count);
      req.pipe(busboy);
    },
  } as multer.Options).any();

  return async (req, res) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > options.maxBodySize) {
      res.setHeader('Connection', 'close');
      throw new PayloadTooLargeError('The request body is larger than the maximum allowed size.');
    }
    try {
      await new Promise<void>((resolve, reject) => upload(req, res, (err?: unknown) => (err ? reject(err) : resolve())));
    } catch (err) {
      await engine.removeAll(req);
      throw translateMultipartError(err);
    }
    const files = (req.files as SpooledFile[] | undefined) ?? [];
    try {
      const fields = mergeJsonPayload((req.body ?? {}) as Record<string, unknown>);
      const uploads: Upload[] = files.map((file) => ({
        field: file.fieldname,
        originalName: file.originalname,
        size: file.spool!.size,
        mimeType: file.spool!.mimeType,
        open: (): Readable => createReadStream(file.spool!.path),
        spoolFile: file.spool!.path,
      }));
      return { fields, uploads, discard: () => removeSpools(files) };
    } catch (err) {
      await removeSpools(files);
      throw err;
    }
  };
}
