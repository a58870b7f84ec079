/**
 * How a column changes from one storage kind to another (`m.changeFieldType` in a migration,
 * docs/collections.md "Changing your schema"): the conversions recordbase makes without being
 * told, each with the test a stored value must pass to convert without loss. A conversion that
 * could lose data (a multi-valued field to a single one, text that is not a number) is made only
 * when every stored value passes; any other pair needs the migration's own `using` expression.
 */
import { findFieldType } from './field-types.js';
import { STORAGE_KINDS, type StorageKind } from './storage-kinds.js';

/** A conversion of a column (given quoted, as `"priority"`) to another kind. */
export interface StorageConversion {
  /** The new value of the column, in SQL (ALTER COLUMN ... USING). */
  using(column: string): string;
  /** SQL true when a stored value converts without loss; absent when every value does. */
  fits?(column: string): string;
}

/** The column of a kind in DDL, taken apart: its type, whether it refuses NULL, its default. */
export interface ColumnDefinition {
  readonly type: string;
  readonly notNull: boolean;
  readonly defaultSql?: string;
}

/** `text NOT NULL DEFAULT ''` as its parts: the one column definition per kind stays in STORAGE_KINDS. */
export function columnDefinitionOf(kind: StorageKind): ColumnDefinition {
  const match = /^(.+?)( NOT NULL)?(?: DEFAULT (.+))?$/.exec(STORAGE_KINDS[kind].columnDdl)!;
  return { type: match[1]!, notNull: match[2] !== undefined, ...(match[3] !== undefined ? { defaultSql: match[3] } : {}) };
}

/** The kind a field of `type` is stored as (multi-valued: `array`); undefined for a type no longer registered. */
export function storageKindOfType(type: string, multiple: boolean): StorageKind | undefined {
  const spec = findFieldType(type);
  if (spec === undefined) return undefined;
  return multiple ? 'array' : spec.storage;
}

/** The kind a column of information_schema's `data_type` holds, where the type alone says (jsonb does not). */
export function storageKindOfDataType(dataType: string): StorageKind | undefined {
  const kinds = (Object.keys(STORAGE_KINDS) as StorageKind[]).filter((kind) => STORAGE_KINDS[kind].dataType === dataType);
  return kinds.length === 1 ? kinds[0] : undefined;
}

/** A number as text: a sign, digits with an optional fraction, an optional exponent, spaces around. */
const NUMBER_TEXT = String.raw`'^\s*[-+]{0,1}([0-9]+\.{0,1}[0-9]*|\.[0-9]+)([eE][-+]{0,1}[0-9]+){0,1}\s*$'`;
/** A date as text: the record format, ISO 8601 with `T`, or a day alone; a zone optional. */
const DATE_TEXT = String.raw`'^\s*[0-9]{4}-[0-9]{2}-[0-9]{2}([ T][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+){0,1}){0,1}){0,1}\s*(Z|[-+][0-9]{2}(:{0,1}[0-9]{2}){0,1}){0,1}\s*$'`;
/** A JSON value that reads as one text value (a string, number or bool), or JSON null. */
const SCALAR_JSON = `IN ('string', 'number', 'boolean', 'null')`;

/** Text forms of the other kinds, shared by the conversions to text and to json. */
const AS_TEXT: Partial<Record<StorageKind, (c: string) => string>> = {
  number: (c) => `COALESCE(${c}::text, '')`,
  bool: (c) => `COALESCE(${c}::text, 'false')`,
  date: (c) => `COALESCE(to_char(${c} AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS') || 'Z', '')`,
  json: (c) => `COALESCE(${c} #>> '{}', '')`,
  array: (c) => `COALESCE(${c} ->> 0, '')`,
};

/** The conversions by `from` then `to`. A pair not listed needs `using`. */
const CONVERSIONS: Partial<Record<StorageKind, Partial<Record<StorageKind, StorageConversion>>>> = {
  text: {
    number: { using: (c) => `NULLIF(trim(${c}), '')::double precision`, fits: (c) => `${c} = '' OR ${c} ~ ${NUMBER_TEXT}` },
    bool: { using: (c) => `lower(trim(${c})) IN ('true', '1')`, fits: (c) => `lower(trim(${c})) IN ('', 'true', 'false', '1', '0')` },
    date: { using: (c) => `NULLIF(trim(${c}), '')::timestamptz`, fits: (c) => `trim(${c}) = '' OR ${c} ~ ${DATE_TEXT}` },
    json: { using: (c) => `CASE WHEN ${c} = '' THEN NULL ELSE to_jsonb(${c}) END` },
    array: { using: (c) => `CASE WHEN ${c} = '' THEN '[]'::jsonb ELSE jsonb_build_array(${c}) END` },
  },
  number: {
    text: { using: AS_TEXT.number! },
    bool: { using: (c) => `COALESCE(${c} <> 0, false)`, fits: (c) => `${c} IS NULL OR ${c} IN (0, 1)` },
    json: { using: (c) => `to_jsonb(${c})` },
  },
  bool: {
    text: { using: AS_TEXT.bool! },
    number: { using: (c) => `CASE WHEN ${c} THEN 1 ELSE 0 END` },
    json: { using: (c) => `to_jsonb(${c})` },
  },
  date: {
    text: { using: AS_TEXT.date! },
    json: { using: (c) => `CASE WHEN ${c} IS NULL THEN NULL ELSE to_jsonb(${AS_TEXT.date!(c)}) END` },
  },
  json: {
    text: { using: AS_TEXT.json!, fits: (c) => `${c} IS NULL OR jsonb_typeof(${c}) ${SCALAR_JSON}` },
    number: { using: (c) => `(${c} #>> '{}')::double precision`, fits: (c) => `${c} IS NULL OR jsonb_typeof(${c}) IN ('number', 'null')` },
    bool: { using: (c) => `COALESCE((${c} #>> '{}')::boolean, false)`, fits: (c) => `${c} IS NULL OR jsonb_typeof(${c}) IN ('boolean', 'null')` },
    array: {
      using: (c) => `CASE WHEN ${c} IS NULL OR jsonb_typeof(${c}) = 'null' THEN '[]'::jsonb ELSE ${c} END`,
      fits: (c) => `${c} IS NULL OR jsonb_typeof(${c}) = 'null' OR (jsonb_typeof(${c}) = 'array' AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(${c}) AS e WHERE jsonb_typeof(e) <> 'string'))`,
    },
  },
  array: {
    text: { using: AS_TEXT.array!, fits: (c) => `jsonb_array_length(${c}) <= 1` },
    json: { using: (c) => c },
  },
};

/**
 * The conversion recordbase makes by itself from one kind to another, or undefined when the pair
 * needs the migration's `using`. The same kind converts as it is.
 */
export function findStorageConversion(from: StorageKind, to: StorageKind): StorageConversion | undefined {
  if (from === to) return { using: (c) => c };
  return CONVERSIONS[from]?.[to];
}

/** Every pair with a conversion, `from -> to`, with `(if every value fits)` where one may refuse: for docs and errors. */
export function listStorageConversions(): string[] {
  return Object.entries(CONVERSIONS).flatMap(([from, targets]) =>
    Object.entries(targets ?? {}).map(([to, conversion]) => `${from} -> ${to}${conversion.fits ? ' (if every value fits)' : ''}`),
  );
}
