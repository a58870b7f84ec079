/**
 * What `@request.*` identifiers read (docs/query-language.md): the method, the context, the
 * caller's identity, the query string, the headers, and in write rules the normalised body of the
 * write. The compiler turns the result into a comparison operand; this module only knows where
 * each value comes from.
 */
import type { CollectionSchema, StorageKind } from '../schema/collection-schema.js';
import { createFilterError } from './filter-error.js';
import type { IdentifierOperand } from './filter-ast.js';
import type { RequestInfo } from './request-info.js';

/** One `@request.*` value as a filter sees it. */
export interface RequestValue {
  /** Whether the request holds the key at all (`:isset`). */
  readonly present: boolean;
  /** Plain data: string, number, boolean, Date, null, arrays and objects of those. */
  readonly value: unknown;
  /** The field type of a `@request.body.<field>` value. */
  readonly storage?: StorageKind;
  /**
   * True for `@request.auth.*` of a guest: such a value never matches a record field or path
   * (docs/query-language.md, "Guests in rules"), so `owner = @request.auth.id` cannot match a
   * record whose owner is empty.
   */
  readonly guestAuth: boolean;
}

/**
 * Reads the `@request.*` value an identifier names. Throws a filter error for an identifier that
 * names nothing (`@request.foo`, `@request.auth` without a key) and for `@request.body.<name>`
 * where `<name>` is not a field of the collection: a rule guarding a misspelt body key would
 * otherwise never see it set.
 */
export function readRequestValue(request: RequestInfo, operand: IdentifierOperand, collection: CollectionSchema): RequestValue {
  const [, area, key] = operand.segments;
  const count = operand.segments.length;
  if (area === 'method' && count === 2) return { present: true, value: request.method, guestAuth: false };
  if (area === 'context' && count === 2) return { present: true, value: request.context ?? 'default', guestAuth: false };
  if (area === 'headers' && count === 3) {
    // Names are stored normalised (lower case); a rule spelling one otherwise could never match.
    if (key !== key.toLowerCase()) throw createFilterError(`header names are lower-cased in rules: write "@request.headers.${key.toLowerCase()}", not "${operand.name}"`, operand.pos);
    const headers = request.headers;
    const present = headers !== undefined && Object.hasOwn(headers, key);
    // Absent reads as "" (PocketBase): `@request.headers.x_token = ""` is true without the header.
    return { present, value: present ? headers[key] : '', guestAuth: false };
  }
  if (area === 'auth' && count === 3) {
    if (request.auth === null) return { present: false, value: '', guestAuth: true };
    const present = Object.hasOwn(request.auth, key);
    return { present, value: sanitizeRequestValue(present ? request.auth[key] : null), guestAuth: false };
  }
  if (area === 'query' && count === 3) {
    const present = Object.hasOwn(request.query, key);
    return { present, value: present ? request.query[key] : null, guestAuth: false };
  }
  if (area === 'body' && count === 3) {
    const field = collection.field(key);
    if (!field) throw createFilterError(`unknown field "${key}" in "${operand.name}"`, operand.pos);
    const present = Object.hasOwn(request.body, key);
    return { present, value: present ? sanitizeRequestValue(request.body[key]) : null, storage: field.storage, guestAuth: false };
  }
  throw createFilterError(`unknown identifier "${operand.name}"`, operand.pos);
}

/** Request values come from the host (identity) and the client: keep only plain data. */
function sanitizeRequestValue(value: unknown): unknown {
  if (value === undefined || value === null) return null;
  if (typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : value;
  if (Array.isArray(value)) return value.map((item) => (typeof item === 'object' && item !== null && !(item instanceof Date) ? null : sanitizeRequestValue(item)));
  if (typeof value === 'object') {
    try {
      return JSON.parse(JSON.stringify(value)) as unknown;
    } catch {
      return null;
    }
  }
  return null;
}
