/**
 * What a user writes to declare collections (docs/collections.md). These are the public input
 * types; lib/schema/collection-schema.ts turns them into the checked, normalised model the rest
 * of the library reads. Each field type's declaration lives with the type (lib/schema/fields/).
 */
import type { FieldDefinition } from './field-types.js';

// The public input types in one place (lib/index.ts exports them from here).
export type { FieldDefinition } from './field-types.js';
export type { TextFieldDefinition } from './fields/text.js';
export type { NumberFieldDefinition } from './fields/number.js';
export type { BoolFieldDefinition } from './fields/bool.js';
export type { EmailFieldDefinition } from './fields/email.js';
export type { UrlFieldDefinition } from './fields/url.js';
export type { DateFieldDefinition } from './fields/date.js';
export type { SelectFieldDefinition } from './fields/select.js';
export type { JsonFieldDefinition } from './fields/json.js';
export type { RelationFieldDefinition } from './fields/relation.js';
export type { FileFieldDefinition } from './fields/file.js';

/** Every field type a collection may declare (lib/schema/field-types.ts lists them). */
export type FieldType = FieldDefinition['type'];

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
