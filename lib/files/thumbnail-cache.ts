import { Readable } from 'node:stream';
import { UnavailableError } from '../errors.js';
import type { Logger } from '../logger.js';
import { buildFileKey, buildThumbnailKey, buildThumbnailPrefix } from './file-names.js';
import { readImageDimensions } from './read-image-dimensions.js';
import type { ThumbnailBatchFunction, ThumbnailBatchResult, ThumbnailFunction } from './render-thumbnail.js';
import type { Storage, StoredObjectInfo } from './storage.js';
import { isThumbnailable, getMimeType, outputFormatFor, thumbnailKeySpec, type ThumbnailSpec } from './thumbnail-spec.js';
import { activeSpan, endSpan, startChildSpan, type TelemetrySpan } from '../telemetry/start-span.js';

/** Default `maxSourceBytes`: bigger originals are served as they are rather than read into memory. */
const DEFAULT_MAX_SOURCE_BYTES = 50 * 1024 * 1024;

/** Which thumbnail a download asks for: the stored file (as in its key) and the parsed spec. */
export interface ThumbnailRequest {
  collectionId: string;
  recordId: string;
  /** The stored file name. */
  name: string;
  /** The original's MIME type; decides whether a thumbnail is possible and its default format. */
  mimeType: string;
  spec: ThumbnailSpec;
  /**
   * Whether the file's field lists its sizes (`thumbs`): those are bounded by the list, so the
   * per-file bound (`maxStoredPerFile`) does not apply to them.
   */
  sizesListed?: boolean;
}

/** A thumbnail ready to serve from storage. */
export interface StoredThumbnail {
  key: string;
  contentType: string;
  /** What `stat` said of it when the cache found it stored (a serve can skip its own `stat`); absent for one made now. */
  info?: StoredObjectInfo;
}

/** Makes each thumbnail once and finds it again in storage afterwards. */
export interface ThumbnailCache {
  /**
   * Resolves with the stored thumbnail (made now if needed), or `undefined` when the caller should
   * serve the original instead: not a thumbnailable type, an original over `maxSourceBytes` or
   * `maxPixels`, a file that already has `maxStoredPerFile` thumbnails, or an image the renderer
   * refused (corrupt, too large; logged as a warning). Rejects with an `UnavailableError` (503,
   * `thumbnail_queue_full`) when `maxQueue` thumbnails already wait, and when the storage fails
   * (read, write, stat, list), which the caller answers with a 500.
   */
  get(request: ThumbnailRequest): Promise<StoredThumbnail | undefined>;
  /** Thumbnails waiting for their render to start (the `recordbase.thumbnail.queue.length` gauge). */
  queued(): number;
}

/** Options of `createThumbnailCache`. */
export interface ThumbnailCacheOptions {
  storage: Storage;
  /**
   * Makes several thumbnails of one original from one decode: the worker pool's `renderBatch`.
   * Give this or `render`.
   */
  renderBatch?: ThumbnailBatchFunction;
  /** Makes one thumbnail (the host's own function): called once per spec of a batch, in turn. */
  render?: ThumbnailFunction;
  logger: Logger;
  /** Largest original read for a thumbnail, in bytes (default 50 MiB). */
  maxSourceBytes?: number;
  /** Originals rendered at once (`thumbnailWorkers`): the worker count, so that no job waits in the pool holding its bytes. */
  concurrency: number;
  /** Thumbnails waiting for their render to start; one more is a 503 (`limits.maxThumbnailQueue`). */
  maxQueue: number;
  /**
   * Pixels (width x height of the originals) being decoded at once, by all renders together; also
   * the largest original decoded at all (`limits.maxThumbnailPixels`).
   */
  maxPixels: number;
  /** Thumbnails stored per file whose field lists no `thumbs`; past them the original is served (`limits.maxThumbnailsPerFile`). */
  maxStoredPerFile: number;
}

/** One thumbnail asked for: where it goes and who waits for it. */
interface Target {
  spec: ThumbnailSpec;
  stored: StoredThumbnail;
  resolve(result: StoredThumbnail | undefined): void;
  reject(error: unknown): void;
}

/** The thumbnails of one original made together: one read of the original, one decode. */
interface Batch {
  request: ThumbnailRequest;
  originalKey: string;
  targets: Target[];
  /** The span of the request that queued it, if traced: its render's span is a child of it. */
  parent?: TelemetrySpan;
}

