/**
 * How a field's value is kept in its column: one row per storage kind, owning everything that
 * follows from it (the column, the empty value and its SQL test, how a row is read and a value
 * bound). The query compiler, the record store and the migration planner read this table, never
 * the field type, to decide SQL shapes; a field type only says which kind it stores
 * (lib/schema/fields/). SQL NULL, where a kind allows it, is that kind's empty value.
 */
import { types } from 'node:util';
import { rawSql, sql, type BindCast, type SqlFragment } from '../sql-fragment.js';
import { formatRecordDate, hasRecordDateShape } from './record-date.js';

/**
 * The storage kinds:
 * - `text`: text NOT NULL DEFAULT '' (text, email, url, single select/relation/file)
 * - `array`: jsonb array of strings NOT NULL DEFAULT '[]' (multi-valued select/relation/file)
 * - `bool`: boolean NOT NULL DEFAULT false
 * - `number`: double precision, NULL when empty
 * - `date`: timestamptz(3), NULL when empty
 * - `json`: jsonb, NULL when empty
 * - `geoPoint`: jsonb `{"lon": x, "lat": y}` NOT NULL DEFAULT `{"lon": 0, "lat": 0}` (PocketBase's
 *   column), the origin ("Null Island") being the empty value
 */
export type StorageKind = 'text' | 'array' | 'bool' | 'number' | 'date' | 'json' | 'geoPoint';

/** A geographic point as records hold it: longitude then latitude, in degrees (PocketBase's key order). */
export interface GeoPoint {
  lon: number;
  lat: number;
}

/** Everything that follows from one storage kind. */
export interface StorageKindSpec {
  /** information_schema's `data_type` of the column: how the schema sync recognises a column it made. */
  readonly dataType: string;
  /** The column's type, constraint and default in DDL (every added column has a default or allows NULL, for older code's inserts). */
  readonly columnDdl: string;
  /** The Postgres type a value of this kind is bound as (a row built from values, a filter operand). */
  readonly bindCast: BindCast;
  /** Whether a column (or a path filled by `fillEmptySql`) of this kind is never NULL, so `=` needs no NULL care. */
  readonly neverNull: boolean;
  /** The value when nothing was set; a fresh one per call, so nobody can change a shared default. */
  emptyValue(): unknown;
  /** Whether a record value counts as blank for `required` (a required bool must be true, PocketBase's rule). */
  isBlank(value: unknown): boolean;
  /** SQL true when `expr` holds the empty value (`f = null` in a filter): NULL, '', [] and JSON null; false and 0 are values. */
  isEmptySql(expr: SqlFragment): SqlFragment;
  /** `expr`, which is NULL for a missing related row, read as the empty value a stored row holds. */
  fillEmptySql(expr: SqlFragment): SqlFragment;
  /** The text form of `expr`; dates in the record format clients see. */
  toTextSql(expr: SqlFragment): SqlFragment;
  /** A column value as the driver gave it, as a record value. */
  readColumn(raw: unknown): unknown;
  /** A record value as a write binds it into the column (jsonb takes JSON text). */
  toColumn(value: unknown): unknown;
}

/** Reads a date as the driver gave it: record-format text already (run-statement.ts reads a UTC timestamptz so), else a Date or other text. */
function readDate(raw: unknown): unknown {
  if (raw === null || raw === undefined) return null;
  if (typeof raw === 'string' && hasRecordDateShape(raw)) return raw;
  // isDate, not instanceof: the embedded engine's rows come from its worker thread, which under a
  // test runner's vm context is another realm; String(date) would drop the milliseconds.
  return formatRecordDate(types.isDate(raw) ? raw : new Date(String(raw)));
}

function isNullish(value: unknown): boolean {
  return value === null || value === undefined;
}

function passThrough<T>(value: T): T {
  return value;
}

function toJsonText(value: unknown): unknown {
  return isNullish(value) ? value : JSON.stringify(value);
}

/** The empty geoPoint in SQL: what the column defaults to. */
const ORIGIN_SQL = `'{"lon": 0, "lat": 0}'::jsonb`;

/**
 * Reads a stored point (jsonb keeps its own key order, `lat` first) in PocketBase's order; anything
 * that is not a point with two numbers (a row written by hand) reads as the origin.
 */
function readGeoPoint(raw: unknown): GeoPoint {
  const point = typeof raw === 'string' ? safeParse(raw) : raw;
  if (point === null || typeof point !== 'object') return { lon: 0, lat: 0 };
  const { lon, lat } = point as Record<string, unknown>;
  return { lon: typeof lon === 'number' ? lon : 0, lat: typeof lat === 'number' ? lat : 0 };
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}

function castToText(expr: SqlFragment): SqlFragment {
  return sql`CAST(${expr} AS text)`;
}

function isNullSql(expr: SqlFragment): SqlFragment {
  return sql`${expr} IS NULL`;
}

