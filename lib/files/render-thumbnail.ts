import type { Bitmap } from 'jimp';
import { readImageDimensions } from './read-image-dimensions.js';
import {
  DEFAULT_THUMBNAIL_QUALITY,
  isThumbnailable,
  getMimeType,
  outputFormatFor,
  type ThumbnailSpec,
} from './thumbnail-spec.js';
import { ThumbnailJimp, type JimpImage } from './thumbnail-jimp.js';

export { readImageDimensions };

/** What a thumbnail function receives: the original's bytes, its (sniffed) MIME type and the parsed request. */
export interface ThumbnailInput {
  data: Uint8Array;
  mimeType: string;
  spec: ThumbnailSpec;
}

/** What a thumbnail function returns: the encoded thumbnail and the MIME type it is served with. */
export interface ThumbnailOutput {
  data: Uint8Array;
  contentType: string;
}

/**
 * The plug-in point for image processing. recordbase calls it (in a worker pool by default) with
 * a validated spec and an original of a thumbnailable type; a host may pass its own function with
 * the same contract (e.g. backed by sharp) as the router's `thumbnail` option. It must honour
 * `spec` as documented in docs/thumbnails.md, default to `outputFormatFor(spec, mimeType)`, and
 * reject (not hang) on input it cannot or will not handle: the caller then serves the original.
 */
export type ThumbnailFunction = (input: ThumbnailInput) => Promise<ThumbnailOutput>;

/**
 * Largest original `renderThumbnail` decodes when the caller gives no budget (40 megapixels):
 * beyond it one request could exhaust memory. The router passes `limits.maxThumbnailPixels`.
 */
export const MAX_SOURCE_PIXELS = 40_000_000;

/** Several thumbnails of one original, made from one decode (the worker pool's unit of work). */
export interface ThumbnailBatchInput {
  data: Uint8Array;
  mimeType: string;
  specs: ThumbnailSpec[];
  /** Largest original decoded, in pixels (width x height from the header). Default MAX_SOURCE_PIXELS. */
  maxSourcePixels?: number;
}

/** One thumbnail of a batch: made, or why not (a message; the caller serves the original). */
export type ThumbnailBatchResult = { output: ThumbnailOutput } | { error: string };

/**
 * Makes every thumbnail of a batch, in order. Rejects when the original itself cannot be used
 * (not thumbnailable, unreadable header, over the pixel budget, corrupt); a problem with one spec
 * (a result too large) is that spec's `error` only.
 */
export type ThumbnailBatchFunction = (input: ThumbnailBatchInput) => Promise<ThumbnailBatchResult[]>;
/**
 * Largest thumbnail we encode. An explicit `WxH` is at most 2048x2048 (4 MP); only the proportional
 * forms of a very elongated original can go beyond, and four times that is plenty.
 */
const MAX_OUTPUT_PIXELS = 4 * 2048 * 2048;

/**
 * The default `ThumbnailFunction`, pure JavaScript and wasm (jimp + @jsquash/webp), so the package
 * needs no native build. It runs synchronously heavy code: call it through the worker pool
 * (thumbnail-pool.ts), not on the main thread of a server.
 *
 * Sizes follow PocketBase: the cover modes, `stretch` and the proportional forms produce exactly
 * the requested size, enlarging a smaller original; `fit` never enlarges (the result fits inside
 * the box and is at most the original's size). Before decoding, the dimensions are read from the
 * header and the original is refused (rejects with a plain Error, so the caller serves the
 * original) when it has more than 40 megapixels, its header cannot be read, or the result would
 * be more than 16 megapixels.
 */
export const renderThumbnail: ThumbnailFunction = async (input) => {
  const [result] = await renderThumbnailBatch({ data: input.data, mimeType: input.mimeType, specs: [input.spec] });
  if ('error' in result!) throw new Error(result.error);
  return result!.output;
};

/**
 * `renderThumbnail` for several specs of one original: the original is decoded once and every
 * thumbnail is cut from that bitmap, which is most of the work saved: a decode costs time and
 * memory in proportion to the original's pixels, not the thumbnail's. The decoded bitmap is never
 * changed: each spec crops and resizes into new buffers.
 */
export const renderThumbnailBatch: ThumbnailBatchFunction = async (input) => {
  const { data, mimeType, specs } = input;
  if (!isThumbnailable(mimeType)) throw new Error(`not a thumbnailable image type: ${mimeType}`);
  const dimensions = readImageDimensions(data);
  if (dimensions === undefined || dimensions.width === 0 || dimensions.height === 0) {
    throw new Error('image dimensions unreadable; not making a thumbnail');
  }
  if (dimensions.width * dimensions.height > (input.maxSourcePixels ?? MAX_SOURCE_PIXELS)) throw new Error('image too large for a thumbnail');

  const source = (await ThumbnailJimp.fromBuffer(Buffer.from(data.buffer, data.byteOffset, data.byteLength))).bitmap;
  const results: ThumbnailBatchResult[] = [];
  for (const spec of specs) {
    try {
      results.push({ output: await renderFromBitmap({ source, spec, mimeType }) });
    } catch (error) {
      results.push({ error: error instanceof Error ? error.message : String(error) });
    }
  }
  return results;
};

