import { RECORD_ALIAS } from '../db/record-store.js';
import type { SqlFragment } from '../sql-fragment.js';
import { compileSort } from '../query/compile-sort.js';
import { LruCachePerOwner } from '../query/lru-cache.js';
import type { CollectionSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { parseFilterCached } from '../query/filter-parser.js';
import { reuseKey } from './access-rules.js';
import { isSuperuser, type Caller } from './caller.js';

/**
 * Compiled sorts over the collection's own fields, per collection, by mode, text and the request
 * values their fields' view rules read (sortReuseKey); at most 100 per collection (the cache only
 * saves work; a miss compiles).
 */
const compiledSorts = new LruCachePerOwner<string, SqlFragment>(100);

/**
 * The key under which a sort may be reused, or undefined when it may not: a relation path (a `.`:
 * it carries a target's view rule), `@rank` (it binds the request's search text), or a field
 * whose view rule may not be reused (reuseKey). Otherwise the request values those view rules
 * read (a non-superuser's sort reads the fields through them), `""` when none.
 */
function sortReuseKey(sort: string, collection: CollectionSchema, caller: Caller): string | undefined {
  if (sort.includes('.') || sort.includes('@rank')) return undefined;
  if (isSuperuser(caller)) return '';
  const keys: string[] = [];
  for (const item of sort.split(',')) {
    const rule = collection.field(item.trim().replace(/^[-+]/, '').trim())?.rules?.view;
    if (typeof rule !== 'string') continue;
    const key = reuseKey(parseFilterCached(rule), collection, 'rule', caller.request);
    if (key === undefined) return undefined;
    keys.push(key);
  }
  return keys.join('\n');
}

/**
 * The ORDER BY of a list: the client's `sort` (default `created`), `id` as the last tie-breaker,
 * compiled once per collection, mode and sortReuseKey where it may be reused.
 */
export function compileRecordOrder(options: { registry: SchemaRegistry; collection: CollectionSchema; sort: string | undefined; caller: Caller; rank?: SqlFragment }): SqlFragment {
  const mode = isSuperuser(options.caller) ? 'superuser' : 'user';
  const sort = options.sort ?? '';
  const reads = sortReuseKey(sort, options.collection, options.caller);
  const key = `${mode}\n${sort}\n${reads}`;
  const hit = reads === undefined ? undefined : compiledSorts.get(options.collection, key);
  if (hit) return hit;
  const compiled = compileSort(options.sort, { registry: options.registry, collection: options.collection, alias: RECORD_ALIAS, mode, request: options.caller.request, rank: options.rank });
  if (reads !== undefined) compiledSorts.set(options.collection, key, compiled);
  return compiled;
}
