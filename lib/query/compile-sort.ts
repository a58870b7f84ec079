import { BadRequestError } from '../errors.js';
import type { CollectionSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { AliasAllocator, resolveFieldPath } from './resolve-path.js';
import { quoteIdent } from './sql-fragment.js';
import type { CompiledSql } from './compile-filter.js';

/** Most sort fields accepted (DESIGN section 4). */
export const MAX_SORT_FIELDS = 8;

/** What compileSort needs; a FilterContext satisfies it. */
export interface SortContext {
  readonly registry: SchemaRegistry;
  readonly collection: CollectionSchema;
  /** SQL alias of the main table in the surrounding query. */
  readonly alias: string;
  /** Superusers may sort on hidden fields. */
  readonly canSeeHidden?: boolean;
}

const PATH = /^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$/;

function createSortError(what: string): BadRequestError {
  return new BadRequestError(`Invalid sort: ${what}.`, 'invalid_sort');
}

/**
 * Compiles a `sort` parameter to an ORDER BY list (without the keyword). `id` is always appended
 * as the last tie-breaker, in the direction of the last sort field, so paging is deterministic
 * and a (field, id) index can serve both directions; an empty sort is `created, id` ascending.
 * Only single relations may be traversed: a multi-valued path has no one value to order by.
 */
export function compileSort(sort: string | undefined, context: SortContext): CompiledSql {
  const main = quoteIdent(context.alias);
  const id = `${main}."id"`;
  const raw = typeof sort === 'string' ? sort : '';
  if (raw.length > 1000) throw createSortError('the sort parameter is too long');
  const items = raw
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
  if (items.length === 0) return { sql: `${main}."created" ASC, ${id} ASC`, bindings: [] };
  if (items.length > MAX_SORT_FIELDS) throw createSortError(`at most ${MAX_SORT_FIELDS} fields`);
  const aliases = new AliasAllocator(context.alias);
  const parts: string[] = [];
  let lastDirection = 'ASC';
  let lastIsId = false;
  for (const item of items) {
    const descending = item.startsWith('-');
    const name = item.startsWith('-') || item.startsWith('+') ? item.slice(1).trim() : item;
    const direction = descending ? 'DESC' : 'ASC';
    if (name === '@random') {
      parts.push('random()');
      lastDirection = 'ASC';
      lastIsId = false;
      continue;
    }
    if (!PATH.test(name)) throw createSortError(`unknown field ${JSON.stringify(name.slice(0, 40))}`);
    const path = resolveFieldPath({
      registry: context.registry,
      collection: context.collection,
      segments: name.split('.'),
      ref: (column) => `${main}.${quoteIdent(column)}`,
      aliases,
      canSeeHidden: context.canSeeHidden === true,
      allowMulti: false,
      fail: (what) => createSortError(what),
    });
    if (path.storage === 'array') throw createSortError(`"${name}" is multi-valued`);
    parts.push(`${path.value.sql} ${direction}`);
    lastDirection = direction;
    lastIsId = path.value.sql === id;
  }
  if (!lastIsId) parts.push(`${id} ${lastDirection}`);
  return { sql: parts.join(', '), bindings: [] };
}