async function renderFromBitmap(options: { source: Bitmap; spec: ThumbnailSpec; mimeType: string }): Promise<ThumbnailOutput> {
  const { source, spec, mimeType } = options;
  const plan = planThumbnail({ width: source.width, height: source.height }, spec);
  if (plan.width * plan.height > MAX_OUTPUT_PIXELS) throw new Error('thumbnail too large');
  // A bitmap object of its own (jimp's crop and resize replace its fields), over the shared pixels.
  const image = new ThumbnailJimp({ data: source.data, width: source.width, height: source.height });
  if (plan.crop) image.crop(plan.crop);
  if (image.bitmap.width !== plan.width || image.bitmap.height !== plan.height) {
    image.resize({ w: plan.width, h: plan.height });
  }
  // A full-width crop is a view of the source and an unchanged size is the source itself; the
  // jpeg encoder below writes into the pixels, which must not reach the next spec of the batch.
  if (image.bitmap.data.buffer === source.data.buffer) image.bitmap.data = Buffer.from(image.bitmap.data);

  const format = outputFormatFor(spec, mimeType);
  const quality = spec.quality ?? DEFAULT_THUMBNAIL_QUALITY;
  const encoded = await encodeImage(image, { format, quality });
  return { data: new Uint8Array(encoded.buffer, encoded.byteOffset, encoded.byteLength), contentType: getMimeType(format) };
}

async function encodeImage(image: JimpImage, options: { format: 'webp' | 'jpeg' | 'png'; quality: number }): Promise<Buffer> {
  if (options.format === 'png') return image.getBuffer('image/png');
  if (options.format === 'webp') return image.getBuffer('image/webp', { quality: options.quality });
  // jpeg has no alpha channel: without flattening, transparent areas turn into whatever colour
  // their pixels happen to hold (usually black).
  flattenOntoWhite(image.bitmap);
  return image.getBuffer('image/jpeg', { quality: options.quality });
}

function flattenOntoWhite(bitmap: Bitmap): void {
  const pixels = bitmap.data;
  for (let i = 0; i < pixels.length; i += 4) {
    const alpha = pixels[i + 3]!;
    if (alpha === 255) continue;
    const keep = alpha / 255;
    const white = 255 * (1 - keep);
    pixels[i] = Math.round(pixels[i]! * keep + white);
    pixels[i + 1] = Math.round(pixels[i + 1]! * keep + white);
    pixels[i + 2] = Math.round(pixels[i + 2]! * keep + white);
    pixels[i + 3] = 255;
  }
}

interface ThumbnailPlan {
  /** The part of the original to keep (cover modes), before resizing. */
  crop?: { x: number; y: number; w: number; h: number };
  width: number;
  height: number;
}

/**
 * Decides the crop and the final size. Cover modes crop the original to the target's aspect
 * ratio first and resize the crop, so no intermediate bitmap is ever larger than the original or
 * the result (scaling first, as jimp's `cover` does, can blow up an elongated original).
 */
function planThumbnail(source: { width: number; height: number }, spec: ThumbnailSpec): ThumbnailPlan {
  const { width: W, height: H } = source;
  const { width: w, height: h } = spec;
  if (w === 0) return { width: Math.max(1, Math.round((W * h) / H)), height: h };
  if (h === 0) return { width: w, height: Math.max(1, Math.round((H * w) / W)) };
  if (spec.mode === 'stretch') return { width: w, height: h };
  if (spec.mode === 'fit') {
    if (W <= w && H <= h) return { width: W, height: H };
    const factor = Math.min(w / W, h / H);
    return { width: Math.max(1, Math.min(w, Math.round(W * factor))), height: Math.max(1, Math.min(h, Math.round(H * factor))) };
  }
  if (W * h > H * w) {
    // The original is wider than the box: keep the full height, crop both sides evenly.
    const cropWidth = clamp(Math.round((H * w) / h), 1, W);
    return { crop: { x: Math.floor((W - cropWidth) / 2), y: 0, w: cropWidth, h: H }, width: w, height: h };
  }
  const cropHeight = clamp(Math.round((W * h) / w), 1, H);
  const spare = H - cropHeight;
  const y = spec.mode === 'bottom' ? spare : spec.mode === 'center' ? Math.floor(spare / 2) : 0;
  return { crop: { x: 0, y, w: W, h: cropHeight }, width: w, height: h };
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}
