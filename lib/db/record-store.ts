import type { Knex } from 'knex';
import type { CollectionSchema, FieldSchema } from '../schema/collection-schema.js';
import { compileObjectShape } from '../schema/object-shape.js';
import { memoizePerObject } from '../memoize-per-object.js';
import { STORAGE_KINDS, type StorageKind } from '../schema/storage-kinds.js';
import { quoteIdent as q, type SqlFragment } from '../sql-fragment.js';
import type { StatementRunner } from './statements/statement-runner.js';
import { preparedName, runStatement, runTransaction, type HeldConnection, type Statement, type StatementResult } from './statements/run-statement.js';
import type { DatabaseContext } from './statements/database-context.js';

/**
 * A record's values in the API shape (docs/collections.md): dates as record-format strings,
 * multi-valued fields as arrays, JSON as parsed values. System fields included.
 */
export type RecordValues = Record<string, unknown>;

/** The alias of a collection's table in every statement; compiled filters and sorts refer to it. */
export const RECORD_ALIAS = 'r';

/**
 * Columns a read select returns beside the record's own (`expr AS "alias", …`, aliases no field
 * can have), and what the records read become with them (`readRows` may replace each entry of
 * `records`, read from `rows[i]`): how field view rules join a read's plan
 * (lib/records/field-visibility.ts). Without them a select's text is the fixed one.
 */
export interface ExtraColumns {
  readonly columns: SqlFragment;
  readRows(records: RecordValues[], rows: readonly Record<string, unknown>[]): void;
}


/** How a column's value becomes a record value, by storage kind (lib/schema/storage-kinds.ts), as the row reader names them. */
const READ_STORAGE = Object.fromEntries(Object.entries(STORAGE_KINDS).map(([kind, spec]) => [kind, spec.readColumn])) as Record<StorageKind, (raw: unknown) => unknown>;

/** Turns a database row into record values; the only place that knows how the driver answers. */
export function readRow(collection: CollectionSchema, row: Record<string, unknown>): RecordValues {
  return sqlOf(collection).readRow(row);
}

/** A value as a write binds it into its column (jsonb columns take JSON text). */
function columnValue(field: FieldSchema, value: unknown): unknown {
  return STORAGE_KINDS[field.storage].toColumn(value);
}

/** The fields a write sets: every non-system field present in `values` (undefined counts as absent: the column keeps its default). */
function writtenFields(collection: CollectionSchema, values: RecordValues): FieldSchema[] {
  return collection.fields.filter((field) => !field.system && values[field.name] !== undefined);
}

/** Most statement shapes named per collection and kind (insert column sets): past it, statements run unnamed. */
const MAX_NAMED_SHAPES = 16;

/**
 * The SQL text of one collection's statements, assembled once (when the collection is first used)
 * and reused with new bindings: the select list, the table, the fixed statements, and the insert
 * shapes, which carry a prepared-statement name (a named insert is parsed and planned once per
 * connection; a view by id gains nothing from it, so views run unnamed). Columns are listed, not
 * `*`, so a prepared statement's result type does not change when another process adds a column.
 * Beside them, from the same column list, the reader of the rows those statements return.
 */
class CollectionSql {
  /** `"r"."id", "r"."title", …` */
  readonly selectList: string;
  /** `"id", "title", …` (RETURNING of inserts and updates) */
  readonly returning: string;
  /** ` FROM "posts" AS "r"` */
  readonly from: string;
  /** `SELECT <list> FROM "posts" AS "r"` */
  readonly selectFrom: string;
  /** `SELECT count(*)::int AS n FROM "posts" AS "r"` */
  readonly countFrom: string;
  /** `SELECT <list> FROM "posts" AS "r" WHERE "r"."id" = ?` */
  readonly byId: string;
  readonly existingIds: string;
  /** A row into record values, as one object literal (lib/schema/object-shape.ts): rows are the hottest objects there are. */
  readonly readRow: (row: Record<string, unknown>) => RecordValues;
  /** `"id", "cover", …`: the id and the file columns, what removing a deleted record's files reads. */
  readonly returningFiles: string;
  readonly readFiles: (row: Record<string, unknown>) => RecordValues;
  private readonly shapes = new Map<string, { sql: string; name?: string }>();

