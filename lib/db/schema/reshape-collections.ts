import { isSearchColumnName, searchIndexName, shortenIdentifier, type CollectionSchema } from '../../schema/collection-schema.js';
import type { AppliedCollection } from '../../schema/plan-migration.js';
import { columnDefinitionOf, storageKindOfType } from '../../schema/storage-conversions.js';
import { STORAGE_KINDS, type StorageKind } from '../../schema/storage-kinds.js';
import { quoteIdent as q, rawSql } from '../../sql-fragment.js';
import { META_TABLE } from '../shared-names.js';
import type { StatementRunner } from '../statements/statement-runner.js';
import { findAppliedCollections, planSchemaSync, readDatabaseState, writeAppliedCollection } from './sync-database-schema.js';

/**
 * The SQL of the migration helpers (lib/migrations/migration-context.ts): each reshapes one
 * collection's table inside the migration's transaction and keeps what recordbase records about
 * it (META_TABLE, the indexes it named) in step, so that the schema sync that follows finds a
 * database it made itself. Names arrive checked; every identifier is quoted.
 */

/** A relation of the current schema, as the helpers see it. */
export interface TableShape {
  readonly kind: 'table' | 'view';
  /** Column name -> information_schema data_type. */
  readonly columns: ReadonlyMap<string, string>;
}

/** The table or view `name` of the current schema with its columns, or undefined. */
export async function readTableShape(trx: StatementRunner, name: string): Promise<TableShape | undefined> {
  const found = await trx.rows<{ relkind: string }>({
    sql: `SELECT c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relname = ? AND c.relkind IN ('r', 'p', 'v', 'm')`,
    bindings: [name],
  });
  const relkind = found[0]?.relkind;
  if (relkind === undefined) return undefined;
  const rows = await trx.rows<{ column_name: string; data_type: string }>({
    sql: 'SELECT "column_name", "data_type" FROM "information_schema"."columns" WHERE table_schema = current_schema() AND "table_name" = ?',
    bindings: [name],
  });
  return { kind: relkind === 'v' || relkind === 'm' ? 'view' : 'table', columns: new Map(rows.map((row) => [row.column_name, row.data_type])) };
}

/** What META_TABLE records of every collection; empty where recordbase never synced this database. */
export async function readAppliedCollections(trx: StatementRunner): Promise<Map<string, AppliedCollection>> {
  return (await findAppliedCollections(trx)) ?? new Map();
}

/** Changes the recorded fields of `collection`, where it is recorded. */
export async function updateAppliedFields(
  trx: StatementRunner,
  collection: string,
  change: (fields: AppliedCollection['fields']) => AppliedCollection['fields'],
): Promise<void> {
  const applied = (await readAppliedCollections(trx)).get(collection);
  if (applied !== undefined) await writeAppliedCollection(trx, collection, { id: applied.id, fields: change(applied.fields) });
}

/**
 * Records one field of `collection` (where the collection is recorded): replaces the record of
 * the field of that name, or adds it. What `changeFieldType` and `addField` leave behind.
 */
export async function recordAppliedField(trx: StatementRunner, collection: string, field: AppliedCollection['fields'][number]): Promise<void> {
  await updateAppliedFields(trx, collection, (fields) => (fields.some((f) => f.name === field.name) ? fields.map((f) => (f.name === field.name ? field : f)) : [...fields, field]));
}

/** Adds a column of storage kind `kind`, with the kind's default (as the schema sync adds one): every record holds the empty value. */
export async function addCollectionColumn(trx: StatementRunner, options: { table: string; column: string; kind: StorageKind }): Promise<void> {
  await trx.query(rawSql(`ALTER TABLE ${q(options.table)} ADD COLUMN ${q(options.column)} ${STORAGE_KINDS[options.kind].columnDdl}`));
}

/** One index of a table, as pg_index describes it (expression indexes left out). */
interface IndexShape {
  name: string;
  method: string;
  unique: boolean;
  columns: string[];
}

