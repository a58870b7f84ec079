import { types } from 'node:util';
import type { Knex } from 'knex';
import type { CollectionSchema, FieldSchema } from '../schema/collection-schema.js';
import { formatRecordDate } from '../schema/record-date.js';
import { quoteIdent as q, type SqlFragment } from '../query/sql-fragment.js';

/**
 * A record's values in the API shape (docs/collections.md): dates as record-format strings,
 * multi-valued fields as arrays, JSON as parsed values. System fields included.
 */
export type RecordValues = Record<string, unknown>;

/** The alias of a collection's table in every statement; compiled filters and sorts refer to it. */
export const RECORD_ALIAS = 'r';


function readValue(field: FieldSchema, raw: unknown): unknown {
  if (raw === null || raw === undefined) {
    if (field.storage === 'text') return '';
    if (field.storage === 'array') return [];
    if (field.storage === 'bool') return false;
    return null;
  }
  // isDate, not instanceof: the embedded engine's rows come from its worker thread, which under a
  // test runner's vm context is another realm; String(date) would drop the milliseconds.
  if (field.storage === 'date') return formatRecordDate(types.isDate(raw) ? raw : new Date(String(raw)));
  if (field.storage === 'number') return typeof raw === 'number' ? raw : Number(raw);
  return raw;
}

/** Turns a database row into record values; the only place that knows how the driver answers. */
export function readRow(collection: CollectionSchema, row: Record<string, unknown>): RecordValues {
  const out: RecordValues = {};
  for (const field of collection.fields) out[field.name] = readValue(field, row[field.column]);
  return out;
}

/** Turns record values into column values for a write (jsonb columns take JSON text). */
function writeColumns(collection: CollectionSchema, values: RecordValues): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const field of collection.fields) {
    if (field.system || !(field.name in values)) continue;
    const value = values[field.name];
    out[field.column] = (field.storage === 'array' || field.storage === 'json') && value !== null && value !== undefined ? JSON.stringify(value) : value;
  }
  return out;
}

/** The Postgres type of each storage kind: how a value is bound into a row built from values. */
const COLUMN_CASTS: Record<FieldSchema['storage'], string> = {
  text: 'text',
  array: 'jsonb',
  bool: 'boolean',
  number: 'double precision',
  date: 'timestamptz',
  json: 'jsonb',
};

function tableOf(collection: CollectionSchema): string {
  return `${collection.table} as ${RECORD_ALIAS}`;
}

function applyWhere(query: Knex.QueryBuilder, where: readonly SqlFragment[]): Knex.QueryBuilder {
  for (const fragment of where) query.whereRaw(`(${fragment.sql})`, fragment.bindings as Knex.RawBinding[]);
  return query;
}

/**
 * `column = ANY(ids)`, the ids bound as one text[] parameter: one placeholder however many ids
 * there are. (One placeholder per id, as whereIn makes, stops at the protocol's 65,535
 * parameters, and a bulk delete may select more records than that.) `column` is quoted SQL.
 */
function whereAnyOf(query: Knex.QueryBuilder, column: string, ids: readonly string[]): Knex.QueryBuilder {
  return query.whereRaw(`${column} = ANY(?::text[])`, [[...ids]]);
}

/** The quoted `r.<column>` of a record statement. */
function aliased(column: string): string {
  return `${q(RECORD_ALIAS)}.${q(column)}`;
}

/**
 * All record SQL. Conditions arrive as compiled fragments referring to RECORD_ALIAS; values only
 * ever travel as bindings. A store made inside `transaction()` runs every call in that transaction.
 */
export class RecordStore {
  constructor(private readonly db: Knex | Knex.Transaction) {}

  /** Runs `work` in one transaction; it commits when `work` resolves and rolls back when it throws. */
  transaction<T>(work: (store: RecordStore) => Promise<T>): Promise<T> {
    return this.db.transaction((trx) => work(new RecordStore(trx)));
  }

  /** One page of records matching every `where` fragment, in `orderBy` order. */
  async selectPage(options: { collection: CollectionSchema; where: readonly SqlFragment[]; orderBy: SqlFragment; limit: number; offset: number }): Promise<RecordValues[]> {
    const query = applyWhere(this.db.select(`${RECORD_ALIAS}.*`).from(tableOf(options.collection)), options.where)
      .orderByRaw(options.orderBy.sql, options.orderBy.bindings as Knex.RawBinding[])
      .limit(options.limit)
      .offset(options.offset);
    const rows: Record<string, unknown>[] = await query;
    return rows.map((row) => readRow(options.collection, row));
  }

  /** How many records match every `where` fragment. */
  async count(options: { collection: CollectionSchema; where: readonly SqlFragment[] }): Promise<number> {
    const query = applyWhere(this.db.from(tableOf(options.collection)).select(this.db.raw('count(*)::int AS n')), options.where);
    const rows: { n: number }[] = await query;
    return Number(rows[0]?.n ?? 0);
  }

  /**
   * The record with `id` that also matches `where`, or undefined. With `lock`, the row is locked
   * until the transaction ends (FOR UPDATE), which is what keeps concurrent updates from losing
   * one another.
   */
  async selectById(options: { collection: CollectionSchema; id: string; where?: readonly SqlFragment[]; lock?: boolean }): Promise<RecordValues | undefined> {
    const query = applyWhere(this.db.select(`${RECORD_ALIAS}.*`).from(tableOf(options.collection)).where(`${RECORD_ALIAS}.id`, options.id), options.where ?? []);
    if (options.lock) query.forUpdate(RECORD_ALIAS);
    const rows: Record<string, unknown>[] = await query;
    return rows[0] ? readRow(options.collection, rows[0]) : undefined;
  }