  constructor(readonly collection: CollectionSchema) {
    const table = `${q(collection.table)} AS ${q(RECORD_ALIAS)}`;
    this.selectList = collection.fields.map((field) => aliased(field.column)).join(', ');
    this.returning = columnList(collection.fields);
    this.from = ` FROM ${table}`;
    this.selectFrom = `SELECT ${this.selectList}${this.from}`;
    this.countFrom = `SELECT count(*)::int AS n FROM ${table}`;
    this.byId = `${this.selectFrom} WHERE ${aliased('id')} = ?`;
    this.existingIds = `SELECT ${q('id')} FROM ${q(collection.table)} WHERE ${q('id')} = ANY(?::text[])`;
    this.readRow = rowReader(collection.fields);
    const fileKeys = collection.fields.filter((field) => field.name === 'id' || field.type === 'file');
    this.returningFiles = columnList(fileKeys);
    this.readFiles = rowReader(fileKeys);
  }

  /** A statement text of a shape keyed by `key`, made by `build` the first time; named while there are few shapes. */
  shape(key: string, build: () => string): { sql: string; name?: string } {
    let found = this.shapes.get(key);
    if (!found) {
      const sql = build();
      found = this.shapes.size < MAX_NAMED_SHAPES ? { sql, name: preparedName(sql) } : { sql };
      if (this.shapes.size < MAX_NAMED_SHAPES * 4) this.shapes.set(key, found);
    }
    return found;
  }
}

/** `"id", "title", …`: the quoted columns of `fields`. */
function columnList(fields: readonly FieldSchema[]): string {
  return fields.map((field) => q(field.column)).join(', ');
}

/** The reader of rows holding the columns of `fields` into their record values, as one object literal. */
function rowReader(fields: readonly FieldSchema[]): (row: Record<string, unknown>) => RecordValues {
  return compileObjectShape(fields.map((field) => ({ key: field.name, from: field.column, via: field.storage })), READ_STORAGE);
}

const sqlOf = memoizePerObject((collection: CollectionSchema) => new CollectionSql(collection));

/** The column alias of a row's version (selectVersioned): a space, so no field's column can be named so. */
const VERSION_ALIAS = 'row version';

/** `UPDATE … SET <values>, updated = clock_timestamp() WHERE r.id = ? [AND <where>] RETURNING …` of update and updateVersion. */
function updateStatement(collection: CollectionSchema, id: string, values: RecordValues, where: readonly SqlFragment[] = []): Statement {
  const fields = writtenFields(collection, values);
  const sets = fields.map((f) => `${q(f.column)} = ?`);
  sets.push(`${q('updated')} = clock_timestamp()`);
  const bindings: unknown[] = fields.map((f) => columnValue(f, values[f.name]));
  bindings.push(id);
  const sql = `UPDATE ${q(collection.table)} AS ${q(RECORD_ALIAS)} SET ${sets.join(', ')} WHERE ${aliased('id')} = ?${whereClause(where, bindings, ' AND ')} RETURNING ${sqlOf(collection).returning}`;
  return { sql, bindings };
}

/** ` WHERE (a) AND (b)` (or nothing) and the fragments' bindings appended to `bindings`. */
function whereClause(where: readonly SqlFragment[], bindings: unknown[], leading = ' WHERE '): string {
  if (where.length === 0) return '';
  let text = '';
  for (const fragment of where) {
    text += text === '' ? `${leading}(${fragment.sql})` : ` AND (${fragment.sql})`;
    for (const binding of fragment.bindings) bindings.push(binding);
  }
  return text;
}

/** `SELECT <list> FROM "posts" AS "r"`, the fixed text, or with `extra`'s columns after the list (their bindings appended to `bindings`). */
function selectFrom(collection: CollectionSchema, extra: ExtraColumns | undefined, bindings: unknown[]): string {
  const statements = sqlOf(collection);
  if (extra === undefined) return statements.selectFrom;
  for (const binding of extra.columns.bindings) bindings.push(binding);
  return `SELECT ${statements.selectList}, ${extra.columns.sql}${statements.from}`;
}

/** The quoted `r.<column>` of a record statement. */
function aliased(column: string): string {
  return `${q(RECORD_ALIAS)}.${q(column)}`;
}

/**
 * A relation a create must find before it inserts: the target collection, and the ids (one for
 * a single relation, several for a multiple one).
 */
