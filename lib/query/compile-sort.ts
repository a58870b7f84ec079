import { BadRequestError } from '../errors.js';
import type { CollectionSchema, FieldSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { AliasAllocator, resolveFieldPath } from './resolve-path.js';
import { joinSql, quoteIdent, rawSql, sql, type SqlFragment } from '../sql-fragment.js';
import { callerVisibility, type CompiledSql, type FilterMode } from './compile-filter.js';
import type { RequestInfo } from './request-info.js';

/** Most sort fields accepted (docs/query-language.md). */
export const MAX_SORT_FIELDS = 8;

/** What compileSort needs; a FilterContext satisfies it. */
export interface SortContext {
  readonly registry: SchemaRegistry;
  readonly collection: CollectionSchema;
  /** SQL alias of the main table in the surrounding query. */
  readonly alias: string;
  /** As for filters: only `user` sorts are kept off hidden fields and restricted by target view rules. */
  readonly mode: FilterMode;
  /**
   * The request, for the view rules of the collections a relation path goes through: with it,
   * in `user` mode, each hop sees only the target records that pass the target's view rule (a
   * hidden or missing target sorts as empty). Without it no target rule applies, and a field with
   * a view rule of its own sorts as empty for everyone.
   */
  readonly request?: RequestInfo;
  /** The instant macros in target view rules are computed from; default: now. */
  readonly now?: Date;
  /** The list's search relevance (lib/query/search.ts), which `@rank` orders by; without it `@rank` is a 400. */
  readonly rank?: SqlFragment;
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
 * A relation path's values may carry bindings (the target view rules), returned in text order.
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
  // Without the request no target rule applies, but a field with a view rule of its own still sorts as empty.
  const visibility =
    context.mode !== 'user'
      ? undefined
      : context.request !== undefined
        ? callerVisibility({ registry: context.registry, request: context.request, aliases, now: context.now ?? new Date() })
        : { rows: () => undefined, field: (_collection: CollectionSchema, field: FieldSchema) => (field.rules?.view !== undefined ? rawSql('FALSE') : undefined) };
  const parts: SqlFragment[] = [];
  let lastDirection = 'ASC';
  let lastIsId = false;
  for (const item of items) {
    const descending = item.startsWith('-');
    const name = item.startsWith('-') || item.startsWith('+') ? item.slice(1).trim() : item;
    const direction = descending ? 'DESC' : 'ASC';
    if (name === '@rank') {
      if (!context.rank) throw createSortError('@rank needs a search parameter');
      // `-@rank`, most relevant first, is what a search box wants; `@rank` is least relevant first.
      parts.push(sql`${context.rank} ${direction}`);
      lastDirection = direction;
      lastIsId = false;
      continue;
    }
    if (name === '@random') {
      parts.push(rawSql('random()'));
      lastDirection = 'ASC';
      lastIsId = false;
      continue;
    }
    if (!PATH.test(name)) throw createSortError(`unknown field ${JSON.stringify(name.slice(0, 40))}`);
    const path = resolveFieldPath({
      registry: context.registry,
      collection: context.collection,
      segments: name.split('.'),
      alias: context.alias,
      aliases,
      canSeeHidden: context.mode !== 'user',
      allowMulti: false,
      fail: (what) => createSortError(what),
      visibility,
    });
    if (path.storage === 'array') throw createSortError(`"${name}" is multi-valued`);
    parts.push(sql`${path.value} ${direction}`);
    lastDirection = direction;
    lastIsId = path.value.sql === id;
  }
  if (!lastIsId) parts.push(rawSql(`${id} ${lastDirection}`));
  const order = joinSql(parts, ', ');
  return { sql: order.sql, bindings: [...order.bindings] };
}
