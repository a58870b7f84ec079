import type { CollectionSchema } from '../schema/collection-schema.js';
import type { RecordValues } from '../db/record-store.js';
import { compileObjectShape, type ShapeEntry } from '../schema/object-shape.js';
import { memoizePerObject } from '../memoize-per-object.js';

type Serializer = (values: RecordValues) => Record<string, unknown>;

/** Per collection: the serializer for everyone else, and the one for superusers (hidden fields shown). */
const serializersOf = memoizePerObject((collection: CollectionSchema) => ({ visible: compileSerializer(collection, false), all: compileSerializer(collection, true) }));

function compileSerializer(collection: CollectionSchema, showHidden: boolean): Serializer {
  const entries: ShapeEntry[] = [
    { key: 'collectionId', value: collection.id },
    { key: 'collectionName', value: collection.name },
    { key: 'id', from: 'id' },
  ];
  for (const field of collection.fields) {
    if (field.system || (field.hidden && !showHidden)) continue;
    entries.push({ key: field.name, from: field.name });
  }
  entries.push({ key: 'created', from: 'created' }, { key: 'updated', from: 'updated' });
  return compileObjectShape<RecordValues>(entries);
}

/**
 * The response shape of one record, as PocketBase's API gives it: collectionId, collectionName, id,
 * the declared fields in declaration order, created, updated. Hidden fields only for superusers.
 * Compiled once per collection into one object literal (lib/schema/object-shape.ts).
 */
export function serializeRecord(collection: CollectionSchema, values: RecordValues, options: { showHidden: boolean }): Record<string, unknown> {
  const serializers = serializersOf(collection);
  return (options.showHidden ? serializers.all : serializers.visible)(values);
}
