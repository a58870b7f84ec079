import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Request, Response } from 'express';
import { describeError, NotFoundError, RecordbaseError } from '../errors.js';
import { lookupContentTypeOfName } from '../files/sniff-mime-type.js';
import type { ByteRange, Storage, StoredObjectInfo } from '../files/storage.js';
import { LruCache } from '../query/lru-cache.js';

/** What `sendStoredFile` needs to answer one download. */
export interface SendStoredFileOptions {
  storage: Storage;
  /** The storage key of the object (original or thumbnail). */
  key: string;
  /** The name shown to the user in Content-Disposition; its extension picks the Content-Type. */
  fileName: string;
  /** Overrides the type taken from `fileName` (a thumbnail converted to another format). */
  contentType?: string;
  /** `?download=1`: always `attachment`, even for a type that could be shown inline. */
  download: boolean;
  /** Sent as is: public and protected files are cached differently, and that is the caller's policy. */
  cacheControl: string;
  /**
   * Told about a storage stream that fails after the headers went out (the client then sees a cut
   * connection), so the caller can log it. A client that disconnects is not an error and is not
   * reported.
   */
  onBodyError?: (error: unknown) => void;
  /** The object's `stat`, when the caller has just made it (the thumbnail cache): not asked again. */
  info?: StoredObjectInfo;
}

/**
 * 416: the Range asks only for bytes past the end of the file. errors.ts has no such class and is
 * shared, so it lives beside its only user; the error middleware answers it like any other.
 */
export class RangeNotSatisfiableError extends RecordbaseError {
  constructor() {
    super(describeError('range_not_satisfiable'));
  }
}

/**
 * Every download's sandbox: even if a browser ignored the Content-Type, a stored file can run no
 * script and load nothing; media and inline styles stay allowed so that browsers' own image,
 * audio and video viewers still render.
 */
export const STORED_FILE_CSP = "default-src 'none'; media-src 'self'; style-src 'unsafe-inline'; sandbox";

/**
 * Types a browser renders without running anything of the file (docs/protected-files.md). svg, html, xml and
 * scripts can execute or restyle a page on our origin, so they are never inline.
 */
const INLINE_TYPES = new Set([
  'image/png', 'image/jpeg', 'image/gif', 'image/webp', 'image/avif', 'image/bmp',
  'image/x-icon', 'image/vnd.microsoft.icon', 'application/pdf',
]);

/**
 * Sends one stored object: Content-Type from the name (never sniffed at download time), a
 * Content-Disposition that only lets safe media show inline, the security headers, validators
 * (ETag, Last-Modified) with 304 answers, and single byte ranges (206, or 416 with
 * `Content-Range: bytes *\/size`). HEAD gets the same headers and never opens the object.
 *
 * Limits, on purpose: a Range with several ranges gets the whole file (200) instead of a
 * multipart/byteranges body, which no client of this API needs; a malformed Range, a Range in
 * another unit or a stale `If-Range` also get the whole file, as RFC 9110 allows.
 *
 * Errors: a missing object throws `NotFoundError` and a storage failure before the body starts
 * is rethrown, both before any status is sent, so the error middleware answers; so is any
 * failure reading an object of up to 64 KiB, which is read whole before it is sent. Once the body has
 * started, a failure can only cut the connection: the response is destroyed (the client sees a
 * truncated transfer, never a wrong file) and the promise resolves. A client that disconnects
 * destroys the storage stream, so nothing stays open.
 */
