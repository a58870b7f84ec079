import { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import {
  assertByteRange,
  assertStorageKey,
  assertStoragePrefix,
  checkSourceSize,
  InvalidStorageKeyError,
  MAX_STORAGE_KEY_BYTES,
  StorageNotFoundError,
  type ByteRange,
  type Storage,
  type StorageWriteOptions,
  type StorageWriteResult,
  type StoredObject,
  type StoredObjectInfo,
} from './storage.js';

/** What `s3Storage` builds an `S3Client` from when it is not handed one. */
export interface S3ClientSettings {
  /** The service URL for S3-compatible stores (MinIO, R2, ...); absent for AWS itself. */
  endpoint?: string;
  /** The region; default: the AWS SDK's own lookup (AWS_REGION...), or `us-east-1` when `endpoint` is set. */
  region?: string;
  /** Access keys; default: the AWS SDK's credential chain (environment, profile, instance role). */
  credentials?: S3ClientConfig['credentials'];
  /** Path-style URLs (`endpoint/bucket/key`), which MinIO and most local servers need. */
  forcePathStyle?: boolean;
}

/** Options of `s3Storage`. */
export interface S3StorageOptions {
  /** The bucket; it must exist. */
  bucket: string;
  /**
   * A folder inside the bucket that holds every object (`'recordbase'` or `'apps/blog/'`), so the
   * bucket can hold other data too; checked like a storage key. Default: the bucket's root.
   */
  prefix?: string;
  /**
   * An `S3Client` you built (used as is; you close it), or settings to build one. Default: a
   * client from the AWS SDK's environment. A client built here sends checksums only when an
   * operation requires them (see docs/storage.md: many S3-compatible stores mis-store the SDK's
   * default streaming checksums).
   */
  client?: S3Client | S3ClientSettings;
  /** Bytes per part of a multipart upload (at least 5 MiB, S3's minimum). Default 5 MiB. */
  partSize?: number;
  /** Parts of one upload sent at once. Default 4. One write buffers at most `(queueSize + 1) * partSize` bytes. */
  queueSize?: number;
}

/** The S3 storage: a `Storage` plus what it talks to, for logs, tools and closing the client. */
export interface S3Storage extends Storage {
  readonly client: S3Client;
  readonly bucket: string;
  /** The normalised prefix, `''` or ending in `/`. */
  readonly prefix: string;
}

/** S3's smallest multipart part (every part but the last). */
const MIN_PART_SIZE = 5 * 1024 * 1024;
const DEFAULT_QUEUE_SIZE = 4;
/** DeleteObjects takes at most this many keys per call. */
const DELETE_BATCH = 1000;

/**
 * A `Storage` on an S3-compatible object store, through `@aws-sdk/client-s3` and
 * `@aws-sdk/lib-storage` (optional peer dependencies of recordbase: install them to use this).
 *
 * Keys map to object keys under `prefix`. A write whose `size` is promised and at most `partSize`
 * (every upload within the default limits: they are spooled, so their size is known) is one
 * PutObject streamed with its Content-Length, holding nothing in memory. Any other write goes
 * through lib-storage's `Upload`: one PutObject for a source up to `partSize` (buffered to learn
 * its length), a multipart upload for a bigger one, so memory per write is bounded by
 * `(queueSize + 1) * partSize` whatever the file's size. Either way S3 shows the object only once
 * it is complete, and a failed multipart upload is aborted. Reads are GetObject
 * (with `Range`), `stat` is HeadObject, `deletePrefix` and `list` page through ListObjectsV2 and
 * delete in DeleteObjects batches of 1000. Missing keys map to the contract's answers
 * (`StorageNotFoundError`, `undefined`, nothing to do); other failures reject with the SDK's error.
 */
export function s3Storage(options: S3StorageOptions): S3Storage {
  if (typeof options?.bucket !== 'string' || options.bucket.trim() === '') {
    throw new TypeError('s3Storage: `bucket` must be a non-empty string');
  }
  const Bucket = options.bucket;
  const base = normalisePrefix(options.prefix);
  const client = options.client instanceof S3Client ? options.client : createS3Client(options.client ?? {});
  const partSize = options.partSize ?? MIN_PART_SIZE;
  if (!Number.isSafeInteger(partSize) || partSize < MIN_PART_SIZE) throw new TypeError(`s3Storage: \`partSize\` must be an integer >= ${MIN_PART_SIZE}`);
  const queueSize = options.queueSize ?? DEFAULT_QUEUE_SIZE;
  if (!Number.isSafeInteger(queueSize) || queueSize < 1) throw new TypeError('s3Storage: `queueSize` must be a positive integer');

  /** The object key of a storage key; refuses what the contract refuses, and what S3 would (too long with the prefix). */
  function toObjectKey(key: string): string {
    assertStorageKey(key);
    const objectKey = base + key;
    if (Buffer.byteLength(objectKey, 'utf8') > MAX_STORAGE_KEY_BYTES) {
      throw new InvalidStorageKeyError(key, `the key with the prefix is longer than ${MAX_STORAGE_KEY_BYTES} bytes`);
    }
    return objectKey;
  }

  /** The storage key of a listed object key, or undefined for an object no storage key names (another tool's). */
  function toStorageKey(objectKey: string): string | undefined {
    if (!objectKey.startsWith(base)) return undefined;
    const key = objectKey.slice(base.length);
    try {
      assertStorageKey(key);
      return key;
    } catch {
      return undefined;
    }
  }

  /**
   * Every object whose key starts with `rawPrefix` (an object-key prefix, base included), page by
   * page. Pages continue with `StartAfter` (the last key seen), which every S3-compatible store
   * implements alike, rather than with continuation tokens, which some implement badly.
   */
  async function* listObjects(rawPrefix: string): AsyncGenerator<StoredObject> {
    let StartAfter: string | undefined;
    for (;;) {
      const page = await client.send(new ListObjectsV2Command({ Bucket, Prefix: rawPrefix, StartAfter }));
      const contents = page.Contents ?? [];
      for (const object of contents) {
        const key = object.Key === undefined ? undefined : toStorageKey(object.Key);
        if (key !== undefined) yield { key, size: object.Size ?? 0, modified: object.LastModified ?? new Date(0) };
      }
      const last = contents.at(-1)?.Key;
      if (!page.IsTruncated || last === undefined) return;
      StartAfter = last;
    }
  }

  async function stat(key: string): Promise<StoredObjectInfo | undefined> {
    const Key = toObjectKey(key);
    try {
      const head = await client.send(new HeadObjectCommand({ Bucket, Key }));
      return { size: head.ContentLength ?? 0, modified: head.LastModified ?? new Date(0) };
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  async function deleteBatch(keys: string[]): Promise<void> {
    const result = await client.send(new DeleteObjectsCommand({ Bucket, Delete: { Objects: keys.map((Key) => ({ Key })), Quiet: true } }));
    const failed = (result.Errors ?? []).filter((entry) => entry.Code !== 'NoSuchKey');
    if (failed.length > 0) {
      const first = failed[0]!;
      throw new Error(`S3 could not delete ${failed.length} of ${keys.length} objects (first: ${first.Key}: ${first.Code} ${first.Message ?? ''})`.trim());
    }
  }

  return {
    client,
    bucket: Bucket,
    prefix: base,

    async write(key: string, source: Readable, writeOptions?: StorageWriteOptions): Promise<StorageWriteResult> {
      let Key: string;
      try {
        Key = toObjectKey(key);
      } catch (error) {
        source.destroy();
        throw error;
      }
      const size = writeOptions?.size;
      const counted = countBytes({ source, expected: size });
      const ContentType = writeOptions?.contentType;
      try {
        if (size !== undefined && size <= partSize) {
          // A known, small size: one PUT streamed with its Content-Length, nothing buffered. If the
          // source fails, the request is cut short of its Content-Length and S3 stores nothing.
          // The SDK pipes the body into the request and does not watch it for errors: a failing
          // source must abort the request itself, or the PUT would wait forever for its bytes.
          const abort = new AbortController();
          counted.body.once('error', () => abort.abort());
          await client.send(new PutObjectCommand({ Bucket, Key, Body: counted.body, ContentLength: size, ContentType }), { abortSignal: abort.signal });
        } else {
          await new Upload({ client, partSize, queueSize, leavePartsOnError: false, params: { Bucket, Key, Body: counted.body, ContentType } }).done();
        }
      } catch (error) {
        counted.body.destroy();
        source.destroy();
        // The source's own failure is the reason; an abort that failed after it (a store without
        // AbortMultipartUpload) must not hide it.
        throw counted.sourceError() ?? error;
      }
      return { size: counted.size() };
    },

    async read(key: string, range?: ByteRange): Promise<Readable> {
      const Key = toObjectKey(key);
      if (range !== undefined) assertByteRange(range);
      try {
        const out = await client.send(new GetObjectCommand({ Bucket, Key, Range: range ? `bytes=${range.start}-${range.end}` : undefined }));
        const body = out.Body as Readable;
        return range ? trimToRange({ body, served: out.ContentRange, range }) : body;
      } catch (error) {
        if (isNotFound(error)) throw new StorageNotFoundError(key);
        // S3 answers 416 for a range starting at or past the end; the contract wants an empty stream.
        if (range !== undefined && httpStatusOf(error) === 416) {
          if (await stat(key)) return Readable.from([], { objectMode: false });
          throw new StorageNotFoundError(key);
        }
        throw error;
      }
    },

    stat,

    async delete(key: string): Promise<void> {
      const Key = toObjectKey(key);
      try {
        await client.send(new DeleteObjectCommand({ Bucket, Key }));
      } catch (error) {
        if (!isNotFound(error)) throw error; // S3 itself answers 204; some compatible stores say 404
      }
    },

    async deletePrefix(prefix: string): Promise<void> {
      assertStoragePrefix(prefix, { allowEmpty: false });
      let batch: string[] = [toObjectKey(prefix)]; // the object named by the prefix itself, if any
      for await (const object of listObjects(`${base}${prefix}/`)) {
        batch.push(base + object.key);
        if (batch.length === DELETE_BATCH) {
          await deleteBatch(batch);
          batch = [];
        }
      }
      if (batch.length > 0) await deleteBatch(batch);
    },

    list(prefix: string): AsyncIterable<StoredObject> {
      return {
        async *[Symbol.asyncIterator]() {
          assertStoragePrefix(prefix, { allowEmpty: true });
          if (prefix === '') {
            yield* listObjects(base);
            return;
          }
          // Whole segments only: the object named by the prefix, then what lies below `prefix/`
          // (a raw S3 prefix `c/r1` would also select `c/r10/...`).
          const self = await stat(prefix);
          if (self) yield { key: prefix, ...self };
          yield* listObjects(`${base}${prefix}/`);
        },
      };
    },
  };
}

/**
 * Builds the client `s3Storage` uses when it is given settings. Checksums are computed and
 * validated only when an operation requires them: the SDK's default (CRC32 on every upload, sent
 * as an aws-chunked body with a trailer) is rejected or stored corrupted by many S3-compatible
 * stores, and transport integrity is TLS's job.
 */
export function createS3Client(settings: S3ClientSettings): S3Client {
  return new S3Client({
    endpoint: settings.endpoint,
    region: settings.region ?? (settings.endpoint !== undefined ? process.env.AWS_REGION ?? 'us-east-1' : undefined),
    credentials: settings.credentials,
    forcePathStyle: settings.forcePathStyle,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
}

/** `''`, or the prefix with exactly one trailing `/`; refuses what could not be a key prefix. */
function normalisePrefix(prefix: string | undefined): string {
  if (prefix === undefined || prefix === '') return '';
  if (typeof prefix !== 'string') throw new TypeError('s3Storage: `prefix` must be a string');
  const trimmed = prefix.endsWith('/') ? prefix.slice(0, -1) : prefix;
  try {
    assertStoragePrefix(trimmed, { allowEmpty: false });
  } catch (error) {
    throw new TypeError(`s3Storage: invalid \`prefix\` ${JSON.stringify(prefix)}: ${(error as InvalidStorageKeyError).reason ?? String(error)}`);
  }
  return `${trimmed}/`;
}

/**
 * Passes `source` through, counting its bytes, holding it to the `expected` size (when promised)
 * and remembering how it failed: an error, a wrong size, or an end before its end (destroyed),
 * which for-await reports as a premature close.
 */
function countBytes(options: { source: Readable; expected: number | undefined }): { body: Readable; size(): number; sourceError(): unknown } {
  const { source, expected } = options;
  let size = 0;
  let failure: unknown;
  const body = Readable.from(
    (async function* () {
      try {
        checkSourceSize({ expected, delivered: 0, ended: false });
        for await (const chunk of source) {
          const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
          checkSourceSize({ expected, delivered: size + bytes.length, ended: false });
          size += bytes.length;
          yield bytes;
        }
        checkSourceSize({ expected, delivered: size, ended: true });
      } catch (error) {
        failure = error;
        throw error;
      }
    })(),
    { objectMode: false },
  );
  return { body, size: () => size, sourceError: () => failure };
}

/**
 * The body of a ranged GET cut to the range asked for. HTTP lets a server ignore a Range (200
 * with the whole object) or serve more than asked, and some S3-compatible servers do; the
 * `Content-Range` header says which bytes came, so the surplus is skipped here rather than
 * handed to a client that asked for fewer bytes.
 */
function trimToRange(options: { body: Readable; served: string | undefined; range: ByteRange }): Readable {
  const { body, range } = options;
  const match = options.served === undefined ? undefined : /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(options.served);
  const servedStart = match ? Number(match[1]) : 0;
  const servedEnd = match ? Number(match[2]) : Number.POSITIVE_INFINITY;
  if (servedStart === range.start && servedEnd <= range.end) return body;
  if (servedStart > range.start) {
    body.destroy();
    throw new Error(`S3 served bytes from ${servedStart} for a range starting at ${range.start}`);
  }
  let skip = range.start - servedStart;
  let left = range.end - range.start + 1;
  return Readable.from(
    (async function* () {
      try {
        for await (const chunk of body) {
          let bytes = chunk as Buffer;
          if (skip > 0) {
            const dropped = Math.min(skip, bytes.length);
            bytes = bytes.subarray(dropped);
            skip -= dropped;
          }
          if (bytes.length === 0) continue;
          if (bytes.length >= left) {
            yield bytes.subarray(0, left);
            return;
          }
          left -= bytes.length;
          yield bytes;
        }
      } finally {
        body.destroy(); // stop the download once the range is complete, or when the reader gives up
      }
    })(),
    { objectMode: false },
  );
}

function httpStatusOf(error: unknown): number | undefined {
  return (error as { $metadata?: { httpStatusCode?: number } } | undefined)?.$metadata?.httpStatusCode;
}

/** NoSuchKey from GetObject, a bodiless 404 (`NotFound`) from HeadObject. A missing bucket is not "missing key". */
function isNotFound(error: unknown): boolean {
  const name = (error as { name?: string } | undefined)?.name;
  if (name === 'NoSuchBucket') return false;
  return name === 'NoSuchKey' || name === 'NotFound' || httpStatusOf(error) === 404;
}
