import { RECORD_ALIAS, type ExtraColumns, type RecordStore, type RecordValues } from '../db/record-store.js';
import { memoizePerObject } from '../memoize-per-object.js';
import { compileFilter } from '../query/compile-filter.js';
import { parseFilterCached } from '../query/filter-parser.js';
import { LruCachePerOwner } from '../query/lru-cache.js';
import { joinSql, rawSql, sql, type SqlFragment } from '../sql-fragment.js';
import type { CollectionSchema, FieldSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { compileObjectShape } from '../schema/object-shape.js';
import { reuseKey } from './access-rules.js';
import { isSuperuser, type Caller } from './caller.js';

/*
 * Field view rules in answers (DESIGN 24): the one place that decides which guarded fields of a
 * record a caller may read. A field whose rule fails on a record is taken out of that record's
 * values (its key is gone), so everything after it (serializeRecord, expand, `fields`) meets a
 * record without the field, as it would a hidden one: a relation it held is not expanded, a
 * back-relation through it does not find the record. The rules are evaluated in the statement
 * that reads the records (fieldViewColumns), else once per presented set (readableRecords), or
 * by realtime in the statement that checks a change (compileFieldViews, withVisibleFields).
 */

/** The fields of a collection whose view a rule guards (`field.rules.view` null or an expression), in declaration order. */
export const guardedViewFields = memoizePerObject((collection: CollectionSchema) => collection.fields.filter((field) => field.rules?.view !== undefined));

/** Whether `caller` reads every field of `collection`'s records: a superuser, or a collection without field view rules. Cheap: asked for every answer. */
export function readsEveryField(collection: CollectionSchema, caller: Caller): boolean {
  return guardedViewFields(collection).length === 0 || isSuperuser(caller);
}

/** A guarded field's view rule for one caller: `'denied'` (a `null` rule) or its condition on the record RECORD_ALIAS. */
export type FieldView = 'denied' | SqlFragment;

/** What field view rules are compiled for. */
export interface FieldViewOptions {
  registry: SchemaRegistry;
  collection: CollectionSchema;
  /** Whose request the rules read (the collection rules' own: an expansion's context is "expand"). */
  caller: Caller;
  /** Macros bound as DeferredValues, for rules compiled once and checked at each change (realtime). */
  deferMacros?: boolean;
}

/** Compiled view rules per collection, by rule text and the request values it reads (reuseKey; the cache only saves work). */
const compiledViews = new LruCachePerOwner<string, SqlFragment>(100);

/**
 * Per field of guardedViewFields (same order), its view rule for the caller, compiled in rule
 * mode (a rule reads every field); undefined when the caller reads every field.
 */
export function compileFieldViews(options: FieldViewOptions): readonly FieldView[] | undefined {
  if (readsEveryField(options.collection, options.caller)) return undefined;
  return guardedViewFields(options.collection).map((field) => compileFieldView(options, field));
}

/** One guarded field's view rule for the caller (compileFieldViews), reused by the request values it reads (reuseKey). */
export function compileFieldView(options: FieldViewOptions, field: FieldSchema): FieldView {
  const { registry, collection, caller } = options;
  const rule = field.rules!.view!;
  if (rule === null) return 'denied';
  const reads = reuseKey(parseFilterCached(rule), collection, 'rule', caller.request);
  const key = `${rule}\n${reads}`;
  const cached = reads === undefined ? undefined : compiledViews.get(collection, key);
  if (cached) return cached;
  const compiled = compileFilter(rule, { registry, collection, alias: RECORD_ALIAS, request: caller.request, mode: 'rule', deferMacros: options.deferMacros });
  if (reads !== undefined) compiledViews.set(collection, key, compiled);
  return compiled;
}

/** Column aliases no field can have (a field name starts with a letter or `_`): `"$view_0"`, … */
const aliases: string[] = [];
const aliasOf = (index: number) => (aliases[index] ??= `$view_${index}`);

/** `(rule) IS TRUE AS "$view_0", …`: one boolean per guarded field, NULL counting as refused. */
function viewColumns(views: readonly FieldView[]): SqlFragment {
  return joinSql(
    views.map((view, i) => (view === 'denied' ? rawSql(`FALSE AS "${aliasOf(i)}"`) : sql`(${view}) IS TRUE AS ${`"${aliasOf(i)}"`}`)),
    ', ',
  );
}

/**
 * What a select read for which caller through fieldViewColumns: its array of records (a list's
 * page, presented as it is), and its record when it read one (a view's, presented in an array
 * of its own). An answer of that caller need not check them again. One entry per select, not per
 * record: a WeakMap entry per record would cost the young generation's collections.
 */
const checkedFor = new WeakMap<object, Caller>();

/** Whether a select of `caller` read `records` (the array, or its one record) through fieldViewColumns. */
function checkedForCaller(records: readonly RecordValues[], caller: Caller): boolean {
  return checkedFor.get(records) === caller || (records.length === 1 && checkedFor.get(records[0]!) === caller);
}

/**
 * Per collection, by the guarded fields a record goes without (bit i: guardedViewFields[i]), what
 * copies its values without them: one object literal (lib/schema/object-shape.ts), as a row is
 * read, where deleting keys would leave the slow kind of object. Made on first use.
 */
const copiersOf = memoizePerObject((collection: CollectionSchema) => new Map<number, (values: RecordValues) => RecordValues>());

function copierWithout(collection: CollectionSchema, refused: number): (values: RecordValues) => RecordValues {
  const copiers = copiersOf(collection);
  let copier = copiers.get(refused);
  if (copier === undefined) {
    const gone = new Set(guardedViewFields(collection).flatMap((field, i) => (refused & (2 ** i) ? [field.name] : [])));
    copier = compileObjectShape<RecordValues>(collection.fields.filter((field) => !gone.has(field.name)).map((field) => ({ key: field.name, from: field.name })));
    copiers.set(refused, copier);
  }
  return copier;
}

/** The guarded fields a row with viewColumns refuses, as bits; a record not found (`row` undefined) is refused all of them. */
function refusedBy(collection: CollectionSchema, row: Record<string, unknown> | undefined): number {
  const count = guardedViewFields(collection).length;
  let refused = 0;
  for (let i = 0; i < count; i++) if (row?.[aliasOf(i)] !== true) refused += 2 ** i;
  return refused;
}

/** `values` without the `refused` fields: a copy when anything goes, since values may be shared (the record a hook receives). */
function withoutRefused(collection: CollectionSchema, values: RecordValues, refused: number): RecordValues {
  return refused === 0 ? values : copierWithout(collection, refused)(values);
}

/**
 * The columns a read select adds so that field view rules join its plan (lib/db/record-store.ts
 * ExtraColumns): each record comes back without what the caller may not read. Undefined when
 * the caller reads every field: the select keeps its fixed text.
 */
export function fieldViewColumns(options: FieldViewOptions): ExtraColumns | undefined {
  const views = compileFieldViews(options);
  if (views === undefined) return undefined;
  const { collection, caller } = options;
  return {
    columns: viewColumns(views),
    readRows(records, rows) {
      for (let i = 0; i < records.length; i++) records[i] = withoutRefused(collection, records[i]!, refusedBy(collection, rows[i]));
      checkedFor.set(records, caller);
      if (records.length === 1) checkedFor.set(records[0]!, caller);
    },
  };
}

/**
 * `records` as `caller` may read them, for an answer. Records a select of this caller read
 * through fieldViewColumns stay as they are; others (a write's answer) are checked in one
 * statement on `store`, by id.
 */
export async function readableRecords(options: { registry: SchemaRegistry; store: RecordStore; collection: CollectionSchema; caller: Caller; records: readonly RecordValues[] }): Promise<readonly RecordValues[]> {
  const { collection, caller, records } = options;
  if (readsEveryField(collection, caller) || records.length === 0 || checkedForCaller(records, caller)) return records;
  const views = compileFieldViews(options)!;
  const rows = await options.store.selectColumnsByIds(collection, records.map((values) => String(values.id)), viewColumns(views));
  const byId = new Map(rows.map((row) => [String(row.id), row]));
  return records.map((values) => withoutRefused(collection, values, refusedBy(collection, byId.get(String(values.id)))));
}

/**
 * `values` with the guarded fields taken out where `visible` (per field of guardedViewFields, as
 * compileFieldViews's rules decided it in a statement of the caller's own) says false: how
 * realtime applies what its check statement decided.
 */
export function withVisibleFields(collection: CollectionSchema, values: RecordValues, visible: readonly boolean[], caller: Caller): RecordValues {
  let refused = 0;
  visible.forEach((shows, i) => (refused += shows ? 0 : 2 ** i));
  const kept = withoutRefused(collection, values, refused);
  checkedFor.set(kept, caller);
  return kept;
}
