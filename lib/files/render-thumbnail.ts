import type { Bitmap } from 'jimp';
import {
  DEFAULT_THUMBNAIL_QUALITY,
  isThumbnailable,
  getMimeType,
  outputFormatFor,
  type ThumbnailSpec,
} from './thumbnail-spec.js';
import { ThumbnailJimp, type JimpImage } from './thumbnail-jimp.js';

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

/** Largest original we decode (40 megapixels, 160 MB as RGBA): beyond it one request could exhaust memory. */
export const MAX_SOURCE_PIXELS = 40_000_000;
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
  const { data, mimeType, spec } = input;
  if (!isThumbnailable(mimeType)) throw new Error(`not a thumbnailable image type: ${mimeType}`);
  const dimensions = readImageDimensions(data);
  if (dimensions === undefined || dimensions.width === 0 || dimensions.height === 0) {
    throw new Error('image dimensions unreadable; not making a thumbnail');
  }
  if (dimensions.width * dimensions.height > MAX_SOURCE_PIXELS) throw new Error('image too large for a thumbnail');

  const image = await ThumbnailJimp.fromBuffer(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
  const plan = planThumbnail({ width: image.bitmap.width, height: image.bitmap.height }, spec);
  if (plan.width * plan.height > MAX_OUTPUT_PIXELS) throw new Error('thumbnail too large');
  if (plan.crop) image.crop(plan.crop);
  if (image.bitmap.width !== plan.width || image.bitmap.height !== plan.height) {
    image.resize({ w: plan.width, h: plan.height });
  }

  const format = outputFormatFor(spec, mimeType);
  const quality = spec.quality ?? DEFAULT_THUMBNAIL_QUALITY;
  const encoded = await encodeImage(image, { format, quality });
  return { data: new Uint8Array(encoded.buffer, encoded.byteOffset, encoded.byteLength), contentType: getMimeType(format) };
};

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

/**
 * Reads an image's pixel size from its header (png IHDR, gif screen and first frame, jpeg SOFn,
 * webp VP8/VP8L/VP8X) without decoding it, so that a small file claiming a huge canvas (a
 * decompression bomb) is refused before any memory is allocated for it. `undefined` when the
 * bytes are not one of these formats or the header is cut short.
 */
export function readImageDimensions(data: Uint8Array): { width: number; height: number } | undefined {
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (bytes.length >= 24 && bytes.readUInt32BE(0) === 0x89504e47 && bytes.readUInt32BE(4) === 0x0d0a1a0a) {
    if (bytes.toString('latin1', 12, 16) !== 'IHDR') return undefined;
    return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
  }
  if (bytes.length >= 10 && /^GIF8[79]a$/.test(bytes.toString('latin1', 0, 6))) return readGifDimensions(bytes);
  if (bytes.length >= 4 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return readJpegDimensions(bytes);
  if (bytes.length >= 16 && bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WEBP') {
    return readWebpDimensions(bytes);
  }
  return undefined;
}

/**
 * The logical screen and the first frame (the only one decoded) may disagree, and the decoder
 * allocates for both; report the larger of each side.
 */
function readGifDimensions(bytes: Buffer): { width: number; height: number } | undefined {
  let width = bytes.readUInt16LE(6);
  let height = bytes.readUInt16LE(8);
  if (bytes.length < 13) return undefined;
  const packed = bytes[10]!;
  let offset = 13 + ((packed & 0x80) !== 0 ? 3 * 2 ** ((packed & 0x07) + 1) : 0);
  while (offset < bytes.length) {
    const block = bytes[offset]!;
    if (block === 0x2c) {
      if (offset + 9 > bytes.length) return undefined;
      width = Math.max(width, bytes.readUInt16LE(offset + 5));
      height = Math.max(height, bytes.readUInt16LE(offset + 7));
      return { width, height };
    }
    if (block !== 0x21) return undefined; // the trailer, or garbage, before any frame
    offset += 2; // introducer and label, then data sub-blocks up to a zero length
    while (offset < bytes.length && bytes[offset] !== 0) offset += bytes[offset]! + 1;
    offset += 1;
  }
  return undefined;
}

function readJpegDimensions(bytes: Buffer): { width: number; height: number } | undefined {
  let offset = 2;
  while (offset + 4 <= bytes.length) {
    if (bytes[offset] !== 0xff) return undefined;
    const marker = bytes[offset + 1]!;
    if (marker === 0xff) {
      offset += 1; // fill byte
      continue;
    }
    if (marker === 0xd8 || marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      offset += 2; // markers without a length
      continue;
    }
    if (marker === 0xd9 || marker === 0xda) return undefined; // end of image or scan data before any frame header
    const length = bytes.readUInt16BE(offset + 2);
    const isFrameHeader = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
    if (isFrameHeader) {
      if (offset + 9 > bytes.length) return undefined;
      return { width: bytes.readUInt16BE(offset + 7), height: bytes.readUInt16BE(offset + 5) };
    }
    if (length < 2) return undefined;
    offset += 2 + length;
  }
  return undefined;
}

function readWebpDimensions(bytes: Buffer): { width: number; height: number } | undefined {
  const chunk = bytes.toString('latin1', 12, 16);
  if (chunk === 'VP8X' && bytes.length >= 30) {
    return { width: bytes.readUIntLE(24, 3) + 1, height: bytes.readUIntLE(27, 3) + 1 };
  }
  if (chunk === 'VP8L' && bytes.length >= 25 && bytes[20] === 0x2f) {
    const bits = bytes.readUInt32LE(21);
    return { width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 };
  }
  if (chunk === 'VP8 ' && bytes.length >= 30 && bytes[23] === 0x9d && bytes[24] === 0x01 && bytes[25] === 0x2a) {
    return { width: bytes.readUInt16LE(26) & 0x3fff, height: bytes.readUInt16LE(28) & 0x3fff };
  }
  return undefined;
}
