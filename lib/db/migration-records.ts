import { types } from 'node:util';
import type { Knex } from 'knex';
import { quoteIdent as q } from '../sql-fragment.js';
import { waitForAdvisoryXactLock } from './advisory-lock.js';
import { StatementRunner } from './statement-runner.js';
import { MIGRATIONS_TABLE, SCHEMA_SYNC_LOCK_KEY } from './shared-names.js';

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
export async function inSchemaLockedTransaction<T>(db: Knex, work: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  return db.transaction(async (trx) => {
    await waitForAdvisoryXactLock(new StatementRunner(trx), SCHEMA_SYNC_LOCK_KEY);
    await trx.raw(`CREATE TABLE IF NOT EXISTS ${q(MIGRATIONS_TABLE)} ("name" text PRIMARY KEY, "applied_at" timestamptz NOT NULL DEFAULT now(), "checksum" text NOT NULL DEFAULT '')`);
    return work(trx);
  });
}

/** The migrations applied to the database, oldest first; none where the table does not exist yet (reading creates nothing). */
export async function readAppliedMigrations(db: Knex | Knex.Transaction): Promise<AppliedMigration[]> {
  const exists: { rows: { found: boolean }[] } = await db.raw(`SELECT to_regclass(format('%I.%I', current_schema(), ?::text)) IS NOT NULL AS "found"`, [MIGRATIONS_TABLE]);
  if (exists.rows[0]?.found !== true) return [];
  const rows: { name: string; applied_at: unknown; checksum: string }[] = await db.select('name', 'applied_at', 'checksum').from(MIGRATIONS_TABLE).orderBy([{ column: 'applied_at' }, { column: 'name' }]);
  return rows.map((row) => ({ name: row.name, appliedAt: toIsoString(row.applied_at), checksum: row.checksum }));
}

/** Whether `name` is applied, read inside the locked transaction (another instance may have applied it a moment ago). */
export async function isMigrationApplied(trx: Knex.Transaction, name: string): Promise<boolean> {
  const row: unknown = await trx.first('name').from(MIGRATIONS_TABLE).where({ name });
  return row !== undefined;
}

/** Records `name` as applied, in the migration's own transaction. */
export async function recordAppliedMigration(trx: Knex.Transaction, migration: { name: string; checksum: string }): Promise<void> {
  await trx.insert({ name: migration.name, checksum: migration.checksum }).into(MIGRATIONS_TABLE);
}

/** Removes the record of `name` (its `down` ran), in the same transaction as the `down`. */
export async function forgetAppliedMigration(trx: Knex.Transaction, name: string): Promise<void> {
  await trx.delete().from(MIGRATIONS_TABLE).where({ name });
}

/** The driver's timestamptz (a Date, maybe of the embedded engine's worker realm, or text) as ISO 8601. */
function toIsoString(value: unknown): string {
  return (types.isDate(value) ? value : new Date(String(value))).toISOString();
}