/**
 * Creates the thumbnail cache of the download route. Thumbnails are stored beside their original
 * (`{collectionId}/{recordId}/thumbs_{name}/{spec}_{name}`) so they survive restarts, are shared
 * by every process on the same storage, and are deleted with the file.
 *
 * What one request can cost is bounded (docs/limits.md): concurrent requests for one thumbnail
 * share one job; requests for sizes of one original wait together and are made in one batch from
 * one decode, one batch per original at a time; at most `concurrency` batches run, the rest wait
 * in a queue of at most `maxQueue` thumbnails holding nothing but the request (the original is
 * read when its batch starts); the originals being decoded add up to at most `maxPixels` pixels;
 * a file gets at most `maxStoredPerFile` stored thumbnails unless its field lists its sizes.
 */
export function createThumbnailCache(options: ThumbnailCacheOptions): ThumbnailCache {
  const { storage, logger } = options;
  const renderBatch = options.renderBatch ?? renderEachWith(options.render);
  const maxSourceBytes = options.maxSourceBytes ?? DEFAULT_MAX_SOURCE_BYTES;
  const { concurrency, maxQueue, maxStoredPerFile } = options;
  const pixels = createPixelBudget(options.maxPixels);
  const inFlight = new Map<string, Promise<StoredThumbnail | undefined>>();
  const waiting: Batch[] = [];
  const waitingByOriginal = new Map<string, Batch>();
  const runningOriginals = new Set<string>();
  let waitingTargets = 0;

  function enqueue(request: ThumbnailRequest, stored: StoredThumbnail): Promise<StoredThumbnail | undefined> {
    if (waitingTargets >= maxQueue) {
      throw new UnavailableError(
        `Too many thumbnails are waiting to be made (limits.maxThumbnailQueue is ${maxQueue}); try again in a moment.`,
        'thumbnail_queue_full',
      );
    }
    const originalKey = buildFileKey(request);
    let batch = waitingByOriginal.get(originalKey);
    if (!batch) {
      batch = { request, originalKey, targets: [], parent: activeSpan() };
      waiting.push(batch);
      waitingByOriginal.set(originalKey, batch);
    }
    waitingTargets++;
    const promise = new Promise<StoredThumbnail | undefined>((resolve, reject) => {
      batch.targets.push({ spec: request.spec, stored, resolve, reject });
    });
    startBatches();
    return promise;
  }

  /** Starts waiting batches, oldest first, while there is room and their original is not busy. */
  function startBatches(): void {
    while (runningOriginals.size < concurrency) {
      const index = waiting.findIndex((batch) => !runningOriginals.has(batch.originalKey));
      if (index === -1) return;
      const [batch] = waiting.splice(index, 1) as [Batch];
      waitingByOriginal.delete(batch.originalKey);
      waitingTargets -= batch.targets.length;
      runningOriginals.add(batch.originalKey);
      void runBatch(batch).finally(() => {
        runningOriginals.delete(batch.originalKey);
        startBatches();
      });
    }
  }

  async function runBatch(batch: Batch): Promise<void> {
    try {
      const made = await makeBatch(batch);
      for (const target of batch.targets) target.resolve(made.get(target.stored.key));
    } catch (error) {
      for (const target of batch.targets) target.reject(error);
    }
  }

  /** Makes what is still missing of a batch; the stored thumbnail by key, absent where the original is to be served. */
  async function makeBatch(batch: Batch): Promise<Map<string, StoredThumbnail>> {
    const made = new Map<string, StoredThumbnail>();
    let todo: Target[] = [];
    for (const target of batch.targets) {
      // Another process on the same storage may have made it while this one waited.
      if (await storage.stat(target.stored.key)) made.set(target.stored.key, target.stored);
      else todo.push(target);
    }
    if (todo.length > 0 && batch.request.sizesListed !== true) {
      const room = maxStoredPerFile - (await countStored(buildThumbnailPrefix(batch.request)));
      todo = todo.slice(0, Math.max(0, room));
    }
    if (todo.length === 0) return made;

    const original = await storage.stat(batch.originalKey);
    if (original === undefined || original.size > maxSourceBytes) return made;
    const data = await readAll({ storage, key: batch.originalKey, maxBytes: maxSourceBytes });
    if (data === undefined) return made;
    const dimensions = readImageDimensions(data);
    // Unreadable headers cost nothing to refuse: the renderer does so before decoding.
    const weight = dimensions ? dimensions.width * dimensions.height : 0;
    // Neither the record's id nor the file's name (both in the key) goes to the log: the collection and the count say enough (docs/observability.md).
    const where = `a file of collection ${batch.request.collectionId} (${todo.length} ${todo.length === 1 ? 'size' : 'sizes'})`;
    if (weight > pixels.size) {
      logger.warn(`thumbnails of ${where} not made, serving the original: ${weight} pixels is over limits.maxThumbnailPixels (${pixels.size})`);
      return made;
    }
    let results: ThumbnailBatchResult[];
    await pixels.acquire(weight);
    const span = startChildSpan('thumbnail render', { parent: batch.parent, attributes: { 'recordbase.thumbnail.count': todo.length } });
    try {
      results = await renderBatch({ data, mimeType: batch.request.mimeType, specs: todo.map((target) => target.spec), maxSourcePixels: pixels.size });
      endSpan(span);
    } catch (error) {
      endSpan(span, true);
      logger.warn(`thumbnails of ${where} not made, serving the original: ${error instanceof Error ? error.message : String(error)}`);
      return made;
    } finally {
      pixels.release(weight);
    }
    for (const [index, target] of todo.entries()) {
      const result = results[index];
      if (result === undefined || 'error' in result) {
        logger.warn(`a thumbnail of a file of collection ${batch.request.collectionId} not made, serving the original: ${result?.error ?? 'no result'}`);
        continue;
      }
      const { data: bytes, contentType } = result.output;
      await storage.write(target.stored.key, Readable.from([Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)]), {
        contentType,
        size: bytes.byteLength,
      });
      made.set(target.stored.key, { key: target.stored.key, contentType });
    }
    return made;
  }

  async function countStored(prefix: string): Promise<number> {
    let count = 0;
    for await (const _object of storage.list(prefix)) count++;
    return count;
  }

  return {
    queued: () => waitingTargets,
    async get(request) {
      if (!isThumbnailable(request.mimeType)) return undefined;
      const format = outputFormatFor(request.spec, request.mimeType);
      const key = buildThumbnailKey({ ...request, spec: thumbnailKeySpec(request.spec, format) });
      const pending = inFlight.get(key);
      if (pending) return pending;
      const stored: StoredThumbnail = { key, contentType: getMimeType(format) };
      const job = (async () => {
        const info = await storage.stat(key);
        return info ? { ...stored, info } : enqueue(request, stored);
      })().finally(() => inFlight.delete(key));
      inFlight.set(key, job);
      return job;
    },
  };
}

