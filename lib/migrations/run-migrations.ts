import type { Knex } from 'knex';
import {
  forgetAppliedMigration,
  inSchemaLockedTransaction,
  isMigrationApplied,
  readAppliedMigrations,
  readSchemaBefore,
  recordAppliedMigration,
  type AppliedMigration,
} from '../db/schema/migration-records.js';
import { readAppliedCollections } from '../db/schema/reshape-collections.js';
import { readDatabaseState } from '../db/schema/sync-database-schema.js';
import { StatementRunner } from '../db/statements/statement-runner.js';
import { RecordbaseError, SchemaError } from '../errors.js';
import { findRollbackProblems } from '../schema/plan-migration.js';
import { loadMigrations, type LoadedMigration } from './load-migrations.js';
import type { MigrationsOption } from './migration-definition.js';
import { startMigration, type MigrationRun } from './migration-context.js';
import type { MigrationServices } from './transaction-records.js';

/**
 * Applies the migrations the database has not applied yet, in name order, each in its own
 * transaction under the schema lock with its row in MIGRATIONS_TABLE: the migration and its row
 * commit together or not at all. Instances starting together queue on the lock, and each looks
 * again once it holds it, so every migration is applied once, by one of them. The first failure
 * stops the run: its transaction rolls back, and the SchemaError names the migration and the
 * cause. Answers the names applied here.
 */
export async function applyPendingMigrations(db: Knex, options: { migrations: readonly LoadedMigration[]; services: MigrationServices }): Promise<string[]> {
  if (options.migrations.length === 0) return [];
  return applyPendingOn(new StatementRunner(db), { ...options, preview: false });
}

/** applyPendingMigrations on `runner` (a preview's transaction: each migration then runs under a savepoint of it). */
async function applyPendingOn(runner: StatementRunner, options: { migrations: readonly LoadedMigration[]; services: MigrationServices; preview: boolean }): Promise<string[]> {
  const done = new Set((await readAppliedMigrations(runner)).map((row) => row.name));
  const applied: string[] = [];
  for (const migration of options.migrations) {
    if (done.has(migration.name)) continue;
    const ran = await runInTransaction(runner, { migration, services: options.services, direction: 'up', preview: options.preview });
    if (ran) applied.push(migration.name);
  }
  return applied;
}

/** Thrown inside a preview's transaction so that it rolls back. */
const ROLLBACK = Symbol('rollback');

/**
 * `recordbase migrate --dry-run`: the pending migrations run as a start would run them, then
 * `inspect` (the sync's plan) reads the database they leave, all in one transaction under the
 * schema lock that is then rolled back. Files the migrations' `records()` wrote are removed, the
 * ones they replaced kept. A migration that fails fails the preview, with the error a start gives.
 */
export async function previewPendingMigrations<T>(
  db: Knex,
  options: { migrations: readonly LoadedMigration[]; services: MigrationServices; inspect(trx: StatementRunner, applied: readonly string[]): Promise<T> },
): Promise<T> {
  let result: { value: T } | undefined;
  try {
    await inSchemaLockedTransaction(new StatementRunner(db), async (trx) => {
      const applied = await applyPendingOn(trx, { ...options, preview: true });
      result = { value: await options.inspect(trx, applied) };
      throw ROLLBACK;
    });
  } catch (err) {
    if (err !== ROLLBACK) throw err;
  }
  return result!.value;
}

/**
 * Runs one migration's `up` (unless applied meanwhile) or `down`, with its row written or removed
 * in the same transaction. An `up` records the bookkeeping as it found it; a `down` is checked
 * against that record before its row goes. In a preview the outer transaction rolls back, so the
 * files its `records()` wrote are removed as for a rollback.
 */
async function runInTransaction(runner: StatementRunner, options: { migration: LoadedMigration; services: MigrationServices; direction: 'up' | 'down'; preview?: boolean }): Promise<boolean> {
  const { migration, direction } = options;
  let run: MigrationRun | undefined;
  try {
    const ran = await inSchemaLockedTransaction(runner, async (trx) => {
      if ((await isMigrationApplied(trx, migration.name)) !== (direction === 'down')) return false;
      run = await startMigration(trx, { name: migration.name, services: options.services, direction });
      if (direction === 'up') {
        const schemaBefore = await readAppliedCollections(trx);
        await migration.up(run.context);
        await recordAppliedMigration(trx, migration, schemaBefore);
      } else {
        await migration.down!(run.context);
        await checkRevertedSchema(trx, migration.name);
        await forgetAppliedMigration(trx, migration.name);
      }
      return true;
    });
    await run?.finish(options.preview === true ? 'rolled-back' : 'committed');
    return ran;
  } catch (err) {
    await run?.finish('rolled-back');
    throw Object.assign(new SchemaError(`migration "${migration.name}"${direction === 'down' ? ' (down)' : ''} failed and was rolled back, nothing of it applied: ${describeError(err)}`), { cause: err });
  }
}