  /**
   * Records whose id is in `ids` and that match `where` (one query, for expansion). With `limit`,
   * at most that many, in no particular order: expansion asks for one more than it may add, to
   * learn that it would go over without reading everything.
   */
  async selectByIds(options: { collection: CollectionSchema; ids: readonly string[]; where?: readonly SqlFragment[]; limit?: number }): Promise<RecordValues[]> {
    if (options.ids.length === 0) return [];
    const query = applyWhere(whereAnyOf(this.db.select(`${RECORD_ALIAS}.*`).from(tableOf(options.collection)), aliased('id'), options.ids), options.where ?? []);
    if (options.limit !== undefined) query.limit(options.limit);
    const rows: Record<string, unknown>[] = await query;
    return rows.map((row) => readRow(options.collection, row));
  }

  /** The subset of `ids` that exist in the collection (relation checks). */
  async selectExistingIds(collection: CollectionSchema, ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows: { id: string }[] = await whereAnyOf(this.db.select('id').from(collection.table), q('id'), ids);
    return new Set(rows.map((r) => r.id));
  }

  /**
   * Records of `collection` whose relation `field` holds one of `ids`, in created order: the
   * rows a delete must cascade to or unlink (with `lock`), or a back-relation to expand (with
   * `limit`, the first that many).
   */
  async selectByRelation(options: {
    collection: CollectionSchema;
    field: FieldSchema;
    ids: readonly string[];
    where?: readonly SqlFragment[];
    lock?: boolean;
    limit?: number;
  }): Promise<RecordValues[]> {
    if (options.ids.length === 0) return [];
    const column = aliased(options.field.column);
    const query = applyWhere(this.db.select(`${RECORD_ALIAS}.*`).from(tableOf(options.collection)), options.where ?? []);
    if (options.field.multiple) query.whereRaw(`jsonb_exists_any(${column}, ?::text[])`, [[...options.ids]]);
    else whereAnyOf(query, column, options.ids);
    if (options.lock) query.forUpdate(RECORD_ALIAS);
    else query.orderBy([`${RECORD_ALIAS}.created`, `${RECORD_ALIAS}.id`]);
    if (options.limit !== undefined) query.limit(options.limit);
    const rows: Record<string, unknown>[] = await query;
    return rows.map((row) => readRow(options.collection, row));
  }

  /** Inserts a record (created and updated set by the database) and returns it as stored. */
  async insert(collection: CollectionSchema, values: RecordValues): Promise<RecordValues> {
    const now = this.db.raw('now()');
    const rows: Record<string, unknown>[] = await this.db(collection.table)
      .insert({ ...writeColumns(collection, values), id: values.id, created: now, updated: now })
      .returning('*');
    return readRow(collection, rows[0]);
  }

  /** Writes `values` over the record (bumping `updated`) and returns it as stored. */
  async update(collection: CollectionSchema, id: string, values: RecordValues): Promise<RecordValues> {
    const rows: Record<string, unknown>[] = await this.db(collection.table)
      .update({ ...writeColumns(collection, values), updated: this.db.raw('clock_timestamp()') })
      .where('id', id)
      .returning('*');
    return readRow(collection, rows[0]);
  }

  /** Deletes records by id; returns how many went. */
  async deleteByIds(collection: CollectionSchema, ids: readonly string[]): Promise<number> {
    if (ids.length === 0) return 0;
    return whereAnyOf(this.db(collection.table), q('id'), ids).delete();
  }

  /** The records matching every `where` fragment, locked until the transaction ends (bulk delete's selection). */
  async selectLocked(options: { collection: CollectionSchema; where: readonly SqlFragment[] }): Promise<RecordValues[]> {
    const query = applyWhere(this.db.select(`${RECORD_ALIAS}.*`).from(tableOf(options.collection)), options.where).forUpdate(RECORD_ALIAS);
    const rows: Record<string, unknown>[] = await query;
    return rows.map((row) => readRow(options.collection, row));
  }

  /**
   * Whether a record that does not exist yet, holding `values` (every field; `created` and
   * `updated` are now), matches every `where` fragment: a create rule is checked on the row the
   * write would insert, before anything is written. The row is built from bound values with
   * their column types, so a rule reads it exactly as it would read the stored row.
   */
  async matchesNewRow(options: { collection: CollectionSchema; values: RecordValues; where: readonly SqlFragment[] }): Promise<boolean> {
    if (options.where.length === 0) return true;
    const columns: string[] = [];
    const bindings: unknown[] = [];
    for (const field of options.collection.fields) {
      if (field.name === 'created' || field.name === 'updated') {
        columns.push(`now() AS ${q(field.column)}`);
        continue;
      }
      const value = options.values[field.name];
      columns.push(`?::${COLUMN_CASTS[field.storage]} AS ${q(field.column)}`);
      bindings.push((field.storage === 'array' || field.storage === 'json') && value !== null && value !== undefined ? JSON.stringify(value) : (value ?? null));
    }
    const conditions = options.where.map((fragment) => `(${fragment.sql})`).join(' AND ');
    const result: { rows: unknown[] } = await this.db.raw(`SELECT 1 FROM (SELECT ${columns.join(', ')}) AS ${q(RECORD_ALIAS)} WHERE ${conditions}`, [
      ...bindings,
      ...options.where.flatMap((fragment) => fragment.bindings),
    ] as Knex.RawBinding[]);
    return result.rows.length > 0;
  }
}