export async function sendStoredFile(req: Request, res: Response, options: SendStoredFileOptions): Promise<void> {
  const { storage, key } = options;
  const info = options.info ?? (await storage.stat(key));
  if (!info) throw new NotFoundError("The requested file wasn't found.", 'file_not_found');

  const validators = describeValidators(key, info);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Content-Security-Policy', STORED_FILE_CSP);
  // A file URL may carry `?token=`: a link followed from the file (a PDF, an HTML attachment opened
  // inline by some browser) must not hand that URL to another site.
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('Accept-Ranges', 'bytes');
  res.setHeader('Cache-Control', options.cacheControl);
  res.setHeader('ETag', validators.etag);
  if (validators.lastModified) res.setHeader('Last-Modified', validators.lastModified);

  // Express's req.fresh: If-None-Match (weak comparison, lists, `*`), else If-Modified-Since.
  if (req.fresh) {
    res.status(304).end();
    return;
  }

  const size = info.size;
  let range: ByteRange | undefined;
  const rangeHeader = req.headers.range;
  if (rangeHeader !== undefined && isRangeStillValid(req, validators)) {
    const parsed = parseSingleByteRange(rangeHeader, size);
    if (parsed === 'unsatisfiable') {
      forgetCacheHeaders(res);
      res.setHeader('Content-Range', `bytes */${size}`);
      throw new RangeNotSatisfiableError();
    }
    if (parsed !== 'ignore') range = parsed;
  }

  const length = range ? range.end - range.start + 1 : size;
  const contentType = options.contentType ?? lookupContentTypeOfName(options.fileName);
  const writeHeaders = (): void => {
    res.status(range ? 206 : 200);
    if (range) res.setHeader('Content-Range', `bytes ${range.start}-${range.end}/${size}`);
    res.setHeader('Content-Type', contentType);
    res.setHeader('Content-Length', String(length));
    res.setHeader('Content-Disposition', formatContentDisposition({
      type: !options.download && isInlineType(contentType) ? 'inline' : 'attachment',
      fileName: options.fileName,
    }));
  };

  if (req.method === 'HEAD' || length === 0) {
    writeHeaders();
    res.end();
    return;
  }

  let source: Readable;
  try {
    // Always an explicit range: a file that grew since `stat` can never overflow Content-Length.
    source = await storage.read(key, range ?? { start: 0, end: size - 1 });
  } catch (error) {
    forgetCacheHeaders(res); // the error answer must not be cached as if it were the file
    throw error;
  }
  if (res.destroyed || res.writableEnded) {
    source.destroy(); // the client left while the object was being opened
    return;
  }
  if (length <= WHOLE_BODY_BYTES) {
    // A small object (a thumbnail, an avatar) is read whole and sent in one write: no pipeline
    // per download. Read before the status goes out, so a failure here is still an error answer.
    let body: Buffer;
    try {
      body = await readExactly(source, length);
    } catch (error) {
      forgetCacheHeaders(res);
      throw error;
    }
    if (res.destroyed || res.writableEnded) return;
    writeHeaders();
    res.end(body);
    return;
  }
  writeHeaders();
  await streamBody({ source, res, length, onBodyError: options.onBodyError });
}

/** The failure of a read that did not deliver the `length` bytes `stat` promised. */
function changedWhileRead(received: number, length: number): Error {
  return new Error(`The stored file changed while it was read: ${received > length ? `more than ${length}` : `${received} of ${length}`} bytes`);
}

/** Bodies up to this size are read whole before they are sent (one chunk of a file stream). */
const WHOLE_BODY_BYTES = 64 * 1024;

/** Reads `source` to its end; rejects (and destroys it) if it does not hold exactly `length` bytes. */
function readExactly(source: Readable, length: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const fail = (error: Error) => {
      source.destroy();
      reject(error);
    };
    source.on('data', (chunk: Buffer | string) => {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      received += bytes.length;
      if (received > length) fail(changedWhileRead(received, length));
      else chunks.push(bytes);
    });
    source.once('error', reject);
    source.once('end', () => {
      if (received !== length) reject(changedWhileRead(received, length));
      else resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, length));
    });
  });
}

/** Pipes with an exact byte count, so a file that changed size under us cuts the connection instead of desynchronising it. */
async function streamBody(options: { source: Readable; res: Response; length: number; onBodyError?: (error: unknown) => void }): Promise<void> {
  const { source, res, length } = options;
  let bodyError: unknown;
  const checkLength = async function* (chunks: AsyncIterable<Buffer | string>): AsyncGenerator<Buffer> {
    let sent = 0;
    for await (const chunk of chunks) {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      sent += bytes.length;
      if (sent > length) throw (bodyError = changedWhileRead(sent, length));
      yield bytes;
    }
    if (sent !== length) throw (bodyError = changedWhileRead(sent, length));
  };
  source.on('error', (error) => {
    bodyError ??= error;
  });
  try {
    await pipeline(source, checkLength, res);
  } catch {
    // pipeline has destroyed every stream: the storage handle is released and the socket cut.
    if (!res.destroyed) res.destroy();
    if (bodyError !== undefined) options.onBodyError?.(bodyError);
  }
}

/** The recent keys' hashes (a hot file is served over and over); bounded. */
const keyHashes = new LruCache<string, string>(1000);

function hashKey(key: string): string {
  let hash = keyHashes.get(key);
  if (hash === undefined) {
    hash = createHash('sha256').update(key).digest('base64url').slice(0, 12);
    keyHashes.set(key, hash);
  }
  return hash;
}

/** The ETag and Last-Modified of one object version. */
interface Validators {
  etag: string;
  lastModified: string | undefined;
}

/**
 * Size + mtime (ms) + key: a replaced file changes at least one of them, and the key keeps the
 * original and its thumbnails (same size and time, by chance) apart. Strong, because one version
 * of one key is byte-identical wherever it is served from.
 */
