import { randomInt } from 'node:crypto';
import { isSafeRecordId } from '../schema/record-id.js';
import { lookupExtension } from './sniff-mime-type.js';
import { InvalidStorageKeyError } from './storage.js';

/** Longest sanitised stem (docs/files.md): long enough to recognise a file, short enough for any filesystem. */
const MAX_STEM_LENGTH = 100;
/** Random suffix length: 36^10 (about 52 bits) makes a collision within one record practically impossible. */
const SUFFIX_LENGTH = 10;
/** stem + `_` + suffix + `.` + extension at their longest; also bounds the regex's work on hostile input. */
const MAX_STORED_NAME_LENGTH = 100 + 1 + 10 + 1 + 20;
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
const EXTENSION = /^[a-z0-9]{1,20}$/;
/** A stem as `createStoredFileName` produces it: [a-z0-9] runs joined by single underscores. */
const STORED_NAME = /^([a-z0-9]+(?:_[a-z0-9]+)*)_[a-z0-9]{10}(?:\.[a-z0-9]{1,20})?$/;
/** Collection ids as the schema accepts them (lib/schema/collection-schema.ts). */
const COLLECTION_ID = /^[A-Za-z0-9_]{1,63}$/;
/** Thumbnail spec in a key: the size (`100x100`) and an optional suffix the thumbnail code chooses (mode, format, quality). */
const THUMB_SPEC = /^[0-9]{1,4}x[0-9]{1,4}[a-z0-9-]{0,40}$/;
/** Latin letters that NFKD does not decompose, so that `Straße` becomes `strasse` rather than `stra_e`. */
const TRANSLITERATIONS: Record<string, string> = {
  ß: 'ss', ẞ: 'ss', æ: 'ae', Æ: 'ae', œ: 'oe', Œ: 'oe', ø: 'o', Ø: 'o', ł: 'l', Ł: 'l',
  đ: 'd', Đ: 'd', ð: 'd', Ð: 'd', þ: 'th', Þ: 'th', ı: 'i', ħ: 'h', Ħ: 'h',
};

/**
 * The name a new upload is stored under (docs/files.md): the client's name made safe plus a
 * random suffix, so that two uploads of `photo.jpg` never collide and no client string reaches a
 * path unsanitised.
 *
 * Steps: keep the base name (after the last `/` or `\`); split off the extension at the last dot
 * if that dot is not the first character (`.htaccess` is a name, not an extension) and the
 * lower-cased rest is 1–20 chars of [a-z0-9] (otherwise the whole base name is the stem); make the
 * stem lower snake case (NFKD, diacritics dropped, everything outside [a-z0-9] becomes one `_`,
 * trimmed, at most 100 chars; `file` when nothing is left); then append `_` + 10 random [a-z0-9]
 * and the extension. `Ünïcödé file (1).JPG` -> `unicode_file_1_k3j9x0q2ab.jpg`.
 *
 * The extension is kept as the client wrote it (lower-cased): it decides nothing, because the
 * upload checks the sniffed type and serving sends non-media as attachments with `nosniff`. A name
 * without one (the SDK names a bare Blob `blob`) gets the usual extension of `sniffedType`, as
 * PocketBase does, so that it is served with its type and can have thumbnails.
 */
export function createStoredFileName(originalName: string, sniffedType?: string): string {
  const base = String(originalName ?? '').split(/[/\\]/).pop() ?? '';
  const dot = base.lastIndexOf('.');
  let stem = base;
  let extension = '';
  if (dot > 0) {
    const candidate = base.slice(dot + 1).toLowerCase();
    if (EXTENSION.test(candidate)) {
      stem = base.slice(0, dot);
      extension = candidate;
    }
  }
  if (extension === '' && sniffedType !== undefined) extension = lookupExtension(sniffedType) ?? '';
  const safeStem = normalizeStem(stem) || 'file';
  return `${safeStem}_${generateSuffix()}${extension ? `.${extension}` : ''}`;
}

