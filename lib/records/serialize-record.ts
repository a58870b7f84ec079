import type { CollectionSchema } from '../schema/collection-schema.js';
import type { RecordValues } from '../db/record-store.js';
import { compileObjectShape, type ShapeEntry } from '../schema/object-shape.js';
import { memoizePerObject } from '../memoize-per-object.js';
import { guardedViewFields } from './field-visibility.js';

type Serializer = (values: RecordValues) => Record<string, unknown>;

/**
 * Per collection: the serializer for everyone else, and the one for superusers (hidden fields
 * shown); with field view rules, the fields they guard, and one serializer more per set of them
 * a record lacks (made on first use).
 */
const serializersOf = memoizePerObject((collection: CollectionSchema) => ({
  visible: compileSerializer(collection, false),
  all: compileSerializer(collection, true),
  guarded: guardedViewFields(collection),
  /** By the guarded fields absent (bit i: guarded[i]), for everyone else and for superusers. */
  without: [new Map<number, Serializer>(), new Map<number, Serializer>()] as const,
}));

function compileSerializer(collection: CollectionSchema, showHidden: boolean, without: ReadonlySet<string> = new Set()): Serializer {
  const entries: ShapeEntry[] = [
    { key: 'collectionId', value: collection.id },
    { key: 'collectionName', value: collection.name },
    { key: 'id', from: 'id' },
  ];
  for (const field of collection.fields) {
    if (field.system || (field.hidden && !showHidden) || without.has(field.name)) continue;
    entries.push({ key: field.name, from: field.name });
  }
  entries.push({ key: 'created', from: 'created' }, { key: 'updated', from: 'updated' });
  return compileObjectShape<RecordValues>(entries);
}

/**
 * The response shape of one record, as PocketBase's API gives it: collectionId, collectionName, id,
 * the declared fields in declaration order, created, updated. Hidden fields only for superusers;
 * a field whose key the values lack (a field view rule refused it: lib/records/field-visibility.ts)
 * is absent, not undefined. Compiled once per collection (and set of absent fields) into one
 * object literal (lib/schema/object-shape.ts).
 */
export function serializeRecord(collection: CollectionSchema, values: RecordValues, options: { showHidden: boolean }): Record<string, unknown> {
  const serializers = serializersOf(collection);
  const { guarded } = serializers;
  if (guarded.length > 0) {
    let absent = 0;
    for (let i = 0; i < guarded.length; i++) if (!Object.hasOwn(values, guarded[i]!.name)) absent += 2 ** i;
    if (absent !== 0) {
      const without = serializers.without[options.showHidden ? 1 : 0];
      let serializer = without.get(absent);
      if (serializer === undefined) {
        const names = new Set(guarded.filter((field) => !Object.hasOwn(values, field.name)).map((field) => field.name));
        without.set(absent, (serializer = compileSerializer(collection, options.showHidden, names)));
      }
      return serializer(values);
    }
  }
  return (options.showHidden ? serializers.all : serializers.visible)(values);
}
