/**
 * The one coercion of client values (docs/collections.md, "Values"): what a client sent for a
 * field becomes a record value here, for validation and for `@request.body` in rules alike, and
 * the filter compiler reads numbers, booleans and text of `@request.*` values with the same
 * readers. Lenient on purpose: multipart bodies carry only strings, and the PocketBase SDK sends
 * numbers and booleans as their string form, so `"12"` must be a number and `"true"` a boolean.
 * What cannot be read as the field's type becomes a FieldError, never a throw, so the validator
 * can report every failing field at once.
 */
import type { FieldError, FieldErrorCode } from '../errors.js';
import type { FieldSchema } from './collection-schema.js';
import { formatRecordDate, parseDateInput } from './record-date.js';

/** Where the input came from: multipart parts are strings, so JSON fields must be parsed from them. */
export type InputSource = 'json' | 'multipart';

/** The outcome of reading one value: the record value, or the field's validation error. */
export type CoerceResult = { ok: true; value: unknown } | { ok: false; error: FieldError };

/** Default limit for the serialised size of a JSON field (docs/collections.md: 1 MiB). */
export const DEFAULT_JSON_MAX_SIZE = 1024 * 1024;

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

function succeed(value: unknown): CoerceResult {
  return { ok: true, value };
}

function fail(code: FieldErrorCode, message: string): CoerceResult {
  return { ok: false, error: createFieldError(code, message) };
}

/**
 * The value a field holds when nothing was set (docs/collections.md). Callers get a fresh array
 * each time so that nobody can mutate a shared default.
 */
export function emptyValueOf(field: FieldSchema): unknown {
  switch (field.storage) {
    case 'text':
      return '';
    case 'array':
      return [];
    case 'bool':
      return false;
    default:
      return null;
  }
}

/**
 * True when a value counts as blank for `required`. A required bool must be true (PocketBase's
 * rule); a JSON field holding `""`, `[]` or `{}` is as blank as null.
 */
export function isEmptyValue(field: FieldSchema, value: unknown): boolean {
  switch (field.storage) {
    case 'text':
      return value === '' || value === null || value === undefined;
    case 'array':
      return !Array.isArray(value) || value.length === 0;
    case 'bool':
      return value !== true;
    case 'json':
      if (value === null || value === undefined || value === '') return true;
      if (Array.isArray(value)) return value.length === 0;
      return typeof value === 'object' && Object.keys(value).length === 0;
    default:
      return value === null || value === undefined;
  }
}

/** The error for several values given to a single-valued field, worded after the field type. */
function failTooMany(field: FieldSchema): CoerceResult {
  if (field.type === 'file') return fail('validation_too_many_files', 'Too many files; at most 1 allowed.');
  if (field.type === 'select' || field.type === 'relation') return fail('validation_too_many_values', 'Select no more than 1.');
  if (field.storage === 'number') return fail('validation_invalid_number', 'Must be a valid number.');
  if (field.storage === 'date') return fail('validation_invalid_date', 'Must be a valid date.');
  return fail('validation_invalid_value', 'Must be a single value, not a list.');
}

/**
 * Unwraps a list of 0 or 1 elements given to a single-valued field: repeated multipart parts and
 * SDK arrays arrive as lists even when they hold one value.
 */
function unwrapSingle(field: FieldSchema, raw: unknown): CoerceResult {
  if (!Array.isArray(raw)) return succeed(raw);
  if (raw.length === 0) return succeed(undefined);
  if (raw.length === 1) return succeed(raw[0]);
  return failTooMany(field);
}

/** Reads a scalar as a string; null for anything that is not a string, finite number or boolean. */
export function readScalarString(raw: unknown): string | null {
  if (typeof raw === 'string') return raw;
  if (typeof raw === 'number') return Number.isFinite(raw) ? String(raw) : null;
  if (typeof raw === 'boolean') return String(raw);
  return null;
}

function coerceText(raw: unknown): CoerceResult {
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

function coerceNumber(raw: unknown): CoerceResult {
  if (raw === null || raw === undefined || (typeof raw === 'string' && raw.trim() === '')) return succeed(null);
  const n = readNumber(raw);
  return n === undefined ? fail('validation_invalid_number', 'Must be a valid number.') : succeed(n);
}

function coerceBool(raw: unknown): CoerceResult {
  if (raw === null || raw === undefined) return succeed(false);
  const b = readBool(raw);
  return b === undefined ? fail('validation_invalid_value', 'Must be a boolean.') : succeed(b);
}

function coerceDate(raw: unknown): CoerceResult {
  if (raw === null || raw === undefined || raw === '') return succeed(null);
  if (typeof raw === 'string') {
    const s = raw.trim();
    if (s === '') return succeed(null);
    const parsed = parseDateInput(s);
    if (parsed !== null) return succeed(parsed);
  }
  if (raw instanceof Date) {
    try {
      return succeed(formatRecordDate(raw));
    } catch {
      // An invalid or out-of-range Date is an invalid date like any other.
    }
  }
  return fail('validation_invalid_date', 'Must be a valid date.');
}

/** Measures the serialised size of a JSON value; null when it cannot be serialised (cycles, BigInt). */
function measureJson(value: unknown): number | null {
  try {
    const text = JSON.stringify(value);
    return text === undefined ? 0 : Buffer.byteLength(text, 'utf8');
  } catch {
    return null;
  }
}

function coerceJson(field: FieldSchema, raw: unknown, source: InputSource): CoerceResult {
  let value: unknown = raw === undefined ? null : raw;
  if (source === 'multipart' && typeof value === 'string') {
    if (value.trim() === '') return succeed(null);
    try {
      value = JSON.parse(value) as unknown;
    } catch {
      return fail('validation_invalid_json', 'Must be valid JSON.');
    }
  }
  const size = measureJson(value);
  if (size === null) return fail('validation_invalid_json', 'Must be valid JSON.');
  const def = field.definition;
  const maxSize = def?.type === 'json' && def.maxSize !== undefined ? def.maxSize : DEFAULT_JSON_MAX_SIZE;
  if (size > maxSize) {
    return fail('validation_json_size_limit', `The maximum allowed JSON size is ${maxSize} bytes.`);
  }
  return succeed(value);
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

/**
 * Reads the operand of a number modifier (`views+: 1`). Unlike a plain value, an empty operand is
 * not a way to clear the field, so it is refused.
 */
export function coerceNumberOperand(raw: unknown): CoerceResult {
  const single = Array.isArray(raw) && raw.length === 1 ? raw[0] : raw;
  const result = coerceNumber(single);
  if (result.ok && result.value === null) return fail('validation_invalid_number', 'Must be a valid number.');
  return result;
}

/**
 * Reads one client value for a field into its record value (docs/collections.md), or explains why
 * it cannot. `source` only matters for JSON fields: from multipart a string is JSON text to parse,
 * from a JSON body it is already the value.
 */
export function coerceFieldValue(field: FieldSchema, raw: unknown, source: InputSource): CoerceResult {
  if (field.storage === 'array') return coerceStringList(raw);
  if (field.storage === 'json') return coerceJson(field, raw, source);
  const single = unwrapSingle(field, raw);
  if (!single.ok) return single;
  switch (field.storage) {
    case 'number':
      return coerceNumber(single.value);
    case 'bool':
      return coerceBool(single.value);
    case 'date':
      return coerceDate(single.value);
    default:
      return coerceText(single.value);
  }
}