function describeValidators(key: string, info: StoredObjectInfo): Validators {
  // Not `instanceof Date`: a Date from another realm (a vm context, a test runner) would fail it.
  const time = info.modified == null ? NaN : new Date(info.modified).getTime();
  const valid = Number.isFinite(time);
  const keyHash = hashKey(key);
  return {
    etag: `"${info.size.toString(16)}-${(valid ? time : 0).toString(16)}-${keyHash}"`,
    lastModified: valid ? new Date(time).toUTCString() : undefined,
  };
}

/**
 * `If-Range` (RFC 9110 13.1.5): the Range applies only if the client's copy is the current one,
 * by strong ETag comparison (a weak tag never matches) or by the exact Last-Modified date.
 */
function isRangeStillValid(req: Request, validators: Validators): boolean {
  const value = req.get('If-Range')?.trim();
  if (value === undefined) return true;
  if (value.startsWith('W/')) return false;
  if (value.startsWith('"')) return value === validators.etag;
  if (!validators.lastModified) return false;
  const date = Date.parse(value);
  return Number.isFinite(date) && date === Date.parse(validators.lastModified);
}

const RANGE_SPEC = /^(\d*)-(\d*)$/;

/**
 * Parses a Range header for one byte range (RFC 9110 14.1.2) against `size`: the inclusive range
 * to send, `'unsatisfiable'` (416), or `'ignore'` (send the whole file) for a malformed header,
 * another unit, or several ranges. Written here rather than with Express's `req.range()` because
 * range-parser answers 416 to a suffix longer than the file (`bytes=-500` of a 100-byte file is
 * the whole file) and to an invalid `bytes=5-2` (which RFC 9110 says to ignore). Numbers of any
 * length are safe: past 2^53 they only compare as huge.
 */
function parseSingleByteRange(header: string, size: number): ByteRange | 'unsatisfiable' | 'ignore' {
  const match = /^\s*bytes\s*=(.*)$/i.exec(header);
  if (!match) return 'ignore';
  const specs = match[1]!.split(',').map((spec) => spec.trim()).filter((spec) => spec !== '');
  if (specs.length !== 1) return 'ignore';
  const parts = RANGE_SPEC.exec(specs[0]!.replace(/\s+/g, ''));
  if (!parts) return 'ignore';
  const [, first = '', last = ''] = parts;
  if (first === '' && last === '') return 'ignore';
  if (first === '') {
    const suffix = Number(last);
    if (suffix === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(first);
  if (last !== '' && Number(last) < start) return 'ignore';
  if (start >= size) return 'unsatisfiable';
  const end = last === '' ? size - 1 : Math.min(Number(last), size - 1);
  return { start, end };
}

/** Error answers reuse the response; they must not carry the file's caching and validators. */
function forgetCacheHeaders(res: Response): void {
  res.removeHeader('Cache-Control');
  res.removeHeader('ETag');
  res.removeHeader('Last-Modified');
}

/** Whether a type may be shown inline (docs/protected-files.md): raster images, audio, video and pdf. */
function isInlineType(contentType: string): boolean {
  const type = contentType.split(';')[0]!.trim().toLowerCase();
  return INLINE_TYPES.has(type) || type.startsWith('audio/') || type.startsWith('video/');
}

/** RFC 5987 attr-char: what `filename*` may carry unencoded. */
const ATTR_CHAR = /[A-Za-z0-9!#$&+\-.^_`|~]/;

/**
 * A Content-Disposition value (RFC 6266) that no file name can break: the quoted `filename=` is
 * printable ASCII without `"`, `\` or `%` (replaced by `_`), and any name that needed a
 * replacement also gets `filename*=UTF-8''...` (RFC 5987) with its exact UTF-8 bytes
 * percent-encoded. Control characters (CR, LF...) are dropped from both.
 */
export function formatContentDisposition(options: { type: 'inline' | 'attachment'; fileName: string }): string {
  const name = String(options.fileName ?? '').replace(/[\u0000-\u001f\u007f-\u009f]/g, '');
  const fallback = Array.from(name, (c) => (/^[\x20-\x7e]$/.test(c) && c !== '"' && c !== '\\' && c !== '%' ? c : '_')).join('') || 'file';
  let value = `${options.type}; filename="${fallback}"`;
  if (name !== '' && name !== fallback) value += `; filename*=UTF-8''${encodeRfc5987(name)}`;
  return value;
}

/** Percent-encodes the UTF-8 bytes (lone surrogates become U+FFFD; never throws, unlike encodeURIComponent). */
function encodeRfc5987(value: string): string {
  let out = '';
  for (const byte of Buffer.from(value, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += byte < 0x80 && ATTR_CHAR.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}
