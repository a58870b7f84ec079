/**
 * View collections (PocketBase's `view` type, docs/collections.md "View collections") in the
 * schema: which fields a view's columns make, and the SELECT its database view is made of. Pure:
 * the database's description of the query's columns comes in (lib/db/schema/sync-views.ts asks for it
 * when the schema is synced), checked collections and SQL text go out.
 */
import { SchemaError } from '../errors.js';
import { quoteIdent as q, rawSql } from '../sql-fragment.js';
import { assembleSchemaRegistry, buildViewCollection, isSearchColumnName, type CollectionSchema, type FieldSchema, type InferredViewFields, type SchemaRegistry } from './collection-schema.js';
import { isFieldName } from './collection-names.js';
import type { FieldDefinition } from './definitions.js';
import { STORAGE_KINDS } from './storage-kinds.js';

/** One column of a view's query, as the database describes it. */
export interface ViewColumn {
  readonly name: string;
  /** The column's type as `format_type` names it (a domain's base type): `text`, `bigint`, `timestamp with time zone`, ... */
  readonly dataType: string;
  /** The table column it copies unchanged, when it is one (a plain `p.author`, through joins and subqueries): table and column name. */
  readonly source?: { readonly table: string; readonly column: string };
}

/**
 * A column of a table (or of a view) that a view's query reads anywhere: its columns, WHERE, JOIN,
 * GROUP BY, subqueries and CTEs. No `column`: every column of the table, which a whole-row
 * reference (`row_to_json(t)`, `to_jsonb(t)`) reads.
 */
export interface ReadColumn {
  readonly table: string;
  readonly column?: string;
}

/** The alias of the host's query inside the view's SELECT. */
const SOURCE_ALIAS = '_rb_view_source';
/** Keys every record carries besides its fields: a column of that name would be hidden behind them. */
const RECORD_KEYS = ['collectionId', 'collectionName', 'expand'];

/** Postgres types by the field type a column of that type becomes when it copies no collection field; anything else is `json`. */
const TYPE_FAMILIES: ReadonlyMap<string, 'text' | 'number' | 'bool' | 'date'> = new Map([
  ...['text', 'character varying', 'character', 'name', 'uuid', 'citext'].map((t) => [t, 'text'] as const),
  ...['smallint', 'integer', 'bigint', 'real', 'double precision', 'numeric'].map((t) => [t, 'number'] as const),
  ['boolean', 'bool'],
  ...['timestamp with time zone', 'timestamp without time zone', 'date'].map((t) => [t, 'date'] as const),
]);

/**
 * The host's query as one subquery, which is how the view reads it: a trailing `;` dropped, on
 * lines of its own so that a `--` comment at its end cannot swallow the closing parenthesis. A
 * second statement inside the parentheses is a syntax error (PocketBase wraps it the same way).
 */
export function wrapViewQuery(query: string): string {
  return selectFromQuery('*', query);
}

function selectFromQuery(list: string, query: string): string {
  const body = query.trim().replace(/[;\s]+$/, '');
  return `SELECT ${list} FROM (\n${body}\n) AS ${q(SOURCE_ALIAS)}`;
}

/** What a view's fields are inferred from: the view, what the database says of its query, and the collections declared before it. */
export interface ViewInference {
  readonly view: CollectionSchema;
  readonly columns: readonly ViewColumn[];
  /** The table columns the query reads anywhere. */
  readonly reads: readonly ReadColumn[];
  /** A declared base collection, or a view collection completed before this one, by table name. */
  sourceOf(table: string): CollectionSchema | undefined;
}

/**
 * The fields a view's columns make (after PocketBase's `CreateViewFields`):
 * - `id` is required, and is the record id whatever its type (read as text);
 * - a column that copies a field of a collection (`p.author`, `p.title AS heading`) is that
 *   field, with every option (a relation, a file, a select's values, `hidden`), under its new name;
 *   of its own rules it keeps `view` (a view takes no writes), which is read on the view's row:
 *   where it names what the view lacks, completeCollections hides the copy (docs/collections.md
 *   "Field rules");
 * - a column that copies a collection's `id` is a single relation to that collection;
 * - `created` and `updated` of a date type are the system dates, as on a table;
 * - any other column has the type of its SQL type: text, number, bool, date, else json. Where
 *   the query reads a hidden field, or one with a view rule, anywhere, such a computed column is
 *   hidden (it may carry the value: `lower(secret)`), unless the view lists it in `shownColumns`.
 * Refuses a view without `id`, a column no field could be named after (`?column?`: name it with
 * AS), a column named as a record key, and a `shownColumns` entry that is no column or copies a
 * hidden field.
 */
export function inferViewFields(options: ViewInference): InferredViewFields {
  const { view, columns } = options;
  const where = `collection "${view.name}"`;
  if (!columns.some((c) => c.name === 'id')) {
    throw new SchemaError(`${where}: its viewQuery has no "id" column, which every view needs (as in PocketBase); select a unique value per row AS id, for example (ROW_NUMBER() OVER ())::text AS id`);
  }
  const shown = checkShownColumns(options);
  const hideComputed = readsKeptField(options);
  const fields: FieldDefinition[] = [];
  const systemDates: ('created' | 'updated')[] = [];
  for (const column of columns) {
    if (column.name === 'id') continue;
    // A search index's column, which `SELECT *` brings along: recordbase's own, never a field (docs/search.md).
    if (isSearchColumnName(column.name)) continue;
    if (!isFieldName(column.name)) {
      throw new SchemaError(`${where}: the viewQuery's column "${column.name}" cannot be a field name ([A-Za-z_][A-Za-z0-9_]*); name it with AS`);
    }
    if (RECORD_KEYS.includes(column.name)) throw new SchemaError(`${where}: the viewQuery's column "${column.name}" has the name of a record key; rename it with AS`);
    const definition = defineColumn(column, options.sourceOf);
    if (column.name === 'created' || column.name === 'updated') {
      if (definition.type !== 'date') throw new SchemaError(`${where}: the viewQuery's column "${column.name}" must be a date (a record's ${column.name}), or be renamed with AS`);
      systemDates.push(column.name);
      continue;
    }
    // Postgres names the origin of a plain copy only; of an expression it says no more than what the whole query reads.
    const hidden = column.source === undefined && hideComputed && !shown.has(column.name);
    fields.push(hidden ? { ...definition, hidden: true } : definition);
  }
  return { fields, systemDates };
}