export interface RelationRequirement {
  target: CollectionSchema;
  ids: readonly string[];
  multiple: boolean;
}

/**
 * All record SQL. Conditions arrive as compiled fragments referring to RECORD_ALIAS; values only
 * ever travel as bindings. The text around them is assembled by hand (no query builder; the
 * fixed parts once per collection, CollectionSql) and sent through Knex's client
 * (run-statement.ts), so Knex stays the pool and the statement bounds. A store made inside
 * `transaction()` runs every call on that transaction's connection.
 */
export class RecordStore {
  constructor(
    private readonly db: Knex,
    /** What bounds every statement of this store (lib/db/statements/statement-bounds.ts); none: unbounded (start-up, the sweep). */
    readonly context?: DatabaseContext,
    /** The connection of this store's own transaction (transaction()), which every statement then uses. */
    private readonly held?: HeldConnection,
  ) {}

  /** A store whose statements go where `runner`'s go (its transaction's connection, or the pool under its bounds). */
  static on(runner: StatementRunner): RecordStore {
    return new RecordStore(runner.db, runner.context, runner.held);
  }

  /** This store for one unit of work: every statement bounded by `context`. */
  within(context: DatabaseContext): RecordStore {
    return new RecordStore(this.db, context);
  }

  /**
   * Runs `work` in one transaction, recordbase's own on one connection (runTransaction), bounded by
   * this store's context (none: unbounded, as at start-up and in the sweep); it commits when `work`
   * resolves and rolls back when it throws. Units join their transaction rather than open another,
   * so a store of a transaction (a migration's among them) never opens one.
   */
  transaction<T>(work: (store: RecordStore) => Promise<T>): Promise<T> {
    if (this.held !== undefined) throw new Error('recordbase: a store of a transaction cannot open another; join it instead');
    const { db, context } = this;
    return runTransaction(db, context, (held) => work(new RecordStore(db, context, held)));
  }

  /** One statement on this store's connection: its transaction's, or one from the pool. */
  private run(statement: Statement): Promise<StatementResult> {
    return runStatement(this.db, statement, this.context, this.held);
  }

  private async rows(collection: CollectionSchema, statement: Statement, extra?: ExtraColumns): Promise<RecordValues[]> {
    const { rows } = await this.run(statement);
    const read = sqlOf(collection).readRow;
    const out: RecordValues[] = new Array(rows.length);
    for (let i = 0; i < rows.length; i++) out[i] = read(rows[i]!);
    extra?.readRows(out, rows);
    return out;
  }

  /** One page of records matching every `where` fragment, in `orderBy` order. */
  async selectPage(options: { collection: CollectionSchema; where: readonly SqlFragment[]; orderBy: SqlFragment; limit: number; offset: number; extra?: ExtraColumns }): Promise<RecordValues[]> {
    const bindings: unknown[] = [];
    let sql = selectFrom(options.collection, options.extra, bindings) + whereClause(options.where, bindings);
    sql += ` ORDER BY ${options.orderBy.sql} LIMIT ?`;
    for (const binding of options.orderBy.bindings) bindings.push(binding);
    bindings.push(options.limit);
    if (options.offset > 0) {
      sql += ' OFFSET ?';
      bindings.push(options.offset);
    }
    return this.rows(options.collection, { sql, bindings }, options.extra);
  }

  /**
   * The rows of one read statement assembled elsewhere from compiled fragments (an aggregate:
   * lib/records/aggregate-records.ts), as the driver gives them, under this store's bounds.
   */
  async selectRows(statement: { sql: string; bindings: unknown[] }): Promise<Record<string, unknown>[]> {
    const { rows } = await this.run(statement);
    return rows;
  }

  /** How many records match every `where` fragment. */
  async count(options: { collection: CollectionSchema; where: readonly SqlFragment[] }): Promise<number> {
    const bindings: unknown[] = [];
    const sql = sqlOf(options.collection).countFrom + whereClause(options.where, bindings);
    const { rows } = await this.run({ sql, bindings });
    return Number(rows[0]?.n ?? 0);
  }

