import { RECORD_ALIAS } from '../db/record-store.js';
import type { SqlFragment } from '../query/sql-fragment.js';
import { compileSort } from '../query/compile-sort.js';
import type { CollectionSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { isSuperuser, type Caller } from './caller.js';

/** The ORDER BY of a list: the client's `sort` (default `created`), `id` as the last tie-breaker. */
export function compileRecordOrder(options: { registry: SchemaRegistry; collection: CollectionSchema; sort: string | undefined; caller: Caller }): SqlFragment {
  return compileSort(options.sort, {
    registry: options.registry,
    collection: options.collection,
    alias: RECORD_ALIAS,
    mode: isSuperuser(options.caller) ? 'superuser' : 'user',
    request: options.caller.request,
  });
}
