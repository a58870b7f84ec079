import { types } from 'node:util';
import { quoteIdent as q, rawSql } from '../../sql-fragment.js';
import { waitForAdvisoryXactLock } from '../statements/advisory-lock.js';
import { timestamptzAsDate } from '../statements/run-host-sql.js';
import type { StatementRunner } from '../statements/statement-runner.js';
import { MIGRATIONS_TABLE, SCHEMA_SYNC_LOCK_KEY } from '../shared-names.js';

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
    await trx.query(rawSql(`CREATE TABLE IF NOT EXISTS ${q(MIGRATIONS_TABLE)} ("name" text PRIMARY KEY, "applied_at" timestamptz NOT NULL DEFAULT now(), "checksum" text NOT NULL DEFAULT '')`));
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

/** Records `name` as applied, in the migration's own transaction. */
export async function recordAppliedMigration(trx: StatementRunner, migration: { name: string; checksum: string }): Promise<void> {
  await trx.query({ sql: `INSERT INTO ${q(MIGRATIONS_TABLE)} ("checksum", "name") VALUES (?, ?)`, bindings: [migration.checksum, migration.name] });
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
