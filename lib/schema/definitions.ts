/**
 * What a user writes to declare collections (docs/collections.md). These are the public input
 * types; lib/schema/collection-schema.ts turns them into the checked, normalised model the rest
 * of the library reads.
 */

/** Every field type a collection may declare. */
export type FieldType = 'text' | 'number' | 'bool' | 'email' | 'url' | 'date' | 'select' | 'json' | 'relation' | 'file';

interface FieldBase {
  /** `[A-Za-z_][A-Za-z0-9_]*`, unique within the collection, not a system field name. */
  name: string;
  /** Empty values are refused with `validation_required`. */
  required?: boolean;
  /** Never in responses, nor usable in filter/sort, for anyone but a superuser; rules may use it. */
  hidden?: boolean;
}

export interface TextFieldDefinition extends FieldBase {
  type: 'text';
  /** Minimum length in characters (checked when the value is not empty). */
  min?: number;
  /** Maximum length in characters. */
  max?: number;
  /** A regular expression the value must match (when not empty). */
  pattern?: string;
}

export interface NumberFieldDefinition extends FieldBase {
  type: 'number';
  min?: number;
  max?: number;
  /** Refuse non-integers with `validation_not_integer`. */
  onlyInt?: boolean;
}

export interface BoolFieldDefinition extends FieldBase {
  type: 'bool';
}

export interface EmailFieldDefinition extends FieldBase {
  type: 'email';
}

export interface UrlFieldDefinition extends FieldBase {
  type: 'url';
}

export interface DateFieldDefinition extends FieldBase {
  type: 'date';
}

export interface SelectFieldDefinition extends FieldBase {
  type: 'select';
  /** The allowed values. */
  values: string[];
  /** More than 1 makes the field multi-valued (an array). Default 1. */
  maxSelect?: number;
}

export interface JsonFieldDefinition extends FieldBase {
  type: 'json';
  /** Maximum size of the serialised JSON in bytes. Default 1 MiB. */
  maxSize?: number;
}

export interface RelationFieldDefinition extends FieldBase {
  type: 'relation';
  /** Name of the target collection. */
  collection: string;
  /** More than 1 makes the field multi-valued (an array of ids). Default 1. */
  maxSelect?: number;
  /** Delete this record when the referenced record is deleted. */
  cascadeDelete?: boolean;
}

export interface FileFieldDefinition extends FieldBase {
  type: 'file';
  /** More than 1 makes the field multi-valued (an array of names). Default 1. */
  maxSelect?: number;
  /** Maximum size of one file in bytes. */
  maxSize?: number;
  /** Allowed MIME types, sniffed from the bytes. Empty or absent: any. */
  mimeTypes?: string[];
  /** Allowed thumbnail sizes (`100x100`, `0x50`, ...). Absent: any up to 2048 per side. */
  thumbs?: string[];
  /** Downloads need an identity that passes the collection's view rule. */
  protected?: boolean;
}

/** One field of a collection. */
export type FieldDefinition =
  | TextFieldDefinition
  | NumberFieldDefinition
  | BoolFieldDefinition
  | EmailFieldDefinition
  | UrlFieldDefinition
  | DateFieldDefinition
  | SelectFieldDefinition
  | JsonFieldDefinition
  | RelationFieldDefinition
  | FileFieldDefinition;

/**
 * An access rule: `null` = superusers only, `""` = everyone, otherwise a filter expression
 * evaluated for the caller (docs/query-language.md).
 */
export type Rule = string | null;

/** The five rules of a collection. Each defaults to `null` (superusers only). */
export interface CollectionRules {
  list?: Rule;
  view?: Rule;
  create?: Rule;
  update?: Rule;
  delete?: Rule;
}

/** An extra index the schema sync creates. `-field` sorts that column descending. */
export interface IndexDefinition {
  fields: string[];
  /** A duplicate becomes a 422 `validation_not_unique` on the first field. */
  unique?: boolean;
}

/** A collection as declared in code. */
export interface CollectionDefinition {
  /** `[a-z_][a-z0-9_]*`, unique. Also the table name. */
  name: string;
  /** Stable id; default derived from the name (`pbc_` + a hash), stable across restarts. */
  id?: string;
  fields: FieldDefinition[];
  rules?: CollectionRules;
  indexes?: IndexDefinition[];
}
