import type { Knex } from 'knex';
import type { CollectionSchema } from '../schema/collection-schema.js';
import type { Logger } from '../http/logger.js';
import { captureTriggerStatements, hasCaptureFunction, realtimeTableStatements } from '../realtime/outbox-schema.js';
import { META_TABLE, planMigration, SETTINGS_TABLE, type AppliedCollection, type DatabaseState, type MigrationPlan } from '../schema/plan-migration.js';

/** One constant key: every recordbase instance on a database serialises its schema sync on it. */
const MIGRATION_LOCK_KEY = 727_274_001;

/** Reads what the migration planner needs: columns, indexes and our bookkeeping rows. */
export async function readDatabaseState(db: Knex | Knex.Transaction, tables: readonly string[]): Promise<DatabaseState> {
  const columns: { table_name: string; column_name: string; data_type: string }[] = await db
    .select('table_name', 'column_name', 'data_type')
    .from('information_schema.columns')
    .whereRaw('table_schema = current_schema()')
    .whereIn('table_name', [...tables, META_TABLE, SETTINGS_TABLE]);
  const state: DatabaseState = { tables: new Map(), indexes: new Set(), applied: new Map(), metaTableExists: false, settingsTableExists: false };
  for (const row of columns) {
    if (row.table_name === META_TABLE) {
      state.metaTableExists = true;
      continue;
    }
    if (row.table_name === SETTINGS_TABLE) {
      state.settingsTableExists = true;
      continue;
    }
    const table = state.tables.get(row.table_name) ?? new Map<string, string>();
    table.set(row.column_name, row.data_type);
    state.tables.set(row.table_name, table);
  }
  const indexes: { indexname: string }[] = await db.select('indexname').from('pg_indexes').whereRaw('schemaname = current_schema()');
  for (const row of indexes) state.indexes.add(row.indexname);
  if (state.metaTableExists) {
    const rows: { name: string; id: string; fields: AppliedCollection['fields'] }[] = await db.select('name', 'id', 'fields').from(META_TABLE);
    for (const row of rows) state.applied.set(row.name, { id: row.id, fields: row.fields });
  }
  return state;
}

/** The plan for the current database, without changing anything (`recordbase migrate --dry-run`). */
export async function planDatabaseSync(db: Knex, collections: readonly CollectionSchema[]): Promise<MigrationPlan> {
  return planMigration(collections, await readDatabaseState(db, collections.map((c) => c.table)));
}

/**
 * Brings the database up to date with the declared collections, in one transaction under an
 * advisory lock so that several instances starting together apply the plan once. Throws the
 * planner's SchemaError on an unsafe change, leaving the database untouched. With `realtime`
 * (the default) it also makes realtime's tables and capture function and installs the capture
 * triggers on every collection table (lib/realtime/outbox-schema.ts). Without, it leaves realtime
 * to the instances that serve it: where the capture function exists it installs the triggers on
 * this instance's collections too (a collection only this instance declares is captured for the
 * others), where it does not it creates nothing; and it removes nothing (issue 29 finding 11: one
 * instance with realtime off must not switch capture off for the others).
 */
export async function syncDatabaseSchema(
  db: Knex,
  collections: readonly CollectionSchema[],
  options: { realtime?: boolean; logger?: Pick<Logger, 'info'> } = {},
): Promise<MigrationPlan> {
  const realtime = options.realtime ?? true;
  const plan = await db.transaction(async (trx) => {
    await trx.raw('SELECT pg_advisory_xact_lock(?)', [MIGRATION_LOCK_KEY]);
    const plan = planMigration(collections, await readDatabaseState(trx, collections.map((c) => c.table)));
    for (const statement of plan.statements) await trx.raw(statement);
    for (const [name, applied] of plan.applied) {
      await trx
        .insert({ name, id: applied.id, fields: JSON.stringify(applied.fields), updated: trx.fn.now() })
        .into(META_TABLE)
        .onConflict('name')
        .merge();
    }
    const capture = realtime || (await hasCaptureFunction(trx));
    for (const statement of [...(realtime ? realtimeTableStatements() : []), ...(capture ? captureTriggerStatements(collections) : [])]) await trx.raw(statement);
    return plan;
  });
  if (!realtime) {
    options.logger?.info('realtime: this instance does not serve realtime (realtime: false); its writes still reach the subscribers of the instances that do');
  }
  return plan;
}
