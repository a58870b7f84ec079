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
export type { EditorFieldDefinition } from './fields/editor.js';
export type { AutodateFieldDefinition } from './fields/autodate.js';
export type { GeoPointFieldDefinition } from './fields/geo-point.js';
export type { FieldRules } from './field-type-spec.js';

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

/** An extra index the schema sync creates: a column index, or the collection's search index. */
export type IndexDefinition = ColumnIndexDefinition | SearchIndexDefinition;

/** A (b-tree) index on columns. `-field` sorts that column descending. */
export interface ColumnIndexDefinition {
  fields: string[];
  /** A duplicate becomes a 422 `validation_not_unique` on the first field. */
  unique?: boolean;
  search?: undefined;
}

/**
 * The collection's full-text search index (docs/search.md): what `?search=` matches. At most one
 * per collection, over 1 to 4 text, editor, email or url fields, none hidden or with a view rule.
 */
export interface SearchIndexDefinition {
  /** The fields searched, most important first (a match in an earlier one ranks higher). */
  search: string[];
  /** A Postgres text search configuration (SEARCH_LANGUAGES); default `simple` (no stemming, no stop words). */
  language?: SearchLanguage;
  fields?: undefined;
}

/**
 * The text search configurations Postgres and PGlite both ship (`SELECT cfgname FROM pg_ts_config`),
 * the only languages a search index may name: the name is written into the index's SQL.
 */
export const SEARCH_LANGUAGES = [
  'simple', 'arabic', 'armenian', 'basque', 'catalan', 'danish', 'dutch', 'english', 'finnish', 'french', 'german', 'greek', 'hindi', 'hungarian',
  'indonesian', 'irish', 'italian', 'lithuanian', 'nepali', 'norwegian', 'portuguese', 'romanian', 'russian', 'serbian', 'spanish', 'swedish', 'tamil',
  'turkish', 'yiddish',
] as const;

/** One of SEARCH_LANGUAGES. */
export type SearchLanguage = (typeof SEARCH_LANGUAGES)[number];

/** A collection as declared in code: a table of records (`base`, the default) or a read-only view. */
export type CollectionDefinition = BaseCollectionDefinition | ViewCollectionDefinition;

/** A collection of records kept in its own table. */
export interface BaseCollectionDefinition {
  /** `[a-z_][a-z0-9_]*`, unique. Also the table name. */
  name: string;
  /** Stable id; default derived from the name (`pbc_` + a hash), stable across restarts. */
  id?: string;
  /** `'base'`, the default (PocketBase's name for it). */
  type?: 'base';
  /** The declared fields; absent: none besides the system fields (as PocketBase allows). */
  fields?: FieldDefinition[];
  rules?: CollectionRules;
  indexes?: IndexDefinition[];
  /** Only a view has a query. */
  viewQuery?: undefined;
}

/**
 * A view collection (PocketBase's `view` type; docs/collections.md, "View collections"): the
 * records a SELECT of the host's returns, read-only. Its fields are inferred from the query's
 * columns when the schema is synced (an `id` column is required); it has no `fields` or indexes
 * of its own, and only the list and view rules (a write answers 400).
 */
export interface ViewCollectionDefinition {
  /** `[a-z_][a-z0-9_]*`, unique. Also the name of the database view. */
  name: string;
  /** Stable id; default derived from the name (`pbc_` + a hash). */
  id?: string;
  type: 'view';
  /** One SELECT statement, trusted like a rule: the host's SQL, never a client's. */
  viewQuery: string;
  /** `list` and `view`; a view is read-only, so `create`, `update` and `delete` may only be `null` (as PocketBase exports them). */
  rules?: CollectionRules;
  /**
   * Columns the query computes (not copies of a field) to show although it reads a hidden field:
   * without this, every computed column of such a view is hidden, since it may carry the hidden
   * value (`lower(secret)`).
   */
  shownColumns?: string[];
  /** Inferred from the query: declaring them is refused. */
  fields?: undefined;
  indexes?: undefined;
}