/** A host's one-spec function as a batch function: the specs in turn, each failure its own result. */
function renderEachWith(render: ThumbnailFunction | undefined): ThumbnailBatchFunction {
  if (render === undefined) throw new TypeError('createThumbnailCache needs render or renderBatch');
  return async ({ data, mimeType, specs }) => {
    const results: ThumbnailBatchResult[] = [];
    for (const spec of specs) {
      try {
        // Each call gets its own copy: a renderer may take ownership of (transfer) its input.
        results.push({ output: await render({ data: specs.length > 1 ? data.slice() : data, mimeType, spec }) });
      } catch (error) {
        results.push({ error: error instanceof Error ? error.message : String(error) });
      }
    }
    return results;
  };
}

/**
 * A first-come first-served budget of pixels: a render takes the width x height of its original
 * before decoding and gives it back after. The head of the line waits until it fits, and the
 * others wait behind it, so a large image is never starved by small ones.
 */
function createPixelBudget(size: number) {
  let used = 0;
  const waiters: Array<{ weight: number; resolve(): void }> = [];
  return {
    size,
    acquire(weight: number): Promise<void> {
      if (waiters.length === 0 && used + weight <= size) {
        used += weight;
        return Promise.resolve();
      }
      return new Promise<void>((resolve) => waiters.push({ weight, resolve }));
    },
    release(weight: number): void {
      used -= weight;
      while (waiters.length > 0 && used + waiters[0]!.weight <= size) {
        const next = waiters.shift()!;
        used += next.weight;
        next.resolve();
      }
    },
  };
}

/**
 * Reads a whole object, giving up (`undefined`) past `maxBytes`: the size from `stat` may be stale
 * if the file was replaced in between, and the limit must hold for the bytes actually read.
 */
async function readAll(options: { storage: Storage; key: string; maxBytes: number }): Promise<Uint8Array | undefined> {
  const stream = await options.storage.read(options.key);
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of stream) {
      const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
      total += buffer.byteLength;
      if (total > options.maxBytes) return undefined;
      chunks.push(buffer);
    }
  } finally {
    stream.destroy();
  }
  // A fresh ArrayBuffer of exactly this size, so the worker pool can transfer it without copying.
  const data = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    data.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return data;
}