  /**
   * The record with `id` that also matches `where`, or undefined. With `lock`, the row is locked
   * until the transaction ends (FOR UPDATE), which is what keeps concurrent updates from losing
   * one another.
   */
  async selectById(options: { collection: CollectionSchema; id: string; where?: readonly SqlFragment[]; lock?: boolean; extra?: ExtraColumns }): Promise<RecordValues | undefined> {
    const { extra } = options;
    const bindings: unknown[] = [];
    let sql = extra === undefined ? sqlOf(options.collection).byId : `${selectFrom(options.collection, extra, bindings)} WHERE ${aliased('id')} = ?`;
    bindings.push(options.id);
    sql += whereClause(options.where ?? [], bindings, ' AND ');
    if (options.lock) sql += ` FOR UPDATE OF ${q(RECORD_ALIAS)}`;
    const rows = await this.rows(options.collection, { sql, bindings }, extra);
    return rows[0];
  }

  /**
   * Records whose id is in `ids` and that match `where` (one query, for expansion). With `limit`,
   * at most that many, in no particular order: expansion asks for one more than it may add, to
   * learn that it would go over without reading everything. The ids are bound as one text[]
   * parameter: one placeholder however many there are (one per id stops at the protocol's 65,535
   * parameters, and a bulk delete may select more records than that).
   */
  async selectByIds(options: { collection: CollectionSchema; ids: readonly string[]; where?: readonly SqlFragment[]; limit?: number; extra?: ExtraColumns }): Promise<RecordValues[]> {
    if (options.ids.length === 0) return [];
    const bindings: unknown[] = [];
    let sql = `${selectFrom(options.collection, options.extra, bindings)} WHERE ${aliased('id')} = ANY(?::text[])`;
    bindings.push([...options.ids]);
    sql += whereClause(options.where ?? [], bindings, ' AND ');
    if (options.limit !== undefined) {
      sql += ' LIMIT ?';
      bindings.push(options.limit);
    }
    return this.rows(options.collection, { sql, bindings }, options.extra);
  }

  /** The id and `columns` of each record of `ids` that exists (in no particular order): what is evaluated on records already at hand. */
  async selectColumnsByIds(collection: CollectionSchema, ids: readonly string[], columns: SqlFragment): Promise<Record<string, unknown>[]> {
    if (ids.length === 0) return [];
    const sql = `SELECT ${aliased('id')}, ${columns.sql}${sqlOf(collection).from} WHERE ${aliased('id')} = ANY(?::text[])`;
    const { rows } = await this.run({ sql, bindings: [...columns.bindings, [...ids]] });
    return rows;
  }

