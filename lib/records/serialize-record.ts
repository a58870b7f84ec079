import type { CollectionSchema } from '../schema/collection-schema.js';
import type { RecordValues } from '../db/record-store.js';

/**
 * The response shape of one record (interface 2.1): collectionId, collectionName, id, the
 * declared fields in declaration order, created, updated. Hidden fields only for superusers.
 */
export function serializeRecord(collection: CollectionSchema, values: RecordValues, options: { showHidden: boolean }): Record<string, unknown> {
  const out: Record<string, unknown> = { collectionId: collection.id, collectionName: collection.name, id: values.id };
  for (const field of collection.fields) {
    if (field.system || (field.hidden && !options.showHidden)) continue;
    out[field.name] = values[field.name];
  }
  out.created = values.created;
  out.updated = values.updated;
  return out;
}