async function readIndexes(trx: StatementRunner, table: string): Promise<IndexShape[]> {
  const rows = await trx.rows<{ name: string; method: string; unique: boolean; columns: string; natts: number }>({
    sql: `SELECT i.relname AS "name", am.amname AS "method", ix.indisunique AS "unique", ix.indnatts AS "natts",
       to_json(ARRAY(SELECT a.attname::text FROM unnest(ix.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
         JOIN pg_attribute a ON a.attrelid = ix.indrelid AND a.attnum = k.attnum ORDER BY k.ord))::text AS "columns"
     FROM pg_index ix JOIN pg_class i ON i.oid = ix.indexrelid JOIN pg_am am ON am.oid = i.relam
     WHERE ix.indrelid = to_regclass(format('%I.%I', current_schema(), ?::text)) AND NOT ix.indisprimary`,
    bindings: [table],
  });
  return rows
    .map((row) => ({ name: row.name, method: row.method, unique: row.unique, columns: JSON.parse(row.columns) as string[], natts: row.natts }))
    .filter((index) => index.columns.length === index.natts);
}

/** The name the schema planner (lib/schema/plan-migration.ts) gives an index of this shape on `table`. */
function generatedIndexName(table: string, index: Pick<IndexShape, 'method' | 'unique'>, columns: readonly string[]): string {
  if (index.method === 'gin' && columns.length === 1 && isSearchColumnName(columns[0]!)) return searchIndexName(table, columns[0]!);
  if (index.method === 'gin' && columns.length === 1) return shortenIdentifier(`idx_${table}_${columns[0]}_gin`);
  if (!index.unique && columns.length === 2 && columns[0] === 'created' && columns[1] === 'id') return shortenIdentifier(`idx_${table}_created`);
  return shortenIdentifier(`idx_${table}_${columns.join('_')}${index.unique ? '_uniq' : ''}`);
}

/**
 * Renames the indexes recordbase made on a renamed table or column to the names the planner now
 * gives them, so that the sync does not build a second copy of each. `oldColumn` maps a column's
 * current name to the one it had. An index of any other name (the host's own) is left as it is.
 */
async function renameGeneratedIndexes(trx: StatementRunner, options: { table: string; oldTable: string; oldColumn(column: string): string }): Promise<void> {
  for (const index of await readIndexes(trx, options.table)) {
    const before = generatedIndexName(options.oldTable, index, index.columns.map(options.oldColumn));
    const after = generatedIndexName(options.table, index, index.columns);
    if (index.name === before && after !== before) await trx.query(rawSql(`ALTER INDEX ${q(before)} RENAME TO ${q(after)}`));
  }
}

/** Postgres's own name of a table's primary key, when it fits an identifier uncut. */
function primaryKeyName(table: string): string | undefined {
  const name = `${table}_pkey`;
  return Buffer.byteLength(name) <= 63 ? name : undefined;
}

/**
 * Renames a collection's table, its primary key and recordbase's indexes, and its record in
 * META_TABLE (the id stays: stored files are keyed by it). Triggers (realtime's capture), views
 * reading the table and the rows go with the table itself.
 */
export async function renameCollectionTable(trx: StatementRunner, from: string, to: string): Promise<void> {
  await trx.query(rawSql(`ALTER TABLE ${q(from)} RENAME TO ${q(to)}`));
  const [oldKey, newKey] = [primaryKeyName(from), primaryKeyName(to)];
  if (oldKey !== undefined && newKey !== undefined) {
    const found = await trx.rows({ sql: `SELECT 1 FROM pg_constraint WHERE conrelid = to_regclass(format('%I.%I', current_schema(), ?::text)) AND conname = ?`, bindings: [to, oldKey] });
    if (found.length > 0) await trx.query(rawSql(`ALTER TABLE ${q(to)} RENAME CONSTRAINT ${q(oldKey)} TO ${q(newKey)}`));
  }
  await renameGeneratedIndexes(trx, { table: to, oldTable: from, oldColumn: (column) => column });
  if ((await readTableShape(trx, META_TABLE)) !== undefined) {
    await trx.query({ sql: `UPDATE ${q(META_TABLE)} SET "name" = ?, "updated" = CURRENT_TIMESTAMP WHERE "name" = ?`, bindings: [to, from] });
  }
}

