import { BadRequestError } from '../errors.js';

/** The encodings a thumbnail can be written in; gif is decoded but never written (it becomes png). */
export type ThumbnailFormat = 'webp' | 'jpeg' | 'png';

/**
 * How a `WxH` thumbnail fills its box. `top`, `center` and `bottom` cover the box and crop the
 * overflow (anchored there; horizontal overflow is always cropped evenly from both sides), `fit`
 * scales the whole image inside the box without cropping, `stretch` ignores the aspect ratio.
 * For the proportional forms (`0xH`, `Wx0`) the mode has no effect.
 */
export type ThumbnailMode = 'top' | 'center' | 'bottom' | 'fit' | 'stretch';

/**
 * A validated thumbnail request. `width` or `height` may be 0 (proportional), never both; each is
 * at most 2048. `quality` and `format` are absent when the request did not give them, so that the
 * defaults are decided in one place (render time and `thumbnailKeySpec`).
 */
export interface ThumbnailSpec {
  width: number;
  height: number;
  mode: ThumbnailMode;
  quality?: number;
  format?: ThumbnailFormat;
}

/** Largest side a client may ask for (docs/thumbnails.md): bounds the work one request can cause. */
export const MAX_THUMBNAIL_SIDE = 2048;
/** Quality used for jpeg and webp when the request gives none; also left out of storage keys. */
export const DEFAULT_THUMBNAIL_QUALITY = 80;

/** Digits only, at most four per side, one optional PocketBase suffix; nothing else is accepted. */
const THUMB_PATTERN = /^([0-9]{1,4})x([0-9]{1,4})([tbf]?)$/;
const QUALITY_PATTERN = /^[0-9]{1,3}$/;
const FORMATS: readonly ThumbnailFormat[] = ['webp', 'jpeg', 'png'];
const THUMBNAILABLE = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);
/** The one-letter mode suffixes of PocketBase; `top` is also the default, so it needs no letter in keys. */
const SUFFIX_MODES: Record<string, ThumbnailMode> = { t: 'top', b: 'bottom', f: 'fit' };

/**
 * Turns the download route's query into a `ThumbnailSpec`, or `undefined` when no thumbnail was
 * asked for (no `thumb`, or an empty one, which PocketBase also ignores). Everything else that is
 * not exactly right is a `BadRequestError` (400) rather than a silent fallback to the original, so
 * a client notices a typo instead of downloading a full-size image:
 *
 * - `invalid_thumb`: `thumb` not `WxH`/`WxHt`/`WxHb`/`WxHf` with 1–4 digits per side, `0x0`, a
 *   side over 2048, or contradicting modes (`stretch` with `center` or with a suffix, `center`
 *   with a suffix);
 * - `thumb_not_allowed`: the field lists `thumbs` (`allowedSizes`) and `thumb`, as written, is
 *   not one of them;
 * - `invalid_thumb_quality`: `quality` not an integer 0–100;
 * - `invalid_thumb_format`: `format` not `webp`, `jpeg` or `png`.
 *
 * `quality` and `format` are ignored without `thumb` (they only describe a thumbnail).
 */
export function parseThumbnailRequest(
  query: { thumb?: string; quality?: string; format?: string; center?: boolean; stretch?: boolean },
  options: { allowedSizes?: readonly string[] },
): ThumbnailSpec | undefined {
  const thumb: unknown = query.thumb;
  if (thumb === undefined || thumb === '') return undefined;
  if (typeof thumb !== 'string') {
    throw new BadRequestError('The thumb parameter must be given once, as WxH.', 'invalid_thumb');
  }
  const match = THUMB_PATTERN.exec(thumb);
  if (!match) {
    throw new BadRequestError(
      'Invalid thumb: expected WxH, WxHt, WxHb or WxHf with whole numbers (e.g. 100x100, 0x50, 100x100f).',
      'invalid_thumb',
    );
  }
  const width = Number(match[1]);
  const height = Number(match[2]);
  const suffix = match[3]!;
  if (width === 0 && height === 0) {
    throw new BadRequestError('Invalid thumb: 0x0 has no size; give a width, a height or both.', 'invalid_thumb');
  }
  if (width > MAX_THUMBNAIL_SIDE || height > MAX_THUMBNAIL_SIDE) {
    throw new BadRequestError(`Invalid thumb: each side must be at most ${MAX_THUMBNAIL_SIDE} pixels.`, 'invalid_thumb');
  }
  const allowed = options.allowedSizes;
  if (allowed !== undefined && allowed.length > 0 && !allowed.includes(thumb)) {
    throw new BadRequestError(`Thumb size ${thumb} is not allowed for this file; allowed: ${allowed.join(', ')}.`, 'thumb_not_allowed');
  }
  const spec: ThumbnailSpec = { width, height, mode: readMode({ suffix, center: query.center === true, stretch: query.stretch === true }) };
  const quality = readQuality(query.quality);
  if (quality !== undefined) spec.quality = quality;
  const format = readFormat(query.format);
  if (format !== undefined) spec.format = format;
  return spec;
}

