/**
 * What an editor control holds for each field type (its draft) and the value the API takes
 * back. Drafts keep what the user typed (a number or JSON as text) so that a half-typed value is
 * never lost; turning a draft into a value may fail with a message for that field.
 */
import type { FieldInfo, RecordData } from './api.js';

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

function asList(value: unknown): string[] {
  if (Array.isArray(value)) return value.map(String);
  return typeof value === 'string' && value !== '' ? [value] : [];
}

/** Whether a select, relation or file field holds a list. */
export function holdsList(field: FieldInfo): boolean {
  return field.multiple || (typeof field.maxSelect === 'number' && field.maxSelect > 1);
}

/** The draft of a field, from a record's value (or the type's empty value for a new record). */
export function toDraft(field: FieldInfo, value: unknown): Draft {
  switch (field.type) {
    case 'bool':
      return value === true;
    case 'relation':
      return asList(value);
    case 'select':
      return holdsList(field) ? asList(value) : String(value ?? '');
    case 'file':
      return { kept: asList(value), added: [] };
    case 'geoPoint': {
      const point = (value ?? { lon: 0, lat: 0 }) as { lon: number; lat: number };
      return { lon: String(point.lon), lat: String(point.lat) };
    }
    case 'json':
      return value === null || value === undefined ? '' : JSON.stringify(value, null, 2);
    case 'number':
      return value === null || value === undefined ? '' : String(value);
    default:
      return value === null || value === undefined ? '' : String(value);
  }
}

/** A draft that cannot become a value: the message shown at its field. */
export class DraftError extends Error {}

function readNumber(text: string, what: string): number | null {
  if (text.trim() === '') return null;
  const number = Number(text);
  if (!Number.isFinite(number)) throw new DraftError(`${what} must be a number.`);
  return number;
}

/** The value the API takes for a draft (files: the names kept; uploads travel as parts). */
export function fromDraft(field: FieldInfo, draft: Draft): unknown {
  switch (field.type) {
    case 'number':
      return readNumber(draft as string, 'The value');
    case 'relation': {
      const ids = draft as string[];
      return holdsList(field) ? ids : (ids[0] ?? '');
    }
    case 'file': {
      const { kept } = draft as FileDraft;
      return holdsList(field) ? kept : (kept[0] ?? '');
    }
    case 'geoPoint': {
      const point = draft as PointDraft;
      return { lon: readNumber(point.lon, 'Longitude') ?? 0, lat: readNumber(point.lat, 'Latitude') ?? 0 };
    }
    case 'json': {
      const text = draft as string;
      if (text.trim() === '') return null;
      try {
        return JSON.parse(text) as unknown;
      } catch {
        throw new DraftError('Not valid JSON.');
      }
    }
    default:
      return draft;
  }
}

/** The fields an editor shows: the declared ones (system fields are the server's). */
export function editableFields(fields: FieldInfo[]): FieldInfo[] {
  return fields.filter((f) => !f.system);
}

/** The drafts of a record's fields (a new record: every field empty). */
export function draftsOf(fields: FieldInfo[], record: RecordData | undefined): Record<string, Draft> {
  return Object.fromEntries(fields.map((f) => [f.name, toDraft(f, record?.[f.name])]));
}