/** Renames a column, recordbase's indexes on it, and the field in META_TABLE. */
export async function renameCollectionColumn(trx: StatementRunner, options: { table: string; from: string; to: string }): Promise<void> {
  const { table, from, to } = options;
  await trx.query(rawSql(`ALTER TABLE ${q(table)} RENAME COLUMN ${q(from)} TO ${q(to)}`));
  await renameGeneratedIndexes(trx, { table, oldTable: table, oldColumn: (column) => (column === to ? from : column) });
  await updateAppliedFields(trx, table, (fields) => fields.map((field) => (field.name === from ? { ...field, name: to } : field)));
}

/** SQL text with each `?` kept as it is: the send path reads a bare `?` as a binding (the jsonb operator, a regex). */
function keepQuestionMarks(sql: string): string {
  return sql.replace(/\?/g, '\\?');
}

/** Stored values of `table` that fail `fits` (SQL), counted, with the smallest such record id. */
export async function countUnfitValues(trx: StatementRunner, table: string, fits: string): Promise<{ count: number; example?: string }> {
  const rows = await trx.rows<{ n: number; example: string | null }>(rawSql(`SELECT count(*)::int AS "n", min("id") AS "example" FROM ${q(table)} WHERE NOT COALESCE((${keepQuestionMarks(fits)}), false)`));
  const row = rows[0]!;
  return { count: Number(row.n), ...(row.example !== null ? { example: row.example } : {}) };
}

/** One page of a column's values in id order, after the id `after`, each as the kind's row reader reads it. */
export async function readColumnPage(trx: StatementRunner, options: { table: string; column: string; kind: StorageKind; after: string; limit: number }): Promise<{ id: string; value: unknown }[]> {
  const { table, column, kind } = options;
  const rows = await trx.rows<{ id: string; value: unknown }>({
    sql: `SELECT "id", ${q(column)} AS "value" FROM ${q(table)} WHERE "id" > ? ORDER BY "id" ASC LIMIT ?`,
    bindings: [options.after, options.limit],
  });
  return rows.map((row) => ({ id: row.id, value: STORAGE_KINDS[kind].readColumn(row.value) }));
}

/** Sets a column to its kind's empty value in the records `ids`. */
export async function clearColumnValues(trx: StatementRunner, options: { table: string; column: string; kind: StorageKind; ids: readonly string[] }): Promise<void> {
  const spec = STORAGE_KINDS[options.kind];
  await trx.query({ sql: `UPDATE ${q(options.table)} SET ${q(options.column)} = CAST(? AS ${spec.bindCast}) WHERE "id" = ANY(?::text[])`, bindings: [spec.toColumn(spec.emptyValue()), [...options.ids]] });
}

/**
 * Changes a column to the column of storage kind `to`, each value becoming `using` (SQL over the
 * row's columns; NULL becomes the kind's empty value where the kind refuses NULL). recordbase's
 * indexes on the column are dropped first (a partial index's predicate may not hold for the new
 * type); the schema sync that follows makes the ones the declaration asks for.
 */
