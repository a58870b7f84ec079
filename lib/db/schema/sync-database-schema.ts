import type { Knex } from 'knex';
import type { CollectionSchema } from '../../schema/collection-schema.js';
import type { Logger } from '../../logger.js';
import { quoteIdent as q, rawSql } from '../../sql-fragment.js';
import { describeUndeclared, planMigration, type AppliedCollection, type DatabaseState, type MigrationPlan } from '../../schema/plan-migration.js';
import { waitForAdvisoryXactLock } from '../statements/advisory-lock.js';
import { StatementRunner } from '../statements/statement-runner.js';
import { readSchemasBefore } from './migration-records.js';
import { syncViews } from './sync-views.js';
import { META_TABLE, SCHEMA_SYNC_LOCK_KEY, SETTINGS_TABLE } from '../shared-names.js';

/**
 * Statements a feature adds to the schema sync (realtime's tables, function and triggers: the
 * router passes `realtimeSchema`), so that the sync knows collections and nothing of the features
 * built on them. They run after the collections' plan, in the same transaction and under the same
 * lock, so several instances starting together apply them once.
 */
export interface SchemaAddition {
  /** What to run now, given the declared collections; may read the database first (`trx`, the sync's transaction). */
  statements(trx: StatementRunner, collections: readonly CollectionSchema[]): Promise<readonly string[]>;
  /** A line logged (`info`) once the sync has committed: what this instance's choice means for the others. */
  readonly notice?: string;
}

/** Our bookkeeping rows (the collections as last synced), or none where META_TABLE does not exist yet. */
export async function findAppliedCollections(runner: StatementRunner): Promise<Map<string, AppliedCollection> | undefined> {
  const found = await runner.rows<{ found: boolean }>({ sql: `SELECT to_regclass(format('%I.%I', current_schema(), ?::text)) IS NOT NULL AS "found"`, bindings: [META_TABLE] });
  if (found[0]?.found !== true) return undefined;
  const rows = await runner.rows<{ name: string; id: string; fields: AppliedCollection['fields'] }>(rawSql(`SELECT "name", "id", "fields" FROM ${q(META_TABLE)}`));
  return new Map(rows.map((row) => [row.name, { id: row.id, fields: row.fields }]));
}

/** Writes what recordbase records of one collection in META_TABLE (`undefined`: removes it). */
export async function writeAppliedCollection(runner: StatementRunner, name: string, applied: AppliedCollection | undefined): Promise<void> {
  if (applied === undefined) {
    await runner.query({ sql: `DELETE FROM ${q(META_TABLE)} WHERE "name" = ?`, bindings: [name] });
    return;
  }
  await runner.query({
    sql: `INSERT INTO ${q(META_TABLE)} ("fields", "id", "name", "updated") VALUES (?, ?, ?, CURRENT_TIMESTAMP)
      ON CONFLICT ("name") DO UPDATE SET "fields" = EXCLUDED."fields", "id" = EXCLUDED."id", "name" = EXCLUDED."name", "updated" = EXCLUDED."updated"`,
    bindings: [JSON.stringify(applied.fields), applied.id, name],
  });
}

/** Schemas before applied migrations the planner reads: the newest are the ones a rollback of the code meets. */
const SCHEMAS_BEFORE_READ = 20;

/**
 * Reads what the migration planner needs: columns, indexes, our bookkeeping rows and the schemas
 * recorded before the latest migrations. Besides the declared `tables`, the columns of the tables
 * the bookkeeping knows (a collection a newer release declares), so that the planner can name
 * what it leaves alone; no other table is looked at.
 */
export async function readDatabaseState(runner: StatementRunner, tables: readonly string[]): Promise<DatabaseState> {
  const applied = await findAppliedCollections(runner);
  const names = [...new Set([...tables, ...(applied?.keys() ?? [])])];
  const columns = await runner.rows<{ table_name: string; column_name: string; data_type: string }>({
    sql: 'SELECT "table_name", "column_name", "data_type" FROM "information_schema"."columns" WHERE table_schema = current_schema() AND "table_name" = ANY(?::text[])',
    bindings: [[...names, META_TABLE, SETTINGS_TABLE]],
  });
  const views = await runner.rows<{ table_name: string }>({
    sql: 'SELECT "table_name" FROM "information_schema"."views" WHERE table_schema = current_schema() AND "table_name" = ANY(?::text[])',
    bindings: [names],
  });
  const state: DatabaseState = {
    tables: new Map(),
    views: new Set(views.map((row) => row.table_name)),
    indexes: new Set(),
    applied: applied ?? new Map(),
    metaTableExists: applied !== undefined,
    settingsTableExists: false,
    before: await readSchemasBefore(runner, SCHEMAS_BEFORE_READ),
  };
  for (const row of columns) {
    if (state.views!.has(row.table_name)) continue;
    if (row.table_name === META_TABLE) continue;
    if (row.table_name === SETTINGS_TABLE) {
      state.settingsTableExists = true;
      continue;
    }
    const table = state.tables.get(row.table_name) ?? new Map<string, string>();
    table.set(row.column_name, row.data_type);
    state.tables.set(row.table_name, table);
  }
  const indexes = await runner.rows<{ indexname: string }>(rawSql('SELECT "indexname" FROM "pg_indexes" WHERE schemaname = current_schema()'));
  for (const row of indexes) state.indexes.add(row.indexname);
  return state;
}

