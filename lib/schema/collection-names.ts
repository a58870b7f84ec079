import { SchemaError } from '../errors.js';

/**
 * The naming rules of collections and fields, in one place for every path that names one: the
 * declared collections of every type (collection-schema.ts), a view's inferred columns
 * (view-schema.ts) and the migration helpers (lib/migrations/). A name that passes here is a
 * Postgres identifier used as it is, unambiguous, and never one of recordbase's own tables.
 */

/** Postgres cuts identifiers beyond 63 bytes: refusing longer names keeps two of them from becoming one. */
export const MAX_IDENTIFIER = 63;

/**
 * Prefixes of the names recordbase keeps for itself in the database (its tables, indexes,
 * functions and triggers: lib/db/shared-names.ts, whose test checks that each uses one). No
 * collection, of any type, may take such a name.
 */
export const RESERVED_NAME_PREFIXES = ['_rb', '_recordbase'] as const;

const COLLECTION_NAME = /^[a-z_][a-z0-9_]*$/;
const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const COLLECTION_ID = /^[A-Za-z0-9_]{1,63}$/;

/** Whether `name` starts with a prefix recordbase keeps for its own objects. */
export function isReservedName(name: string): boolean {
  return RESERVED_NAME_PREFIXES.some((prefix) => name.startsWith(prefix));
}

/**
 * Refuses a collection name that is not `[a-z_][a-z0-9_]*` of at most 63 characters, or that
 * starts with a reserved prefix; `where` starts the message (`collection "x"`, a helper's call).
 */
export function checkCollectionName(where: string, name: unknown): asserts name is string {
  if (!isCollectionName(name)) {
    throw new SchemaError(`${where}: a collection name must match [a-z_][a-z0-9_]* (at most ${MAX_IDENTIFIER} characters)`);
  }
  if (isReservedName(name)) {
    throw new SchemaError(`${where}: names starting with ${RESERVED_NAME_PREFIXES.map((p) => `"${p}"`).join(' or ')} are reserved`);
  }
}

/** Whether `name` matches a collection name's pattern and length (reserved prefixes aside). */
export function isCollectionName(name: unknown): name is string {
  return typeof name === 'string' && COLLECTION_NAME.test(name) && name.length <= MAX_IDENTIFIER;
}

/** Refuses a field (or view column) name that is not `[A-Za-z_][A-Za-z0-9_]*` of at most 63 characters. */
export function checkFieldName(where: string, name: unknown): asserts name is string {
  if (!isFieldName(name)) throw new SchemaError(`${where}: a field name must match [A-Za-z_][A-Za-z0-9_]* (at most ${MAX_IDENTIFIER} characters)`);
}

/** Whether `name` is a valid field (or view column) name. */
export function isFieldName(name: unknown): name is string {
  return typeof name === 'string' && FIELD_NAME.test(name) && name.length <= MAX_IDENTIFIER;
}

/** Refuses a collection id that is not `[A-Za-z0-9_]{1,63}`. */
export function checkCollectionId(where: string, id: unknown): asserts id is string {
  if (typeof id !== 'string' || !COLLECTION_ID.test(id)) throw new SchemaError(`${where}: id must match [A-Za-z0-9_]{1,63}`);
}