/** The storage kinds, by name. Adding one means a row here; every SQL shape reads it from this table. */
export const STORAGE_KINDS: Readonly<Record<StorageKind, StorageKindSpec>> = {
  text: {
    dataType: 'text',
    columnDdl: "text NOT NULL DEFAULT ''",
    bindCast: 'text',
    neverNull: true,
    emptyValue: () => '',
    isBlank: (value) => value === '' || isNullish(value),
    isEmptySql: (expr) => sql`${expr} = ''`,
    fillEmptySql: (expr) => sql`COALESCE(${expr}, '')`,
    toTextSql: passThrough,
    readColumn: (raw) => raw ?? '',
    toColumn: passThrough,
  },
  array: {
    dataType: 'jsonb',
    columnDdl: "jsonb NOT NULL DEFAULT '[]'::jsonb",
    bindCast: 'jsonb',
    neverNull: true,
    emptyValue: () => [],
    isBlank: (value) => !Array.isArray(value) || value.length === 0,
    isEmptySql: (expr) => sql`${expr} = '[]'::jsonb`,
    fillEmptySql: (expr) => sql`COALESCE(${expr}, '[]'::jsonb)`,
    toTextSql: castToText,
    readColumn: (raw) => raw ?? [],
    toColumn: toJsonText,
  },
  bool: {
    dataType: 'boolean',
    columnDdl: 'boolean NOT NULL DEFAULT false',
    bindCast: 'boolean',
    neverNull: true,
    emptyValue: () => false,
    isBlank: (value) => value !== true,
    isEmptySql: isNullSql,
    fillEmptySql: (expr) => sql`COALESCE(${expr}, FALSE)`,
    toTextSql: castToText,
    readColumn: (raw) => raw ?? false,
    toColumn: passThrough,
  },
  number: {
    dataType: 'double precision',
    columnDdl: 'double precision',
    bindCast: 'double precision',
    neverNull: false,
    emptyValue: () => null,
    isBlank: isNullish,
    isEmptySql: isNullSql,
    fillEmptySql: passThrough,
    toTextSql: castToText,
    readColumn: (raw) => (isNullish(raw) ? null : typeof raw === 'number' ? raw : Number(raw)),
    toColumn: passThrough,
  },
  date: {
    dataType: 'timestamp with time zone',
    columnDdl: 'timestamptz(3)',
    bindCast: 'timestamptz',
    neverNull: false,
    emptyValue: () => null,
    isBlank: isNullish,
    isEmptySql: isNullSql,
    fillEmptySql: passThrough,
    toTextSql: (expr) => sql`(to_char(${expr} AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS') || 'Z')`,
    readColumn: readDate,
    toColumn: passThrough,
  },
  json: {
    dataType: 'jsonb',
    columnDdl: 'jsonb',
    bindCast: 'jsonb',
    neverNull: false,
    emptyValue: () => null,
    // A JSON field holding "", [] or {} is as blank as null.
    isBlank: (value) => {
      if (value === null || value === undefined || value === '') return true;
      if (Array.isArray(value)) return value.length === 0;
      return typeof value === 'object' && Object.keys(value).length === 0;
    },
    isEmptySql: (expr) => sql`COALESCE(${expr}, 'null'::jsonb) IN ('null'::jsonb, '""'::jsonb, '[]'::jsonb)`,
    fillEmptySql: passThrough,
    toTextSql: (expr) => sql`(${expr} #>> '{}')`,
    readColumn: (raw) => raw ?? null,
    toColumn: toJsonText,
  },
  geoPoint: {
    dataType: 'jsonb',
    columnDdl: `jsonb NOT NULL DEFAULT ${ORIGIN_SQL}`,
    bindCast: 'jsonb',
    neverNull: true,
    emptyValue: () => ({ lon: 0, lat: 0 }),
    // PocketBase's rule: a required point must not be the origin.
    isBlank: (value) => {
      const point = value as Partial<GeoPoint> | null | undefined;
      return (point?.lon ?? 0) === 0 && (point?.lat ?? 0) === 0;
    },
    isEmptySql: (expr) => sql`${expr} = ${rawSql(ORIGIN_SQL)}`,
    fillEmptySql: (expr) => sql`COALESCE(${expr}, ${rawSql(ORIGIN_SQL)})`,
    toTextSql: castToText,
    readColumn: readGeoPoint,
    toColumn: toJsonText,
  },
};

/** The value a field holds when nothing was set (docs/collections.md); a fresh array each time. */
export function emptyValueOf(field: { readonly storage: StorageKind }): unknown {
  return STORAGE_KINDS[field.storage].emptyValue();
}

/** True when a value counts as blank for `required` (see StorageKindSpec.isBlank). */
export function isEmptyValue(field: { readonly storage: StorageKind }, value: unknown): boolean {
  return STORAGE_KINDS[field.storage].isBlank(value);
}
