import { types } from 'node:util';
import { quoteIdent as q, rawSql } from '../../sql-fragment.js';
import { waitForAdvisoryXactLock } from '../statements/advisory-lock.js';
import { timestamptzAsDate } from '../statements/run-host-sql.js';
import type { StatementRunner } from '../statements/statement-runner.js';
import { MIGRATIONS_TABLE, SCHEMA_SYNC_LOCK_KEY } from '../shared-names.js';
import type { AppliedCollection, SchemaBeforeMigration } from '../../schema/plan-migration.js';

/** A row of MIGRATIONS_TABLE: a migration applied to this database. */
export interface AppliedMigration {
  readonly name: string;
  /** When it committed (ISO 8601). */
  readonly appliedAt: string;
  /** The checksum of its code when it was applied (`recordbase migrate status` says when it changed since). */
  readonly checksum: string;
}

/**
 * Runs `work` in one transaction holding the schema lock (the lock of the schema sync, so no
 * instance syncs or migrates meanwhile), with MIGRATIONS_TABLE made first where it is missing.
 * The lock is released with the transaction: on commit, rollback or a lost connection.
 */
export async function inSchemaLockedTransaction<T>(runner: StatementRunner, work: (trx: StatementRunner) => Promise<T>): Promise<T> {
  return runner.transaction(async (trx) => {
    await waitForAdvisoryXactLock(trx, SCHEMA_SYNC_LOCK_KEY);
    await trx.query(rawSql(`CREATE TABLE IF NOT EXISTS ${q(MIGRATIONS_TABLE)} ("name" text PRIMARY KEY, "applied_at" timestamptz NOT NULL DEFAULT now(), "checksum" text NOT NULL DEFAULT '', "schema_before" jsonb)`));
    // A table made before the column existed (it holds NULL there: no schema recorded).
    if (!(await hasSchemaBeforeColumn(trx))) await trx.query(rawSql(`ALTER TABLE ${q(MIGRATIONS_TABLE)} ADD COLUMN IF NOT EXISTS "schema_before" jsonb`));
    return work(trx);
  });
}

/** The migrations applied to the database, oldest first; none where the table does not exist yet (reading creates nothing). */
export async function readAppliedMigrations(runner: StatementRunner): Promise<AppliedMigration[]> {
  const exists = await runner.rows<{ found: boolean }>({ sql: `SELECT to_regclass(format('%I.%I', current_schema(), ?::text)) IS NOT NULL AS "found"`, bindings: [MIGRATIONS_TABLE] });
  if (exists[0]?.found !== true) return [];
  const rows = await runner.rows<{ name: string; applied_at: unknown; checksum: string }>(rawSql(`SELECT "name", "applied_at", "checksum" FROM ${q(MIGRATIONS_TABLE)} ORDER BY "applied_at" ASC, "name" ASC`));
  return rows.map((row) => ({ name: row.name, appliedAt: toIsoString(row.applied_at), checksum: row.checksum }));
}

/** Whether `name` is applied, read inside the locked transaction (another instance may have applied it a moment ago). */
export async function isMigrationApplied(trx: StatementRunner, name: string): Promise<boolean> {
  const rows = await trx.rows({ sql: `SELECT "name" FROM ${q(MIGRATIONS_TABLE)} WHERE "name" = ? LIMIT 1`, bindings: [name] });
  return rows.length > 0;
}

async function hasSchemaBeforeColumn(runner: StatementRunner): Promise<boolean> {
  const rows = await runner.rows({
    sql: `SELECT 1 FROM "information_schema"."columns" WHERE table_schema = current_schema() AND "table_name" = ? AND "column_name" = 'schema_before'`,
    bindings: [MIGRATIONS_TABLE],
  });
  return rows.length > 0;
}

/**
 * Records `name` as applied, in the migration's own transaction, with `schemaBefore`: the
 * bookkeeping (META_TABLE's rows) as its `up` found it, which its `down` is checked against.
 */
export async function recordAppliedMigration(trx: StatementRunner, migration: { name: string; checksum: string }, schemaBefore: ReadonlyMap<string, AppliedCollection>): Promise<void> {
  await trx.query({
    sql: `INSERT INTO ${q(MIGRATIONS_TABLE)} ("checksum", "name", "schema_before") VALUES (?, ?, ?::jsonb)`,
    bindings: [migration.checksum, migration.name, JSON.stringify(Object.fromEntries(schemaBefore))],
  });
}

/** The bookkeeping as the `up` of the applied migration `name` found it; undefined where none was recorded (applied by an older recordbase). */
export async function readSchemaBefore(trx: StatementRunner, name: string): Promise<Map<string, AppliedCollection> | undefined> {
  const rows = await trx.rows<{ schema_before: Record<string, AppliedCollection> | null }>({ sql: `SELECT "schema_before" FROM ${q(MIGRATIONS_TABLE)} WHERE "name" = ?`, bindings: [name] });
  const recorded = rows[0]?.schema_before;
  return recorded === null || recorded === undefined ? undefined : new Map(Object.entries(recorded));
}

/** Schemas recorded before applied migrations, newest first, the last `limit` of them; none where nothing was recorded (reading creates nothing). */
export async function readSchemasBefore(runner: StatementRunner, limit: number): Promise<SchemaBeforeMigration[]> {
  const exists = await runner.rows<{ found: boolean }>({ sql: `SELECT to_regclass(format('%I.%I', current_schema(), ?::text)) IS NOT NULL AS "found"`, bindings: [MIGRATIONS_TABLE] });
  if (exists[0]?.found !== true || !(await hasSchemaBeforeColumn(runner))) return [];
  const rows = await runner.rows<{ name: string; schema_before: Record<string, AppliedCollection> }>({
    sql: `SELECT "name", "schema_before" FROM ${q(MIGRATIONS_TABLE)} WHERE "schema_before" IS NOT NULL ORDER BY "applied_at" DESC, "name" DESC LIMIT ?`,
    bindings: [limit],
  });
  return rows.map((row) => ({ migration: row.name, applied: new Map(Object.entries(row.schema_before)) }));
}

/** Removes the record of `name` (its `down` ran), in the same transaction as the `down`. */
export async function forgetAppliedMigration(trx: StatementRunner, name: string): Promise<void> {
  await trx.query({ sql: `DELETE FROM ${q(MIGRATIONS_TABLE)} WHERE "name" = ?`, bindings: [name] });
}

/** A timestamptz as the send path reads it (record-format text for a UTC one, else a Date) as ISO 8601. */
function toIsoString(value: unknown): string {
  const date = timestamptzAsDate(value);
  return (types.isDate(date) ? date : new Date(String(date))).toISOString();
}