/** Our own tables, created before any collection's: the applied definitions (read and written here) and the shared settings (settings-store.ts). */
function planBookkeeping(state: DatabaseState): string[] {
  const statements: string[] = [];
  if (!state.metaTableExists) {
    statements.push(`CREATE TABLE IF NOT EXISTS ${q(META_TABLE)} ("name" text PRIMARY KEY, "id" text NOT NULL, "fields" jsonb NOT NULL, "updated" timestamptz NOT NULL DEFAULT now())`);
  }
  if (!state.settingsTableExists) {
    statements.push(`CREATE TABLE IF NOT EXISTS ${q(SETTINGS_TABLE)} ("key" text PRIMARY KEY, "value" text NOT NULL, "created" timestamptz NOT NULL DEFAULT now())`);
  }
  return statements;
}

/**
 * The whole plan against a database state: our bookkeeping tables, then the collections' (the
 * planner in lib/schema/ knows collections and none of our table names). Pure, so that
 * `recordbase migrate --dry-run` can plan against a database not yet created.
 */
export function planSchemaSync(collections: readonly CollectionSchema[], state: DatabaseState): MigrationPlan {
  const plan = planMigration(collections, state);
  return { statements: [...planBookkeeping(state), ...plan.statements], applied: plan.applied, undeclared: plan.undeclared };
}

/** The plan for the current database, without changing anything (`recordbase migrate --dry-run`). */
export async function planDatabaseSync(db: Knex, collections: readonly CollectionSchema[]): Promise<MigrationPlan> {
  return planSchemaSync(collections, await readDatabaseState(new StatementRunner(db), collections.map((c) => c.table)));
}

/** What a sync did: the plan it applied (the views' DDL included), and the view collections completed with their fields. */
export interface SchemaSync extends MigrationPlan {
  /** Each view collection by name, with the fields its query's columns make (lib/schema/view-schema.ts). */
  readonly views: ReadonlyMap<string, CollectionSchema>;
}

/**
 * Brings the database up to date with the declared collections (tables, then the view
 * collections' views, which may read them) and then `additions`, in one transaction under an
 * advisory lock so that several instances starting together apply the plan once. Throws the
 * planner's SchemaError on an unsafe change, leaving the database untouched. What no declaration
 * names (a newer release's tables and columns) is left alone, and named in one `info` line.
 */
export async function syncDatabaseSchema(
  db: Knex,
  collections: readonly CollectionSchema[],
  options: { additions?: readonly SchemaAddition[]; logger?: Pick<Logger, 'info'> } = {},
): Promise<SchemaSync> {
  const additions = options.additions ?? [];
  const plan = await new StatementRunner(db).transaction(async (trx): Promise<SchemaSync> => {
    const plan = await applyTablePlan(trx, collections);
    const views = await syncViews(trx, collections);
    for (const addition of additions) for (const statement of await addition.statements(trx, collections)) await trx.query(rawSql(statement));
    return { statements: [...plan.statements, ...views.statements], applied: plan.applied, undeclared: plan.undeclared, views: views.views };
  });
  const leftAlone = describeUndeclared(plan.undeclared);
  if (leftAlone !== undefined) options.logger?.info(leftAlone);
  for (const addition of additions) if (addition.notice !== undefined) options.logger?.info(addition.notice);
  return plan;
}

/**
 * Under the schema lock (released with `trx`), the collections' tables and our bookkeeping as
 * declared: the plan against the database as it is, run, and each collection's record written.
 */
async function applyTablePlan(trx: StatementRunner, collections: readonly CollectionSchema[]): Promise<MigrationPlan> {
  await waitForAdvisoryXactLock(trx, SCHEMA_SYNC_LOCK_KEY);
  const plan = planSchemaSync(collections, await readDatabaseState(trx, collections.map((c) => c.table)));
  for (const statement of plan.statements) await trx.query(rawSql(statement));
  for (const [name, applied] of plan.applied) await writeAppliedCollection(trx, name, applied);
  return plan;
}

/** Thrown inside previewViewCollections' transaction so that it rolls back. */
const ROLLBACK = Symbol('rollback');

/**
 * The view collections with the fields a sync would give them, changing nothing: the sync's
 * tables and views are made inside a transaction that is then rolled back, so this answers on an
 * empty database too (`recordbase openapi` and `types` with view collections declared).
 */
export async function previewViewCollections(db: Knex, collections: readonly CollectionSchema[]): Promise<ReadonlyMap<string, CollectionSchema>> {
  if (!collections.some((c) => c.type === 'view')) return new Map();
  let views: ReadonlyMap<string, CollectionSchema> = new Map();
  try {
    await new StatementRunner(db).transaction(async (trx) => {
      await applyTablePlan(trx, collections);
      views = (await syncViews(trx, collections)).views;
      throw ROLLBACK;
    });
  } catch (err) {
    if (err !== ROLLBACK) throw err;
  }
  return views;
}

/**
 * Whether `collection`'s table has a column none of its fields declares: a newer release's field
 * during a rolling deploy, which may hold values this code cannot see (the file sweep keeps the
 * files of such a table's records). One catalogue query; asked at the moment, as a newer instance
 * may add a column at any time.
 */
export async function hasUndeclaredColumns(runner: StatementRunner, collection: CollectionSchema): Promise<boolean> {
  const rows = await runner.rows<{ column_name: string }>({ sql: 'SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ?', bindings: [collection.table] });
  return rows.some((row) => !collection.field(row.column_name));
}
