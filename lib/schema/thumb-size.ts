/**
 * The grammar of a thumbnail size (`100x100`, `0x50`, `100x100f`): shared by the check of a file
 * field's `thumbs` list when the schema is built and by the download route's `thumb` parameter
 * (lib/files/thumbnail-spec.ts), so that a size a field lists is always one a client can ask for.
 */

/** Largest side a thumbnail may have (docs/thumbnails.md): bounds the work one request can cause. */
export const MAX_THUMBNAIL_SIDE = 2048;

/** Digits only, at most four per side, one optional PocketBase suffix (`t`, `b`, `f`); nothing else. */
const THUMB_SIZE = /^([0-9]{1,4})x([0-9]{1,4})([tbf]?)$/;

/** A parsed size: `width` or `height` may be 0 (proportional), never both; `suffix` is `''`, `t`, `b` or `f`. */
export interface ThumbSize {
  width: number;
  height: number;
  suffix: '' | 't' | 'b' | 'f';
}

/**
 * Reads a thumbnail size, or says in a short phrase why it is not one (`"0x0 has no size"`), so
 * that each caller words the error its own way (a 400 for a client, a SchemaError for a definition).
 */
export function parseThumbSize(text: unknown): ThumbSize | { error: string } {
  const match = typeof text === 'string' ? THUMB_SIZE.exec(text) : null;
  if (!match) return { error: 'expected WxH, WxHt, WxHb or WxHf with whole numbers (e.g. 100x100, 0x50, 100x100f)' };
  const width = Number(match[1]);
  const height = Number(match[2]);
  if (width === 0 && height === 0) return { error: '0x0 has no size; give a width, a height or both' };
  if (width > MAX_THUMBNAIL_SIDE || height > MAX_THUMBNAIL_SIDE) return { error: `each side must be at most ${MAX_THUMBNAIL_SIDE} pixels` };
  return { width, height, suffix: match[3] as ThumbSize['suffix'] };
}
