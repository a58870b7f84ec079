import { ForbiddenError } from '../errors.js';
import type { RecordStore, RecordValues } from '../db/record-store.js';
import type { SqlFragment } from '../query/sql-fragment.js';
import type { ExpandTree } from '../query/parse-expand.js';
import { resolveRelation } from '../query/resolve-relation.js';
import type { CollectionSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { compileRule } from './access-rules.js';
import { isSuperuser, type Caller } from './caller.js';
import { listRelationIds as idsOf } from './relation-ids.js';
import { serializeRecord } from './serialize-record.js';

/** A stored record and the response object being built for it. */
export interface ExpandItem {
  readonly values: RecordValues;
  readonly out: Record<string, unknown>;
}

interface ExpandRun {
  readonly registry: SchemaRegistry;
  readonly store: RecordStore;
  readonly caller: Caller;
}

/** The target's view rule for this caller, or undefined when it refuses everything (`null`). */
function viewConditions(run: ExpandRun, collection: CollectionSchema): SqlFragment[] | undefined {
  try {
    return compileRule({ registry: run.registry, collection, action: 'view', caller: run.caller });
  } catch (err) {
    if (err instanceof ForbiddenError) return undefined;
    throw err;
  }
}

function attach(item: ExpandItem, name: string, value: unknown): void {
  const expand = (item.out.expand ??= {}) as Record<string, unknown>;
  Object.defineProperty(expand, name, { value, enumerable: true, writable: true, configurable: true });
}

async function expandLevel(run: ExpandRun, collection: CollectionSchema, items: readonly ExpandItem[], tree: ExpandTree): Promise<void> {
  const showHidden = isSuperuser(run.caller);
  for (const [name, subtree] of tree) {
    const relation = resolveRelation({ registry: run.registry, collection, name, canSeeHidden: showHidden });
    if (!relation) continue;
    const target = relation.kind === 'field' ? relation.target : relation.collection;
    const where = viewConditions(run, target);
    if (!where) continue;
    const related =
      relation.kind === 'field'
        ? await run.store.selectByIds({ collection: target, ids: [...new Set(items.flatMap((i) => idsOf(i.values[relation.field.name])))], where })
        : await run.store.selectByRelation({ collection: target, field: relation.field, ids: items.map((i) => String(i.values.id)), where });
    if (related.length === 0) continue;
    const relatedItems = related.map((values) => ({ values, out: serializeRecord(target, values, { showHidden }) }));
    if (subtree.size > 0) await expandLevel(run, target, relatedItems, subtree);

    if (relation.kind === 'field') {
      const byId = new Map(relatedItems.map((r) => [String(r.values.id), r.out]));
      for (const item of items) {
        const found = idsOf(item.values[relation.field.name]).flatMap((id) => byId.get(id) ?? []);
        if (found.length === 0) continue;
        attach(item, name, relation.field.multiple ? found : found[0]);
      }
    } else {
      for (const item of items) {
        const id = String(item.values.id);
        const found = relatedItems.filter((r) => idsOf(r.values[relation.field.name]).includes(id)).map((r) => r.out);
        if (found.length > 0) attach(item, name, found);
      }
    }
  }
}

/**
 * Fills `expand` on each response object (docs/query-language.md): one query per relation per
 * level, whatever the number of records; each related record must pass its own collection's
 * view rule or is left out; unknown names are ignored. A single relation expands to an object,
 * a multiple one and a back-relation to an array; nothing found leaves the key out.
 */
export async function expandRecords(options: {
  registry: SchemaRegistry;
  store: RecordStore;
  caller: Caller;
  collection: CollectionSchema;
  items: readonly ExpandItem[];
  tree: ExpandTree;
}): Promise<void> {
  if (options.tree.size === 0 || options.items.length === 0) return;
  await expandLevel(options, options.collection, options.items, options.tree);
}
