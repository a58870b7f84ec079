/**
 * The table cells, one per shape of value; the table in field-kinds.ts names which a field type
 * uses. Every value is attacker-written data, so it is rendered as text (Preact makes text
 * nodes); files become thumbnails from the API, relations the labels of the records they point
 * at when the list expanded them.
 */
import type { Api, CollectionInfo, FieldInfo, RecordData } from './api.js';
import { asList } from './field-drafts.js';
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

/** A cell's record, field and context. */
export interface CellProps {
  record: RecordData;
  field: FieldInfo;
  context: CellContext;
}

const MAX_TEXT = 120;

function shorten(text: string): string {
  return text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT)}…` : text;
}

/** A value as one line of text, cut to fit a column. */
export function TextCell(props: CellProps) {
  return shorten(formatValue(props.record[props.field.name]));
}

/** A flag as yes or no. */
export function FlagCell(props: CellProps) {
  return props.record[props.field.name] === true ? 'yes' : 'no';
}

/** A point as "lon, lat". */
export function PointCell(props: CellProps) {
  const point = props.record[props.field.name] as { lon?: number; lat?: number } | null;
  return point ? `${point.lon ?? 0}, ${point.lat ?? 0}` : '';
}

/** A file field's images as thumbnails, its other files by name. */
export function FileCell(props: CellProps) {
  const { record, field, context } = props;
  const token = field.protected === true ? context.fileToken : '';
  return html`<span class="files">${asList(record[field.name]).map((name) =>
    isImageName(name)
      ? html`<img key=${name} class="thumb" src=${context.api.fileUrl(record, name, { thumb: '100x100', fileToken: token })} alt=${name} width="32" height="32" loading="lazy" />`
      : html`<span key=${name} class="file-name">${name}</span>`,
  )}</span>`;
}

/** A relation's records by their labels where the list expanded them, else by id. */
export function RelationCell(props: CellProps) {
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
