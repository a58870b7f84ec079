/**
 * The record id (docs/collections.md): 15 characters of `[a-z0-9]`. The one place that knows its
 * format: the generator, the check of a client's id, and the patterns the validator and the
 * OpenAPI document quote are all built from it here.
 */
import { randomInt } from 'node:crypto';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
const LENGTH = 15;
/** The alphabet as a regular expression class; kept beside ALPHABET so the two cannot drift. */
const ID_BODY = `[a-z0-9]{${LENGTH}}`;

/** A record id as a JSON Schema (and ajv) pattern. */
export const RECORD_ID_PATTERN = `^${ID_BODY}$`;
/** A record id or `""` (a single relation's "none"), as a JSON Schema pattern. */
export const OPTIONAL_RECORD_ID_PATTERN = `^(${ID_BODY})?$`;

const ID = new RegExp(RECORD_ID_PATTERN);

/** A new record id from a CSPRNG (about 77 bits), so ids can be neither guessed nor enumerated. */
export function generateRecordId(): string {
  let id = '';
  for (let i = 0; i < LENGTH; i++) id += ALPHABET[randomInt(ALPHABET.length)];
  return id;
}

/** True for a well-formed record id (what a client may send on create, what a path may name). */
export function isRecordId(value: unknown): value is string {
  return typeof value === 'string' && ID.test(value);
}

/** Longest id a view's record may be asked for by: its ids are the query's own (`ROW_NUMBER()` gives `"1"`), not record ids. */
const MAX_VIEW_ID_LENGTH = 255;

/**
 * Whether an id may name a record of `collection`, so anything else is a 404 without asking the
 * database: a table's ids are record ids; a view's are whatever its query selects as `id`.
 */
export function isReadableId(collection: { readonly type: 'base' | 'view' }, id: string): boolean {
  if (collection.type === 'view') return id !== '' && id.length <= MAX_VIEW_ID_LENGTH;
  return isRecordId(id);
}
