import { RECORD_ALIAS } from '../db/record-store.js';
import type { SqlFragment } from '../sql-fragment.js';
import { compileSort } from '../query/compile-sort.js';
import { LruCachePerOwner } from '../query/lru-cache.js';
import type { CollectionSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { isSuperuser, type Caller } from './caller.js';

/**
 * Compiled sorts over the collection's own fields, per collection (they read nothing of the
 * request); at most 100 per collection (the cache only saves work; a miss compiles).
 */
const plainSorts = new LruCachePerOwner<string, SqlFragment>(100);

/**
 * The ORDER BY of a list: the client's `sort` (default `created`), `id` as the last tie-breaker.
 * A sort without a relation path (no `.`: nothing that would carry a target's view rule for this
 * request) is compiled once per collection and mode.
 */
export function compileRecordOrder(options: { registry: SchemaRegistry; collection: CollectionSchema; sort: string | undefined; caller: Caller }): SqlFragment {
  const mode = isSuperuser(options.caller) ? 'superuser' : 'user';
  const sort = options.sort ?? '';
  const plain = !sort.includes('.');
  const key = `${mode}\n${sort}`;
  const hit = plain ? plainSorts.get(options.collection, key) : undefined;
  if (hit) return hit;
  const compiled = compileSort(options.sort, { registry: options.registry, collection: options.collection, alias: RECORD_ALIAS, mode, request: options.caller.request });
  if (plain) plainSorts.set(options.collection, key, compiled);
  return compiled;
}