  /** The subset of `ids` that exist in the collection (relation checks). */
  async selectExistingIds(collection: CollectionSchema, ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const { rows } = await this.run({ sql: sqlOf(collection).existingIds, bindings: [[...ids]] });
    return new Set(rows.map((r) => r.id as string));
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
    extra?: ExtraColumns;
  }): Promise<RecordValues[]> {
    if (options.ids.length === 0) return [];
    const column = aliased(options.field.column);
    const where = options.where ?? [];
    const bindings: unknown[] = [];
    let sql = selectFrom(options.collection, options.extra, bindings) + whereClause(where, bindings);
    sql += `${where.length === 0 ? ' WHERE ' : ' AND '}${options.field.multiple ? `jsonb_exists_any(${column}, ?::text[])` : `${column} = ANY(?::text[])`}`;
    bindings.push([...options.ids]);
    if (options.lock) sql += ` FOR UPDATE OF ${q(RECORD_ALIAS)}`;
    else sql += ` ORDER BY ${aliased('created')} ASC, ${aliased('id')} ASC`;
    if (options.limit !== undefined) {
      sql += ' LIMIT ?';
      bindings.push(options.limit);
    }
    return this.rows(options.collection, { sql, bindings }, options.extra);
  }

  /** Inserts a record (created and updated set by the database) and returns it as stored. */
  async insert(collection: CollectionSchema, values: RecordValues): Promise<RecordValues> {
    const inserted = await this.insertIfRelated(collection, values, []);
    return inserted!;
  }

  /**
   * Inserts a record only if every relation requirement holds (each target id exists), in one
   * statement: `INSERT … SELECT <values> WHERE EXISTS (…) RETURNING …`. Resolves undefined when
   * a requirement failed and nothing was inserted (the caller finds out which, and says so).
   */
  async insertIfRelated(collection: CollectionSchema, values: RecordValues, relations: readonly RelationRequirement[]): Promise<RecordValues | undefined> {
    const statements = sqlOf(collection);
    const fields = writtenFields(collection, values);
    const key = `insert:${fields.map((f) => f.column).join(',')}|${relations.map((r) => `${r.target.table}${r.multiple ? '[]' : ''}`).join(',')}`;
    const { sql, name } = statements.shape(key, () => {
      const columns = [...fields.map((f) => q(f.column)), q('id'), q('created'), q('updated')].join(', ');
      if (relations.length === 0) {
        return `INSERT INTO ${q(collection.table)} (${columns}) VALUES (${[...fields.map(() => '?'), '?', 'now()', 'now()'].join(', ')}) RETURNING ${statements.returning}`;
      }
      // A collection may have no field of its own: then only the id and the dates are written.
      const selected = [...fields.map((f) => `?::${STORAGE_KINDS[f.storage].bindCast}`), '?::text', 'now()', 'now()'].join(', ');
      const checks = relations.map((r) =>
        r.multiple
          ? `(SELECT count(*) FROM ${q(r.target.table)} WHERE ${q('id')} = ANY(?::text[])) = ?::int`
          : `EXISTS (SELECT 1 FROM ${q(r.target.table)} WHERE ${q('id')} = ?::text)`,
      );
      return `INSERT INTO ${q(collection.table)} (${columns}) SELECT ${selected} WHERE ${checks.join(' AND ')} RETURNING ${statements.returning}`;
    });
    const bindings: unknown[] = fields.map((f) => columnValue(f, values[f.name]));
    bindings.push(values.id);
    for (const relation of relations) {
      if (relation.multiple) {
        const ids = [...new Set(relation.ids)];
        bindings.push(ids, ids.length);
      } else bindings.push(relation.ids[0]);
    }
    const rows = await this.rows(collection, { sql, bindings, name });
    return rows[0];
  }

  /** Writes `values` over the record (bumping `updated`) and returns it as stored. */
  async update(collection: CollectionSchema, id: string, values: RecordValues): Promise<RecordValues> {
    const rows = await this.rows(collection, updateStatement(collection, id, values));
    return rows[0]!;
  }

  /**
   * The record with `id` matching `where`, unlocked, with its row version (`xmin`: the
   * transaction that wrote this version), for updateVersion. Undefined when nothing matched.
   */
  async selectVersioned(options: { collection: CollectionSchema; id: string; where: readonly SqlFragment[] }): Promise<{ record: RecordValues; version: string } | undefined> {
    const statements = sqlOf(options.collection);
    const bindings: unknown[] = [options.id];
    const sql = `SELECT ${statements.selectList}, ${aliased('xmin')}::text AS "${VERSION_ALIAS}" FROM ${q(options.collection.table)} AS ${q(RECORD_ALIAS)} WHERE ${aliased('id')} = ?${whereClause(options.where, bindings, ' AND ')}`;
    const { rows } = await this.run({ sql, bindings });
    const row = rows[0];
    return row === undefined ? undefined : { record: statements.readRow(row), version: String(row[VERSION_ALIAS]) };
  }

  /**
   * Writes `values` over the record as update does, only if it is still the version selectVersioned
   * read and matches `where` (evaluated on that row): one autocommit statement instead of a
   * transaction around a locked read. Undefined when it changed meanwhile or `where` failed.
   */
  async updateVersion(collection: CollectionSchema, id: string, values: RecordValues, expected: { version: string; where: readonly SqlFragment[] }): Promise<RecordValues | undefined> {
    const rows = await this.rows(collection, updateStatement(collection, id, values, [{ sql: `${aliased('xmin')} = ?::xid`, bindings: [expected.version] }, ...expected.where]));
    return rows[0];
  }

  /**
   * Deletes the record with `id` if it matches `where`, in one statement, and returns it as it
   * was (undefined when nothing matched): the whole record, or with `returning: 'files'` only its
   * id and file fields (what removing its files reads; the rest is neither sent nor decoded). The
   * conditions are evaluated on the row the statement deletes, as on a row locked by selectById (a
   * concurrent update is waited for, then checked).
   */
  async deleteById(options: { collection: CollectionSchema; id: string; where: readonly SqlFragment[]; returning: 'record' | 'files' }): Promise<RecordValues | undefined> {
    const { collection } = options;
    const statements = sqlOf(collection);
    const files = options.returning === 'files';
    const bindings: unknown[] = [options.id];
    const sql = `DELETE FROM ${q(collection.table)} AS ${q(RECORD_ALIAS)} WHERE ${aliased('id')} = ?${whereClause(options.where, bindings, ' AND ')} RETURNING ${files ? statements.returningFiles : statements.returning}`;
    const { rows } = await this.run({ sql, bindings });
    const row = rows[0];
    if (row === undefined) return undefined;
    return files ? statements.readFiles(row) : statements.readRow(row);
  }

  /** Deletes records by id; returns how many went. */
  async deleteByIds(collection: CollectionSchema, ids: readonly string[]): Promise<number> {
    if (ids.length === 0) return 0;
    const result = await this.run({ sql: `DELETE FROM ${q(collection.table)} WHERE ${q('id')} = ANY(?::text[])`, bindings: [[...ids]] });
    return result.rowCount ?? 0;
  }

  /** The records matching every `where` fragment, locked until the transaction ends (bulk delete's selection). */
  async selectLocked(options: { collection: CollectionSchema; where: readonly SqlFragment[] }): Promise<RecordValues[]> {
    const bindings: unknown[] = [];
    const sql = `${sqlOf(options.collection).selectFrom}${whereClause(options.where, bindings)} FOR UPDATE OF ${q(RECORD_ALIAS)}`;
    return this.rows(options.collection, { sql, bindings });
  }

  /**
   * Whether a record that does not exist yet, holding `values` (every field; `created` and
   * `updated` are now), meets each of `checks`, in one statement: a create rule and the rules of
   * the fields it sends (lib/records/field-write-rules.ts) are checked on the row the write would
   * insert, before anything is written. The row is built from bound values with their column
   * types, so a rule reads it exactly as it would read the stored row.
   */
  async checkNewRow(options: { collection: CollectionSchema; values: RecordValues; checks: readonly (readonly SqlFragment[])[] }): Promise<boolean[]> {
    const bindings: unknown[] = [];
    const outcomes = outcomeList(options.checks, bindings);
    const columns: string[] = [];
    for (const field of options.collection.fields) {
      if (field.name === 'created' || field.name === 'updated') {
        columns.push(`now() AS ${q(field.column)}`);
        continue;
      }
      const value = options.values[field.name];
      columns.push(`?::${STORAGE_KINDS[field.storage].bindCast} AS ${q(field.column)}`);
      bindings.push(columnValue(field, value) ?? null);
    }
    const sql = `SELECT ${outcomes} FROM (SELECT ${columns.join(', ')}) AS ${q(RECORD_ALIAS)}`;
    const { rows } = await this.run({ sql, bindings });
    return readOutcomes(rows[0], options.checks.length);
  }

  /**
   * Whether the stored record with `id` meets each of `checks` (an update's field rules, on the
   * row as it is before the write, as the update rule reads it); undefined when there is no such
   * row. Inside the update's transaction, after the row is locked.
   */
  async checkRow(options: { collection: CollectionSchema; id: string; checks: readonly (readonly SqlFragment[])[] }): Promise<boolean[] | undefined> {
    const bindings: unknown[] = [];
    const outcomes = outcomeList(options.checks, bindings);
    bindings.push(options.id);
    const sql = `SELECT ${outcomes} FROM ${q(options.collection.table)} AS ${q(RECORD_ALIAS)} WHERE ${aliased('id')} = ?`;
    const { rows } = await this.run({ sql, bindings });
    return rows[0] === undefined ? undefined : readOutcomes(rows[0], options.checks.length);
  }
}

/** `COALESCE((a) AND (b), FALSE) AS "0", …`: one column per check (a NULL outcome fails, `[]` holds), its bindings appended. */
function outcomeList(checks: readonly (readonly SqlFragment[])[], bindings: unknown[]): string {
  if (checks.length === 0) return 'TRUE AS "0"';
  return checks
    .map((conditions, i) => {
      if (conditions.length === 0) return `TRUE AS "${i}"`;
      return `COALESCE(${whereClause(conditions, bindings, '')}, FALSE) AS "${i}"`;
    })
    .join(', ');
}

/** The outcomes outcomeList selected, in order. */
function readOutcomes(row: Record<string, unknown> | undefined, count: number): boolean[] {
  return Array.from({ length: count }, (_, i) => row?.[String(i)] === true);
}
