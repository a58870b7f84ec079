import { BadRequestError } from '../errors.js';
import type { CollectionSchema, FieldSchema } from '../schema/collection-schema.js';
import type { StorageKind } from '../schema/storage-kinds.js';
import { joinSql, quoteIdent, rawSql, type SqlFragment } from '../sql-fragment.js';

/*
 * The aggregate endpoint's parameters (docs/search.md, "Aggregates"): `groupBy`, `fields` and
 * `sort`, checked against the schema alone and compiled to the parts of one grouped SELECT. Every
 * refusal is decided here, before any statement runs, so it never depends on what records hold
 * (a refusal that did would tell whether values exist).
 */

/** Most `groupBy` fields of one aggregate. */
export const MAX_GROUP_FIELDS = 5;
/** Most aggregates (`count()`, `sum(x)`, …) of one request. */
export const MAX_AGGREGATES = 10;
/** Longest `groupBy`, `fields` or `sort` parameter, in characters: longer is a 400 before it is split. */
const MAX_PARAM_LENGTH = 1000;

export type AggregateFunction = 'count' | 'sum' | 'avg' | 'min' | 'max';

/** What a request asks for, as written (HTTP's query text or the server API's options). */
export interface AggregateInput {
  groupBy?: string;
  fields?: string;
  sort?: string;
}

/** One output column: where its value comes from, and the key it has in each item. */
export interface AggregateColumn {
  /** The item's key: the field's name for a group, `count`, `sum_amount`, … for an aggregate. */
  readonly name: string;
  /** How the column's value is read: the field's storage kind, or `count` (a number). */
  readonly storage: StorageKind | 'count';
  /** The column's expression over RECORD_ALIAS. */
  readonly expression: SqlFragment;
}

/** A checked aggregate request, as SQL parts over the record alias. */
export interface AggregatePlan {
  readonly groups: readonly AggregateColumn[];
  readonly aggregates: readonly AggregateColumn[];
  /** Per ORDER BY item: the index of its column (groups first, then aggregates) and its direction. */
  readonly order: readonly { readonly column: number; readonly descending: boolean }[];
}

/** The storage kinds a field may be grouped by: one value per record, compared as a whole. */
const GROUPABLE: ReadonlySet<StorageKind> = new Set(['text', 'bool', 'number', 'date']);
/** The storage kinds min() and max() take: numbers, dates, and text (ordered by the column's collation). */
const ORDERED: ReadonlySet<StorageKind> = new Set(['text', 'number', 'date']);

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const CALL = /^(count|sum|avg|min|max)\(\s*([^()]*?)\s*\)$/;

function invalid(message: string): BadRequestError {
  return new BadRequestError(message, 'invalid_parameter');
}

/** A piece of the request as an error message quotes it: JSON-escaped (a NUL or a newline stays visible) and at most 40 characters. */
function quote(text: string): string {
  return JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text);
}

/** The comma-separated items of a parameter, trimmed; a 400 past MAX_PARAM_LENGTH or `max` items, or for an empty item. */
function splitList(value: string | undefined, name: string, max: number): string[] {
  if (value === undefined || value.trim() === '') return [];
  if (value.length > MAX_PARAM_LENGTH) throw invalid(`The "${name}" parameter is too long (at most ${MAX_PARAM_LENGTH} characters).`);
  const items = value.split(',').map((item) => item.trim());
  if (items.some((item) => item === '')) throw invalid(`The "${name}" parameter has an empty item.`);
  if (items.length > max) throw invalid(`The "${name}" parameter has ${items.length} items; at most ${max} are allowed.`);
  return items;
}

/**
 * The field `name` of the collection as `superuser` or another caller may group or aggregate it:
 * unknown names, and hidden fields for non-superusers, are "unknown" (as a filter says of them);
 * a field with a view rule (DESIGN 24) is refused to non-superusers whatever its rule would decide
 * on any record.
 */
function readableField(collection: CollectionSchema, name: string, parameter: string, superuser: boolean): FieldSchema {
  if (!NAME.test(name)) throw invalid(`The "${parameter}" parameter names ${quote(name)}, which is not a field name.`);
  const field = collection.field(name);
  if (field === undefined || (field.hidden && !superuser)) throw invalid(`The "${parameter}" parameter names an unknown field "${name}".`);
  if (field.rules?.view !== undefined && !superuser) {
    throw invalid(`The field "${name}" has a view rule: only superusers may group or aggregate it.`);
  }
  return field;
}

function column(field: FieldSchema): SqlFragment {
  return rawSql(`"r".${quoteIdent(field.column)}`);
}

