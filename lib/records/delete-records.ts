import { BadRequestError } from '../errors.js';
import type { RecordStore, RecordValues } from '../db/record-store.js';
import { memoizePerObject } from '../memoize-per-object.js';
import type { CollectionSchema, SchemaRegistry } from '../schema/collection-schema.js';

/** A record removed by a delete, with its collection: what file cleanup needs after commit. */
export interface DeletedRecord {
  readonly collection: CollectionSchema;
  readonly record: RecordValues;
}

/** Called for every record a delete is about to remove, cascades included (the before-delete hooks). */
export type BeforeEachDelete = (collection: CollectionSchema, record: RecordValues) => Promise<void>;

/** Whether the caller may view a record: decides whether an error may name it. */
export type ViewCheck = (collection: CollectionSchema, id: string) => Promise<boolean>;

interface DeleteRun {
  readonly store: RecordStore;
  readonly registry: SchemaRegistry;
  readonly canView: ViewCheck;
  readonly beforeEach?: BeforeEachDelete;
  /** `collection:id` of every record this delete removes, so cycles and shared targets terminate. */
  readonly doomed: Set<string>;
  readonly deleted: DeletedRecord[];
}

const keyOf = (collection: CollectionSchema, id: unknown) => `${collection.name}:${String(id)}`;

/** Unlinks or cascades every record that references one of `records` (docs/records-api.md). */
async function detachReferences(run: DeleteRun, collection: CollectionSchema, records: readonly RecordValues[]): Promise<void> {
  const ids = records.map((r) => String(r.id));
  const removedIds = new Set(ids);
  for (const back of run.registry.backRelations(collection)) {
    const referencing = (await run.store.selectByRelation({ collection: back.collection, field: back.field, ids, lock: true })).filter(
      (r) => !run.doomed.has(keyOf(back.collection, r.id)),
    );
    if (referencing.length === 0) continue;
    const cascade = back.field.definition?.type === 'relation' && back.field.definition.cascadeDelete === true;
    if (cascade) {
      await removeRecords(run, back.collection, referencing);
      continue;
    }
    for (const ref of referencing) {
      const current = ref[back.field.name];
      const next = back.field.multiple ? (current as string[]).filter((id) => !removedIds.has(id)) : '';
      if (back.field.required && (next === '' || (Array.isArray(next) && next.length === 0))) {
        // Name the record only to a caller who may view it: the message must not reveal a record id
        // (or that one exists) that the caller's rules hide.
        const named = (await run.canView(back.collection, String(ref.id)))
          ? `record "${String(ref.id)}" of "${back.collection.name}" requires it in its field "${back.field.name}"`
          : 'other records require it';
        throw new BadRequestError(`The record cannot be deleted: ${named}.`, 'relation_required');
      }
      await run.store.update(back.collection, String(ref.id), { [back.field.name]: next });
    }
  }
}

async function removeRecords(run: DeleteRun, collection: CollectionSchema, records: readonly RecordValues[]): Promise<void> {
  for (const r of records) run.doomed.add(keyOf(collection, r.id));
  if (run.beforeEach) for (const record of records) await run.beforeEach(collection, record);
  await detachReferences(run, collection, records);
  await run.store.deleteByIds(collection, records.map((r) => String(r.id)));
  for (const record of records) run.deleted.push({ collection, record });
}

/**
 * Deletes `records` and handles what points at them: references are removed, records whose
 * relation has `cascadeDelete` are deleted too (recursively), and a `required` relation that
 * would become empty aborts the whole delete with a 400. Call it inside a transaction: a throw
 * must roll back everything it did. Returns every record removed, cascades included.
 */
export async function deleteRecords(options: {
  store: RecordStore;
  registry: SchemaRegistry;
  collection: CollectionSchema;
  records: readonly RecordValues[];
  canView: ViewCheck;
  beforeEach?: BeforeEachDelete;
}): Promise<DeletedRecord[]> {
  const run: DeleteRun = { store: options.store, registry: options.registry, canView: options.canView, beforeEach: options.beforeEach, doomed: new Set(), deleted: [] };
  await removeRecords(run, options.collection, options.records);
  return run.deleted;
}

/**
 * The registry as a delete sees it: a view's relation fields point at records too (for expand and
 * back-relations), but nothing is stored in a view, so a delete neither unlinks nor cascades into
 * one, and a view's required relation never blocks a delete.
 */
export const withoutViewReferences = memoizePerObject(
  (registry: SchemaRegistry): SchemaRegistry => ({ ...registry, backRelations: (target) => registry.backRelations(target).filter((back) => back.collection.type !== 'view') }),
);
