/**
 * A table cell's content by field type. Every value is attacker-written data, so it is rendered
 * as text (Preact makes text nodes); files become thumbnails from the API, relations the labels
 * of the records they point at when the list expanded them.
 */
import type { Api, CollectionInfo, FieldInfo, RecordData } from './api.js';
import { html } from './html.js';
import { formatValue, isImageName, recordLabel } from './record-label.js';

/** What a cell needs besides its record and field. */
export interface CellContext {
  api: Api;
  /** Every collection, for the labels of related records. */
  collections: CollectionInfo[];
  /** A file token when the collection has protected files. */
  fileToken: string;
}

const MAX_TEXT = 120;

function shorten(text: string): string {
  return text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT)}…` : text;
}

function asList(value: unknown): string[] {
  if (Array.isArray(value)) return value.map(String);
  return typeof value === 'string' && value !== '' ? [value] : [];
}

function FileCell(props: { record: RecordData; field: FieldInfo; context: CellContext }) {
  const { record, field, context } = props;
  const token = field.protected === true ? context.fileToken : '';
  return html`<span class="files">${asList(record[field.name]).map((name) =>
    isImageName(name)
      ? html`<img key=${name} class="thumb" src=${context.api.fileUrl(record, name, { thumb: '100x100', fileToken: token })} alt=${name} width="32" height="32" loading="lazy" />`
      : html`<span key=${name} class="file-name">${name}</span>`,
  )}</span>`;
}

function RelationCell(props: { record: RecordData; field: FieldInfo; context: CellContext }) {
  const { record, field, context } = props;
  const expanded = record.expand?.[field.name];
  const related = Array.isArray(expanded) ? expanded : expanded ? [expanded] : [];
  const target = context.collections.find((c) => c.name === field.collection);
  return html`<span>${asList(record[field.name])
    .map((id) => {
      const found = related.find((r) => r.id === id);
      return found ? recordLabel(found, target) : id;
    })
    .join(', ')}</span>`;
}

/** The content of one cell. */
export function Cell(props: { record: RecordData; field: FieldInfo; context: CellContext }) {
  const { record, field } = props;
  const value = record[field.name];
  switch (field.type) {
    case 'file':
      return html`<${FileCell} ...${props} />`;
    case 'relation':
      return html`<${RelationCell} ...${props} />`;
    case 'bool':
      return value === true ? 'yes' : 'no';
    case 'geoPoint': {
      const point = value as { lon?: number; lat?: number } | null;
      return point ? `${point.lon ?? 0}, ${point.lat ?? 0}` : '';
    }
    default:
      return shorten(formatValue(value));
  }
}
