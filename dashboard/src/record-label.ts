/** How a record is named in the dashboard: by its collection's `presentable` field, else its id. */
import type { CollectionInfo, FieldInfo, RecordData } from './api.js';

/** The field that labels a collection's records: the first `presentable` one, else `id`. */
export function labelField(collection: CollectionInfo): FieldInfo {
  return collection.fields.find((f) => f.presentable) ?? collection.fields.find((f) => f.name === 'id')!;
}

/** A value as one line of text (lists joined, objects as JSON). */
export function formatValue(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (Array.isArray(value)) return value.map(formatValue).join(', ');
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

/** A record's label: its presentable field's value, else its id. */
export function recordLabel(record: RecordData, collection: CollectionInfo | undefined): string {
  const field = collection ? labelField(collection) : undefined;
  const label = field ? formatValue(record[field.name]) : '';
  return label === '' ? record.id : label;
}

/** Whether a file name is one the thumbnailer renders (others are shown by name). */
export function isImageName(name: string): boolean {
  return /\.(png|jpe?g|gif|webp)$/i.test(name);
}