/**
 * Refuses a `down` whose result the release before the migration could not start on
 * (findRollbackProblems: against the bookkeeping the migration's `up` found, recorded with it;
 * for a migration applied before that was recorded, the bookkeeping against the columns alone).
 */
async function checkRevertedSchema(trx: StatementRunner, name: string): Promise<void> {
  const before = await readSchemaBefore(trx, name);
  const applied = await readAppliedCollections(trx);
  const state = await readDatabaseState(trx, [...new Set([...(before?.keys() ?? []), ...applied.keys()])]);
  const problems = findRollbackProblems(before, state);
  if (problems.length === 0) return;
  throw new SchemaError(
    `the down leaves a schema the release before "${name}" cannot start on${before === undefined ? '' : ' (checked against the collections as its up found them)'}:\n${problems.map((p) => `- ${p}`).join('\n')}`,
  );
}

/** An error's message, with the field errors of a validation failure (a `records()` write) spelled out. */
function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const data = err instanceof RecordbaseError && Object.keys(err.data).length > 0 ? ` ${JSON.stringify(err.data)}` : '';
  return `${err.message}${data}`;
}

/** Names a warning lists at most. */
const MAX_NAMED_MIGRATIONS = 5;

/**
 * The one call of the router at start-up (before the schema sync): loads the option's migrations
 * and applies those pending, logging one line for each. Migrations the database has applied that
 * are not among them are warned of once: this code is older than the database (or their files
 * were removed), and its sync may meet a schema it cannot start on, or data it cannot see.
 */
export async function migrateAtStart(db: Knex, options: { option: MigrationsOption; services: MigrationServices }): Promise<void> {
  const migrations = await loadMigrations(options.option);
  const known = new Set(migrations.map((m) => m.name));
  const unknown = (await readAppliedMigrations(new StatementRunner(db))).filter((row) => !known.has(row.name)).map((row) => `"${row.name}"`);
  if (unknown.length > 0) {
    const listed = unknown.length > MAX_NAMED_MIGRATIONS ? [...unknown.slice(-MAX_NAMED_MIGRATIONS), `and ${unknown.length - MAX_NAMED_MIGRATIONS} more`] : unknown;
    options.services.logger.warn(
      `migrations: the database has applied ${listed.join(', ')}, which this code does not have: this code is older than the database (or their files were removed). ` +
        'Deploy the newer release, or revert them first with `recordbase migrate down`, run with the newer release\'s migrations (docs/collections.md, Rolling back a migration)',
    );
  }
  for (const name of await applyPendingMigrations(db, { migrations, services: options.services })) options.services.logger.info(`migrations: applied "${name}"`);
}

/** One migration as `recordbase migrate status` shows it. */
export interface MigrationStatus {
  readonly name: string;
  /** When it was applied; undefined while pending. */
  readonly appliedAt?: string;
  /** Applied, and its code changed since (the recorded checksum differs). */
  readonly changed: boolean;
  /** Applied, but no longer among the migrations (its file is gone). */
  readonly missing: boolean;
}

/** Every migration applied or pending, applied ones first in the order they were applied. Reads only. */
export async function describeMigrations(db: Knex, migrations: readonly LoadedMigration[]): Promise<MigrationStatus[]> {
  const applied = await readAppliedMigrations(new StatementRunner(db));
  const byName = new Map(migrations.map((m) => [m.name, m]));
  const done = new Set(applied.map((row) => row.name));
  return [
    ...applied.map((row) => ({ name: row.name, appliedAt: row.appliedAt, changed: byName.has(row.name) && byName.get(row.name)!.checksum !== row.checksum, missing: !byName.has(row.name) })),
    ...migrations.filter((m) => !done.has(m.name)).map((m) => ({ name: m.name, changed: false, missing: false })),
  ];
}

/**
 * Runs the `down` of the migration applied last and removes its row, in one transaction under
 * the schema lock. An Error when none is applied, when the last one is no longer among the
 * migrations, or when it has no `down`. Answers its name.
 */
export async function revertLastMigration(db: Knex, options: { migrations: readonly LoadedMigration[]; services: MigrationServices }): Promise<string> {
  const runner = new StatementRunner(db);
  const last: AppliedMigration | undefined = (await readAppliedMigrations(runner)).at(-1);
  if (last === undefined) throw new Error('no migration has been applied to this database');
  const migration = options.migrations.find((m) => m.name === last.name);
  if (migration === undefined) throw new Error(`the last migration applied, "${last.name}", is not among the migrations (its file is gone); restore it to run its down`);
  if (migration.down === undefined) throw new Error(`migration "${last.name}" has no down; write one, or undo it in a new migration`);
  if (!(await runInTransaction(runner, { migration, services: options.services, direction: 'down' }))) throw new Error(`migration "${last.name}" was reverted meanwhile by another process`);
  return last.name;
}