export async function changeColumnKind(trx: StatementRunner, options: { table: string; column: string; to: StorageKind; using: string }): Promise<void> {
  const { table, column } = options;
  for (const index of await readIndexes(trx, table)) {
    if (index.columns.includes(column) && index.name === generatedIndexName(table, index, index.columns)) await trx.query(rawSql(`DROP INDEX ${q(index.name)}`));
  }
  const target = columnDefinitionOf(options.to);
  const c = q(column);
  const using = keepQuestionMarks(options.using);
  const value = target.defaultSql !== undefined && target.notNull ? `COALESCE((${using}), ${target.defaultSql})` : `(${using})`;
  await trx.query(rawSql(`ALTER TABLE ${q(table)} ALTER COLUMN ${c} DROP DEFAULT, ALTER COLUMN ${c} DROP NOT NULL, ALTER COLUMN ${c} TYPE ${target.type} USING ${value}`));
  const after = [...(target.defaultSql !== undefined ? [`ALTER COLUMN ${c} SET DEFAULT ${target.defaultSql}`] : []), ...(target.notNull ? [`ALTER COLUMN ${c} SET NOT NULL`] : [])];
  if (after.length > 0) await trx.query(rawSql(`ALTER TABLE ${q(table)} ${after.join(', ')}`));
}

/** Drops a column (its indexes go with it) and the field's record. A view that reads it makes Postgres refuse, naming the view. */
export async function dropCollectionColumn(trx: StatementRunner, table: string, column: string): Promise<void> {
  await trx.query(rawSql(`ALTER TABLE ${q(table)} DROP COLUMN ${q(column)}`));
  await updateAppliedFields(trx, table, (fields) => fields.filter((field) => field.name !== column));
}

/** Drops a collection's table (or a view collection's view) and its record. A view that reads it makes Postgres refuse, naming the view. */
export async function dropCollectionRelation(trx: StatementRunner, name: string, kind: TableShape['kind']): Promise<void> {
  await trx.query(rawSql(`DROP ${kind === 'view' ? 'VIEW' : 'TABLE'} ${q(name)}`));
  if ((await readTableShape(trx, META_TABLE)) !== undefined) await writeAppliedCollection(trx, name, undefined);
}

/**
 * Brings META_TABLE in line with the tables after a migration's own SQL (`m.sql`): a collection
 * whose table is gone loses its record, a field whose column is gone leaves it, and a field whose
 * column the SQL converted to the declared field's kind takes the declared type.
 */
export async function reconcileAppliedCollections(trx: StatementRunner, declared: readonly CollectionSchema[]): Promise<void> {
  for (const [name, applied] of await readAppliedCollections(trx)) {
    const shape = await readTableShape(trx, name);
    if (shape === undefined) {
      await writeAppliedCollection(trx, name, undefined);
      continue;
    }
    const collection = declared.find((c) => c.name === name);
    const fields = applied.fields.filter((field) => shape.columns.has(field.name)).map((field) => {
      const now = collection?.field(field.name);
      const dataType = shape.columns.get(field.name);
      const recordedKind = storageKindOfType(field.type, field.multiple);
      if (now === undefined || now.system || recordedKind === undefined || STORAGE_KINDS[recordedKind].dataType === dataType) return field;
      return STORAGE_KINDS[now.storage].dataType === dataType ? { name: field.name, type: now.type, multiple: now.multiple } : field;
    });
    if (JSON.stringify(fields) !== JSON.stringify(applied.fields)) await writeAppliedCollection(trx, name, { id: applied.id, fields });
  }
}

/**
 * Adds what the declarations add (tables, columns, indexes, their records) inside a migration's
 * transaction, as the schema sync would: `m.records()` then works on the collections as declared.
 * Throws the planner's SchemaError where a declaration cannot be applied yet. View collections wait
 * for the sync.
 */
export async function addDeclaredTables(trx: StatementRunner, declared: readonly CollectionSchema[]): Promise<void> {
  const tables = declared.filter((c) => c.type !== 'view');
  const plan = planSchemaSync(tables, await readDatabaseState(trx, tables.map((c) => c.table)));
  for (const statement of plan.statements) await trx.query(rawSql(statement));
  for (const [name, applied] of plan.applied) await writeAppliedCollection(trx, name, applied);
}
