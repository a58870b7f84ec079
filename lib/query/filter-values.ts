/**
 * Compile-time values of a filter (literals, macros, `@request.*` values) read as the type of the
 * comparison they take part in. Numbers, booleans and text are read by the same readers as record
 * values (lib/schema/coerce-value.ts), so `"+3"`, `" TRUE "` or `12` mean the same in a rule as in
 * a write; dates follow the filter's own literal grammar (prefixes such as `2024-05` allowed).
 */
import { readBool, readNumber, readScalarString } from '../schema/coerce-value.js';
import type { StorageKind } from '../schema/storage-kinds.js';
import { formatRecordDate, isRecordYear } from '../schema/record-date.js';
import { parseDateLiteral } from './date-literal.js';

/** What coerceFilterValue returns for a value that cannot be read as the target type. */
export const INVALID = Symbol('invalid');

/**
 * Converts a JS value to what a binding of storage `target` holds (numbers, booleans, ISO
 * instants for dates, JSON text for json and arrays), or INVALID. null and undefined stay null.
 */
export function coerceFilterValue(value: unknown, target: StorageKind): unknown {
  if (value === null || value === undefined) return null;
  switch (target) {
    case 'text':
      if (value instanceof Date) return formatDateOrInvalid(value);
      return readScalarString(value) ?? JSON.stringify(value);
    case 'number':
      return readNumber(value) ?? INVALID;
    case 'bool':
      return readBool(value) ?? INVALID;
    case 'date': {
      // A host's Date outside the years a record can hold would reach Postgres as is (a 500).
      if (value instanceof Date) return Number.isNaN(value.getTime()) || !isRecordYear(value.getUTCFullYear()) ? INVALID : value.toISOString();
      if (typeof value !== 'string') return INVALID;
      const date = parseDateLiteral(value);
      return date ? date.toISOString() : INVALID;
    }
    case 'json':
    case 'array':
    case 'geoPoint':
      return JSON.stringify(value instanceof Date ? formatDateOrInvalid(value) : value);
  }
}

/** A host-supplied Date outside what the record format can hold must not become a 500. */
function formatDateOrInvalid(value: Date): unknown {
  try {
    return formatRecordDate(value);
  } catch {
    return INVALID;
  }
}

/** The storage kind a compile-time value naturally has, or undefined for null. */
export function naturalStorageOf(value: unknown): StorageKind | undefined {
  if (value === null || value === undefined) return undefined;
  if (typeof value === 'number') return 'number';
  if (typeof value === 'boolean') return 'bool';
  if (typeof value === 'string') return 'text';
  if (value instanceof Date) return 'date';
  return 'json';
}