/**
 * The spec segment of a thumbnail's storage key (`{spec}_{name}`, see `buildThumbnailKey`): one
 * string per distinct output, so a stored thumbnail is found again by any request that would
 * produce the same bytes, and never by one that would not. Defaults are left out, which keeps the
 * common keys PocketBase-like: `100x100`, `100x100b`, `100x100f`, `0x50`; other modes and explicit
 * choices are appended: `100x100-center`, `100x100-stretch`, `100x100-q60`, `100x100-webp`.
 *
 * The format appears only when the request chose it (without it the output follows the original,
 * which is fixed for a given file name), and the quality only for jpeg/webp output and when it is
 * not the default; the mode is dropped for proportional sizes, where it changes nothing.
 */
export function thumbnailKeySpec(spec: ThumbnailSpec, outputFormat: ThumbnailFormat): string {
  let key = `${spec.width}x${spec.height}`;
  if (spec.width !== 0 && spec.height !== 0) {
    if (spec.mode === 'bottom') key += 'b';
    else if (spec.mode === 'fit') key += 'f';
    else if (spec.mode === 'center') key += '-center';
    else if (spec.mode === 'stretch') key += '-stretch';
  }
  const quality = spec.quality ?? DEFAULT_THUMBNAIL_QUALITY;
  if (outputFormat !== 'png' && quality !== DEFAULT_THUMBNAIL_QUALITY) key += `-q${quality}`;
  if (spec.format !== undefined) key += `-${outputFormat}`;
  return key;
}

/**
 * The format a thumbnail is written in: the requested one, else the original's (docs/thumbnails.md), with
 * gif (and anything unexpected) becoming png, which keeps transparency and is lossless.
 */
export function outputFormatFor(spec: ThumbnailSpec, originalMime: string): ThumbnailFormat {
  if (spec.format !== undefined) return spec.format;
  const mime = normalizeMime(originalMime);
  if (mime === 'image/jpeg') return 'jpeg';
  if (mime === 'image/webp') return 'webp';
  return 'png';
}

/**
 * True for the originals we make thumbnails of (png, jpeg, gif, webp). Everything else (svg,
 * pdf, video, ...) is served as the original, because decoding it is either unsafe or not ours.
 */
export function isThumbnailable(mime: string): boolean {
  return THUMBNAILABLE.has(normalizeMime(mime));
}

/** The MIME type of a thumbnail format, for Content-Type and storage metadata. */
export function getMimeType(format: ThumbnailFormat): string {
  return `image/${format}`;
}

function readMode(flags: { suffix: string; center: boolean; stretch: boolean }): ThumbnailMode {
  const { suffix, center, stretch } = flags;
  if ((stretch && (center || suffix !== '')) || (center && suffix !== '')) {
    throw new BadRequestError(
      'Invalid thumb: choose one mode (a t/b/f suffix, center or stretch), not several.',
      'invalid_thumb',
    );
  }
  if (stretch) return 'stretch';
  if (center) return 'center';
  return SUFFIX_MODES[suffix] ?? 'top';
}

function readQuality(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !QUALITY_PATTERN.test(value) || Number(value) > 100) {
    throw new BadRequestError('Invalid quality: expected a whole number from 0 to 100.', 'invalid_thumb_quality');
  }
  return Number(value);
}

function readFormat(value: unknown): ThumbnailFormat | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !(FORMATS as readonly string[]).includes(value)) {
    throw new BadRequestError('Invalid format: expected webp, jpeg or png.', 'invalid_thumb_format');
  }
  return value as ThumbnailFormat;
}

function normalizeMime(mime: string): string {
  return String(mime ?? '').split(';')[0]!.trim().toLowerCase();
}
