import { Readable } from 'node:stream';
import type { Logger } from '../http/logger.js';
import { buildFileKey, buildThumbnailKey } from './file-names.js';
import type { ThumbnailFunction } from './render-thumbnail.js';
import type { Storage } from './storage.js';
import { isThumbnailable, getMimeType, outputFormatFor, thumbnailKeySpec, type ThumbnailSpec } from './thumbnail-spec.js';

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
}

/** A thumbnail ready to serve from storage. */
export interface StoredThumbnail {
  key: string;
  contentType: string;
}

/** Makes each thumbnail once and finds it again in storage afterwards. */
export interface ThumbnailCache {
  /**
   * Resolves with the stored thumbnail (made now if needed), or `undefined` when the caller should
   * serve the original instead: not a thumbnailable type, an original over `maxSourceBytes`, or an
   * image the renderer refused (corrupt, too large; logged as a warning). Rejects only when the
   * storage fails (read, write or stat), which the caller answers with a 500.
   */
  get(request: ThumbnailRequest): Promise<StoredThumbnail | undefined>;
}

/** Options of `createThumbnailCache`. */
export interface ThumbnailCacheOptions {
  storage: Storage;
  /** Makes one thumbnail: the worker pool's `render`, or the host's own function. */
  render: ThumbnailFunction;
  logger: Logger;
  /** Largest original read for a thumbnail, in bytes (default 50 MiB). */
  maxSourceBytes?: number;
}

/**
 * Creates the thumbnail cache of the download route. Thumbnails are stored beside their original
 * (`{collectionId}/{recordId}/thumbs_{name}/{spec}_{name}`) so they survive restarts, are shared
 * by every process on the same storage, and are deleted with the file. Concurrent requests for the
 * same thumbnail share one job (one read, one render, one write) instead of each decoding the
 * image: a page of 50 identical avatars would otherwise start 50 renders.
 */
export function createThumbnailCache(options: ThumbnailCacheOptions): ThumbnailCache {
  const { storage, render, logger } = options;
  const maxSourceBytes = options.maxSourceBytes ?? DEFAULT_MAX_SOURCE_BYTES;
  const inFlight = new Map<string, Promise<StoredThumbnail | undefined>>();

  async function makeThumbnail(request: ThumbnailRequest, target: StoredThumbnail): Promise<StoredThumbnail | undefined> {
    if (await storage.stat(target.key)) return target;
    const originalKey = buildFileKey(request);
    const original = await storage.stat(originalKey);
    if (original === undefined || original.size > maxSourceBytes) return undefined;
    const data = await readAll({ storage, key: originalKey, maxBytes: maxSourceBytes });
    if (data === undefined) return undefined;
    let output;
    try {
      output = await render({ data, mimeType: request.mimeType, spec: request.spec });
    } catch (error) {
      logger.warn(`thumbnail ${target.key} not made, serving the original: ${error instanceof Error ? error.message : String(error)}`);
      return undefined;
    }
    await storage.write(target.key, Readable.from([Buffer.from(output.data.buffer, output.data.byteOffset, output.data.byteLength)]), {
      contentType: output.contentType,
      size: output.data.byteLength,
    });
    return { key: target.key, contentType: output.contentType };
  }

  return {
    async get(request) {
      if (!isThumbnailable(request.mimeType)) return undefined;
      const format = outputFormatFor(request.spec, request.mimeType);
      const key = buildThumbnailKey({ ...request, spec: thumbnailKeySpec(request.spec, format) });
      const pending = inFlight.get(key);
      if (pending) return pending;
      const job = makeThumbnail(request, { key, contentType: getMimeType(format) }).finally(() => inFlight.delete(key));
      inFlight.set(key, job);
      return job;
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