/** Whether the query reads a field some caller may not see: hidden, or with a view rule (a whole-row reference reads every field). */
function readsKeptField(options: ViewInference): boolean {
  const kept = (field: FieldSchema | undefined) => field !== undefined && (field.hidden || field.rules?.view !== undefined);
  return options.reads.some(({ table, column }) => {
    const source = options.sourceOf(table);
    if (source === undefined) return false;
    return column === undefined ? source.fields.some(kept) : kept(source.field(column));
  });
}

/** The view's `shownColumns`, each a column of its query that is not a copy of a hidden field. */
function checkShownColumns(options: ViewInference): Set<string> {
  const { view, columns } = options;
  const shown = new Set(view.shownColumns ?? []);
  for (const name of shown) {
    const column = columns.find((c) => c.name === name);
    if (column === undefined) throw new SchemaError(`collection "${view.name}": shownColumns names "${name}", which its viewQuery does not select`);
    const copied = column.source && options.sourceOf(column.source.table)?.field(column.source.column);
    if (copied?.hidden) {
      throw new SchemaError(`collection "${view.name}": shownColumns names "${name}", a copy of the hidden field "${column.source!.table}.${copied.name}", which stays hidden in a view`);
    }
  }
  return shown;
}

/** One column's field declaration (see inferViewFields). */
function defineColumn(column: ViewColumn, sourceOf: (table: string) => CollectionSchema | undefined): FieldDefinition {
  const source = column.source && sourceOf(column.source.table);
  const copied = column.source && source?.field(column.source.column);
  if (source && copied) {
    if (copied.name === 'id') return { name: column.name, type: 'relation', collection: source.name };
    if (!copied.system) {
      const { rules: _declared, ...definition } = copied.definition;
      const view = copied.rules?.view;
      return { ...definition, name: column.name, ...(view === undefined ? {} : { rules: { view } }) } as FieldDefinition;
    }
  }
  return { name: column.name, type: TYPE_FAMILIES.get(column.dataType) ?? 'json' } as FieldDefinition;
}

/** A view collection completed with the fields its columns make (inferViewFields). */
export function inferViewCollection(options: ViewInference): CollectionSchema {
  return buildViewCollection(options.view, inferViewFields(options));
}

/**
 * The SELECT the database view is made of: the host's query as a subquery, each column read the
 * way its field's storage kind keeps it (lib/schema/storage-kinds.ts), so that filters, sort and
 * the row reader see a view's column exactly as they see a table's: cast to the kind's type (a
 * `bigint` count to double precision, a date to timestamptz(3) read as UTC, other types to jsonb),
 * and NULL (a LEFT JOIN's missing row) read as the kind's empty value where that kind is never
 * NULL in a table. A view without a `created` gets a NULL one no field declares, so that the
 * default order (`created`, then `id`) is the id order; responses never show it.
 */
export function viewSelectSql(view: CollectionSchema, columns: readonly ViewColumn[]): string {
  // A search index's column (inferViewFields leaves it out) is not selected.
  const list = columns.filter((column) => !isSearchColumnName(column.name)).map((column) => {
    const field = view.field(column.name);
    if (!field) throw new Error(`recordbase: view "${view.name}" has no field for its column "${column.name}"`);
    return `${readAsStored(field.storage, column)} AS ${q(column.name)}`;
  });
  if (!view.field('created')) list.push(`CAST(NULL AS timestamptz(3)) AS ${q('created')}`);
  return selectFromQuery(list.join(', '), view.viewQuery ?? '');
}

/** A source column as a column of `kind` holds it (see viewSelectSql). */
function readAsStored(kind: CollectionSchema['fields'][number]['storage'], column: ViewColumn): string {
  const spec = STORAGE_KINDS[kind];
  const source = `${q(SOURCE_ALIAS)}.${q(column.name)}`;
  let value = source;
  let type = spec.dataType;
  if (type === 'jsonb' && column.dataType !== 'jsonb') value = column.dataType === 'json' ? source : `to_jsonb(${source})`;
  if (type === 'timestamp with time zone') {
    type = 'timestamptz(3)';
    // A date or timestamp without a zone is read as UTC, the zone of every record date.
    if (column.dataType !== 'timestamp with time zone') value = `(CAST(${source} AS timestamp) AT TIME ZONE 'UTC')`;
  }
  return spec.fillEmptySql(rawSql(`CAST(${value} AS ${type})`)).sql;
}

/** The registry with its views completed (the others unchanged, the same objects): what serves once the sync has run. */
export function completeViewRegistry(registry: SchemaRegistry, views: ReadonlyMap<string, CollectionSchema>): SchemaRegistry {
  return assembleSchemaRegistry(registry.collections.map((c) => views.get(c.name) ?? c));
}