/** What kind of value a field holds, for an error that says why it cannot be used. */
function describeKind(field: FieldSchema): string {
  if (field.multiple) return `a multi-valued ${field.type} field`;
  if (field.type === 'file') return 'a file field';
  return `a ${field.type} field`;
}

function groupColumn(field: FieldSchema): AggregateColumn {
  if (!GROUPABLE.has(field.storage) || field.type === 'file') {
    throw invalid(`Cannot group by "${field.name}": it is ${describeKind(field)}; groupBy takes text, number, bool, date, single select and single relation fields.`);
  }
  return { name: field.name, storage: field.storage, expression: column(field) };
}

function aggregateColumn(collection: CollectionSchema, item: string, superuser: boolean): AggregateColumn {
  const call = CALL.exec(item);
  if (!call) throw invalid(`The "fields" parameter holds ${quote(item)}; expected count(), sum(field), avg(field), min(field) or max(field).`);
  const fn = call[1] as AggregateFunction;
  const argument = call[2]!;
  if (fn === 'count') {
    if (argument !== '') throw invalid(`count() takes no field: it counts the records of each group (got ${quote(item)}).`);
    return { name: 'count', storage: 'count', expression: rawSql('count(*)::float8') };
  }
  if (argument === '') throw invalid(`${fn}() needs a field, as in ${fn}(amount).`);
  const field = readableField(collection, argument, 'fields', superuser);
  const name = `${fn}_${field.name}`;
  if (fn === 'sum' || fn === 'avg') {
    if (field.storage !== 'number' || field.multiple) throw invalid(`Cannot ${fn} "${field.name}": it is ${describeKind(field)}; ${fn}() takes number fields.`);
    return { name, storage: 'number', expression: rawSql(`${fn}(${column(field).sql})`) };
  }
  if (!ORDERED.has(field.storage) || field.type === 'file') {
    throw invalid(`Cannot ${fn} "${field.name}": it is ${describeKind(field)}; ${fn}() takes number, date and text fields.`);
  }
  return { name, storage: field.storage, expression: rawSql(`${fn}(${column(field).sql})`) };
}

/**
 * Checks and compiles an aggregate request for a superuser or another caller. Without `fields`,
 * `count()`. A 400 (`invalid_parameter`) names what is wrong: an unknown or hidden field, a field
 * with a view rule (non-superusers), a field of a kind the function does not take, bad syntax, a
 * duplicate, a name that two columns would share, too many items.
 */
export function compileAggregate(collection: CollectionSchema, input: AggregateInput, options: { superuser: boolean }): AggregatePlan {
  const { superuser } = options;
  const groupNames = splitList(input.groupBy, 'groupBy', MAX_GROUP_FIELDS);
  const groups = groupNames.map((name) => groupColumn(readableField(collection, name, 'groupBy', superuser)));
  const fieldItems = splitList(input.fields, 'fields', MAX_AGGREGATES);
  const aggregates = (fieldItems.length === 0 ? ['count()'] : fieldItems).map((item) => aggregateColumn(collection, item, superuser));
  const columns = [...groups, ...aggregates];
  const seen = new Set<string>();
  for (const { name } of columns) {
    if (seen.has(name)) throw invalid(`"${name}" is asked for twice: each group field and aggregate may appear once (a group field cannot share its name with an aggregate).`);
    seen.add(name);
  }
  const order: { column: number; descending: boolean }[] = [];
  for (const item of splitList(input.sort, 'sort', columns.length)) {
    const descending = item.startsWith('-');
    const name = item.replace(/^[-+]/, '');
    const index = columns.findIndex((c) => c.name === name);
    if (index < 0) throw invalid(`Cannot sort by ${quote(name)}: an aggregate sorts by its group fields and aggregates (${columns.map((c) => c.name).join(', ')}).`);
    if (order.some((o) => o.column === index)) throw invalid(`Cannot sort by "${name}" twice.`);
    order.push({ column: index, descending });
  }
  // The group fields ascending after what was asked: a total order, so pages never overlap.
  groups.forEach((_, index) => {
    if (!order.some((o) => o.column === index)) order.push({ column: index, descending: false });
  });
  return { groups, aggregates, order };
}

/** The SELECT list's column aliases: `"c0"`, `"c1"`, … in plan order (groups, then aggregates). */
export function columnAlias(index: number): string {
  return `c${index}`;
}

/** `<expr> AS "c0", …` of the plan's columns, groups first. */
export function selectColumns(plan: AggregatePlan): SqlFragment {
  const columns = [...plan.groups, ...plan.aggregates];
  return joinSql(
    columns.map((c, i) => ({ sql: `${c.expression.sql} AS ${quoteIdent(columnAlias(i))}`, bindings: c.expression.bindings })),
    ', ',
  );
}
