/**
 * The pieces of the one coercion of client values (docs/collections.md, "Values"): each field
 * type's `coerce` (lib/schema/fields/) is built from these readers, and what it makes of a client's
 * value is the record value for validation and for `@request.body` in rules alike; the filter
 * compiler reads numbers, booleans and text of `@request.*` values with the same readers
 * (lib/query/filter-values.ts). Lenient on purpose: multipart bodies carry only strings, and the
 * PocketBase SDK sends numbers and booleans as their string form, so `"12"` must be a number and
 * `"true"` a boolean. What cannot be read as the field's type becomes a FieldError, never a
 * throw, so the validator can report every failing field at once.
 */
import type { FieldError, FieldErrorCode } from '../errors.js';

/** Where the input came from: multipart parts are strings, so JSON fields must be parsed from them. */
export type InputSource = 'json' | 'multipart';

/** The outcome of reading one value: the record value, or the field's validation error. */
export type CoerceResult = { ok: true; value: unknown } | { ok: false; error: FieldError };

/**
 * A decimal number with optional sign, fraction and exponent. Written without overlapping
 * repetitions so that a long hostile string is rejected in linear time. `Number()` alone would
 * also take `0x10`, `Infinity` and whitespace-only strings.
 */
const NUMERIC_STRING = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;

/** How much of a client's value an error message may quote. */
const MAX_QUOTED = 40;

/** Builds the `{code, message}` pair a ValidationError carries for one field. */
export function createFieldError(code: FieldErrorCode, message: string): FieldError {
  return { code, message };
}

/** Quotes a client value for a message, cut short so a huge value never bloats an error body. */
export function quoteValue(value: string): string {
  const short = value.length > MAX_QUOTED ? value.slice(0, MAX_QUOTED) + '...' : value;
  return JSON.stringify(short);
}

/** A value read successfully. */
export function succeed(value: unknown): CoerceResult {
  return { ok: true, value };
}

/** A value that cannot be read as the field's type, with the field's error. */
export function fail(code: FieldErrorCode, message: string): CoerceResult {
  return { ok: false, error: createFieldError(code, message) };
}

/**
 * Unwraps a list of 0 or 1 elements given to a single-valued field (repeated multipart parts and
 * SDK arrays arrive as lists even when they hold one value), then reads the value with `read`.
 * A longer list is `tooMany`, the field type's own wording.
 */
export function readSingle(raw: unknown, tooMany: FieldError, read: (value: unknown) => CoerceResult): CoerceResult {
  if (!Array.isArray(raw)) return read(raw);
  if (raw.length === 0) return read(undefined);
  if (raw.length === 1) return read(raw[0]);
  return { ok: false, error: { ...tooMany } };
}

/** Reads a scalar as a string; null for anything that is not a string, finite number or boolean. */
export function readScalarString(raw: unknown): string | null {
  if (typeof raw === 'string') return raw;
  if (typeof raw === 'number') return Number.isFinite(raw) ? String(raw) : null;
  if (typeof raw === 'boolean') return String(raw);
  return null;
}

/** Reads a text value (text, email, url, single select, relation and file): any scalar, null as "". */
export function coerceText(raw: unknown): CoerceResult {
  if (raw === null || raw === undefined) return succeed('');
  const s = readScalarString(raw);
  return s === null ? fail('validation_invalid_value', 'Must be a text value.') : succeed(s);
}

/**
 * Reads a number: a finite number, or a decimal string (sign, fraction and exponent allowed,
 * surrounding whitespace ignored). Anything else, `""` included, is undefined.
 */
export function readNumber(raw: unknown): number | undefined {
  if (typeof raw === 'number') return Number.isFinite(raw) ? (raw === 0 ? 0 : raw) : undefined;
  if (typeof raw !== 'string') return undefined;
  const s = raw.trim();
  if (!NUMERIC_STRING.test(s)) return undefined;
  const n = Number(s);
  return Number.isFinite(n) ? (n === 0 ? 0 : n) : undefined;
}

/**
 * Reads a boolean: `true`/`false`, `1`/`0`, and the strings `true`, `1`, `false`, `0` in any case
 * with surrounding whitespace; `""` is false (an unticked form field). Anything else is undefined.
 */
export function readBool(raw: unknown): boolean | undefined {
  if (typeof raw === 'boolean') return raw;
  if (raw === 1 || raw === 0) return raw === 1;
  if (typeof raw !== 'string') return undefined;
  const s = raw.trim().toLowerCase();
  if (s === 'true' || s === '1') return true;
  if (s === 'false' || s === '0' || s === '') return false;
  return undefined;
}

/**
 * Reads a value for a list-shaped field into a de-duplicated string list. Used for multi-valued
 * fields and for the operands of the `+`/`-` modifiers. `''` and null mean "nothing", as an empty
 * multipart part does; empty strings inside a list are dropped for the same reason.
 */
export function coerceStringList(raw: unknown): CoerceResult {
  if (raw === null || raw === undefined || raw === '') return succeed([]);
  const items = Array.isArray(raw) ? raw : [raw];
  const out: string[] = [];
  const seen = new Set<string>();
  for (const item of items) {
    if (item === null || item === undefined || item === '') continue;
    const s = readScalarString(item);
    if (s === null) return fail('validation_invalid_value', 'Must be a list of text values.');
    if (!seen.has(s)) {
      seen.add(s);
      out.push(s);
    }
  }
  return succeed(out);
}
