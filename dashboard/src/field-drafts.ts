/**
 * What an editor control holds (its draft) and the value the API takes back, one reader and one
 * writer per shape of field; the table in field-kinds.ts names which a field type uses. Drafts
 * keep what the user typed (a number or JSON as text) so that a half-typed value is never lost;
 * turning a draft into a value may fail with a message for that field.
 */
import type { FieldInfo } from './api.js';

/** The files of a file field: names the record keeps, and new uploads. */
export interface FileDraft {
  kept: string[];
  added: File[];
}

/** A geoPoint as typed. */
export interface PointDraft {
  lon: string;
  lat: string;
}

/** A draft value: text, a flag, a list of names or ids, files, or a point. */
export type Draft = string | boolean | string[] | FileDraft | PointDraft;

/** A draft that cannot become a value: the message shown at its field. */
export class DraftError extends Error {}

/** A value that may be one name or a list of them, as a list (`""` is none). */
export function asList(value: unknown): string[] {
  if (Array.isArray(value)) return value.map(String);
  return typeof value === 'string' && value !== '' ? [value] : [];
}

/** Whether a select, relation or file field holds a list. */
export function holdsList(field: FieldInfo): boolean {
  return field.multiple || (typeof field.maxSelect === 'number' && field.maxSelect > 1);
}

/** A value as the text a control edits (absent: empty). */
export function draftText(_field: FieldInfo, value: unknown): string {
  return value === null || value === undefined ? '' : String(value);
}

/** A JSON value as indented text, so that an object reads and edits over several lines. */
export function draftJson(_field: FieldInfo, value: unknown): string {
  return value === null || value === undefined ? '' : JSON.stringify(value, null, 2);
}

/** A select's choice: the chosen values of a multiple one, else the one value. */
export function draftChoice(field: FieldInfo, value: unknown): string | string[] {
  return holdsList(field) ? asList(value) : String(value ?? '');
}

/** A file field's names, all kept until the user removes one, and no upload yet. */
export function draftFiles(_field: FieldInfo, value: unknown): FileDraft {
  return { kept: asList(value), added: [] };
}

/** A point's coordinates as text (a new record's empty point is 0, 0, as the server's). */
export function draftPoint(_field: FieldInfo, value: unknown): PointDraft {
  const point = (value ?? { lon: 0, lat: 0 }) as { lon: number; lat: number };
  return { lon: String(point.lon), lat: String(point.lat) };
}

/** The draft itself: what text, a flag or a choice holds is what the API takes. */
export function keepDraft(_field: FieldInfo, draft: Draft): unknown {
  return draft;
}

function readNumber(text: string, what: string): number | null {
  if (text.trim() === '') return null;
  const number = Number(text);
  if (!Number.isFinite(number)) throw new DraftError(`${what} must be a number.`);
  return number;
}

/** A typed number (empty: `null`). */
export function parseNumber(_field: FieldInfo, draft: Draft): number | null {
  return readNumber(draft as string, 'The value');
}

/** Typed JSON (empty: `null`). */
export function parseJson(_field: FieldInfo, draft: Draft): unknown {
  const text = draft as string;
  if (text.trim() === '') return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new DraftError('Not valid JSON.');
  }
}

/** A typed point (an empty coordinate is 0). */
export function parsePoint(_field: FieldInfo, draft: Draft): { lon: number; lat: number } {
  const point = draft as PointDraft;
  return { lon: readNumber(point.lon, 'Longitude') ?? 0, lat: readNumber(point.lat, 'Latitude') ?? 0 };
}

/** Names or ids as the field holds them: the list, or a single field's one name (`""` for none). */
export function shapeList(field: FieldInfo, names: string[]): string | string[] {
  return holdsList(field) ? names : (names[0] ?? '');
}

/** The fields an editor shows: the declared ones (system fields are the server's). */
export function editableFields(fields: FieldInfo[]): FieldInfo[] {
  return fields.filter((f) => !f.system);
}
