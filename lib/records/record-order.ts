import { RECORD_ALIAS } from '../db/record-store.js';
import type { SqlFragment } from '../sql-fragment.js';
import { compileSort } from '../query/compile-sort.js';
import { LruCachePerOwner } from '../query/lru-cache.js';
import type { CollectionSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { isStaticViewRule } from './access-rules.js';
import { isSuperuser, type Caller } from './caller.js';

/**
 * Compiled sorts over the collection's own fields, per collection (they read nothing of the
 * request); at most 100 per collection (the cache only saves work; a miss compiles).
 */
const plainSorts = new LruCachePerOwner<string, SqlFragment>(100);

/**
 * Whether a sort compiles the same for every request of a mode: no relation path (no `.`: nothing
 * that would carry a target's view rule for this request) and no field with a view rule of its
 * own that reads the request or the clock (a non-superuser's sort reads it through that rule).
 */
function isPlainSort(sort: string, collection: CollectionSchema): boolean {
  // `@rank` binds the request's search text.
  if (sort.includes('.') || sort.includes('@rank')) return false;
  return sort.split(',').every((item) => isStaticViewRule(collection, collection.field(item.trim().replace(/^[-+]/, '').trim())?.rules?.view));
}

/**
 * The ORDER BY of a list: the client's `sort` (default `created`), `id` as the last tie-breaker.
 * A plain sort (isPlainSort) is compiled once per collection and mode.
 */
export function compileRecordOrder(options: { registry: SchemaRegistry; collection: CollectionSchema; sort: string | undefined; caller: Caller; rank?: SqlFragment }): SqlFragment {
  const mode = isSuperuser(options.caller) ? 'superuser' : 'user';
  const sort = options.sort ?? '';
  const plain = isPlainSort(sort, options.collection);
  const key = `${mode}\n${sort}`;
  const hit = plain ? plainSorts.get(options.collection, key) : undefined;
  if (hit) return hit;
  const compiled = compileSort(options.sort, { registry: options.registry, collection: options.collection, alias: RECORD_ALIAS, mode, request: options.caller.request, rank: options.rank });
  if (plain) plainSorts.set(options.collection, key, compiled);
  return compiled;
}