/**
 * True when `name` has exactly the shape `createStoredFileName` produces. A multipart update may
 * re-send an existing file by its stored name; this cheap check rejects anything else before the
 * name is compared with the record's current files (which the caller must still do: the shape
 * alone proves nothing about ownership).
 */
export function isStoredFileName(name: unknown): name is string {
  if (typeof name !== 'string' || name.length > MAX_STORED_NAME_LENGTH) return false;
  const match = STORED_NAME.exec(name);
  return match !== null && match[1]!.length <= MAX_STEM_LENGTH;
}

/** The parts that place a file in storage; validated by the key builders. */
export interface FileKeyParts {
  collectionId: string;
  recordId: string;
  /** A stored name (`isStoredFileName`). */
  name: string;
}

/** A file's parts plus the thumbnail spec (`100x100`, `100x100t`, `0x50`, optionally suffixed with mode/format/quality). */
export interface ThumbnailKeyParts extends FileKeyParts {
  spec: string;
}

/**
 * The storage key of an uploaded file: `{collectionId}/{recordId}/{name}`. Each part is checked
 * (collection id as the schema allows, a safe record id (lib/schema/record-id.ts), a stored name), so a key built here is
 * safe by construction and the storage's own key check is only a second line of defence.
 * Throws `InvalidStorageKeyError` for a bad part.
 */
export function buildFileKey(parts: FileKeyParts): string {
  return `${buildRecordPrefix(parts)}/${checkName(parts)}`;
}

/**
 * The storage key of one thumbnail: `{collectionId}/{recordId}/thumbs_{name}/{spec}_{name}`, the
 * PocketBase layout, which keeps a file's thumbnails under one folder that `buildThumbnailPrefix`
 * names for deletion. Throws `InvalidStorageKeyError` for a bad part.
 */
export function buildThumbnailKey(parts: ThumbnailKeyParts): string {
  const name = checkName(parts);
  if (typeof parts.spec !== 'string' || !THUMB_SPEC.test(parts.spec)) {
    throw new InvalidStorageKeyError(String(parts.spec), 'not a valid thumbnail spec');
  }
  return `${buildThumbnailPrefix(parts)}/${parts.spec}_${name}`;
}

/**
 * The folder of one file's thumbnails, `{collectionId}/{recordId}/thumbs_{name}`: what to pass to
 * `Storage.deletePrefix` when the file is replaced or removed.
 */
export function buildThumbnailPrefix(parts: FileKeyParts): string {
  return `${buildRecordPrefix(parts)}/thumbs_${checkName(parts)}`;
}

/**
 * A record's folder, `{collectionId}/{recordId}`: what to pass to `Storage.deletePrefix` when the
 * record is deleted (its files and thumbnails go together).
 */
export function buildRecordPrefix(parts: Pick<FileKeyParts, 'collectionId' | 'recordId'>): string {
  if (typeof parts.collectionId !== 'string' || !COLLECTION_ID.test(parts.collectionId)) {
    throw new InvalidStorageKeyError(String(parts.collectionId), 'not a valid collection id');
  }
  if (!isSafeRecordId(parts.recordId)) {
    throw new InvalidStorageKeyError(String(parts.recordId), 'not a valid record id');
  }
  return `${parts.collectionId}/${parts.recordId}`;
}

function checkName(parts: FileKeyParts): string {
  if (!isStoredFileName(parts.name)) throw new InvalidStorageKeyError(String(parts.name), 'not a stored file name');
  return parts.name;
}

function normalizeStem(stem: string): string {
  const folded = stem
    .replace(/[ßẞæÆœŒøØłŁđĐðÐþÞıħĦ]/g, (letter) => TRANSLITERATIONS[letter] ?? '_')
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '');
  return folded.slice(0, MAX_STEM_LENGTH).replace(/_+$/, '');
}

function generateSuffix(): string {
  let suffix = '';
  for (let i = 0; i < SUFFIX_LENGTH; i++) suffix += ALPHABET[randomInt(ALPHABET.length)];
  return suffix;
}
