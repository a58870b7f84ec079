import type { Knex } from 'knex';
import { StatementRunner } from './statement-runner.js';

/**
 * Takes the transaction-scoped advisory lock `key` if nobody holds it, without waiting. The lock
 * lives exactly as long as `trx`, so it is released on commit, rollback or a dropped connection,
 * whatever the pool does with the connection afterwards: no unlock to forget.
 */
export async function tryAdvisoryXactLock(trx: StatementRunner, key: number): Promise<boolean> {
  const rows = await trx.rows<{ locked: boolean }>({ sql: 'SELECT pg_try_advisory_xact_lock(?::bigint) AS locked', bindings: [key] });
  return rows[0]?.locked === true;
}

/**
 * Waits for the transaction-scoped advisory lock `key` and holds it until `trx` ends. A text key
 * (a prefix from shared-names.ts and an id: one lock per id) is hashed into the same 64-bit key
 * space as the numbered ones (`hashtextextended`).
 */
export async function waitForAdvisoryXactLock(trx: StatementRunner, key: number | string): Promise<void> {
  await trx.query({ sql: typeof key === 'number' ? 'SELECT pg_advisory_xact_lock(?::bigint)' : 'SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', bindings: [key] });
}

/**
 * True when the Knex pool has a single connection (always so for the embedded PGlite). A long
 * transaction there would hold up every other statement of the app, so long-running work must
 * not keep one open.
 */
export function hasSingleConnection(db: Knex): boolean {
  const pool = (db.client as { config?: { pool?: { max?: number } } }).config?.pool;
  return pool?.max === 1;
}

/** What `runWithTryAdvisoryLock` reports: `acquired: false` means another session held the lock and `work` never ran. */
export type TryLockOutcome<T> = { acquired: true; result: T } | { acquired: false };

/**
 * Runs `work` while holding the advisory lock `key`, or returns `{acquired: false}` at once when
 * another session holds it (several app instances on one database: one of them does the work).
 *
 * On a pool of several connections the lock is transaction-scoped and `work` gets that transaction, which is how
 * a lock stays tied to one pooled connection; the transaction only holds the lock (READ COMMITTED,
 * no writes), so keeping it open for a long walk does not hold back vacuum.
 *
 * On a single-connection Knex (PGlite, or a pool capped at one) a transaction would block every
 * other statement of the app for the whole run. There the only connection is the session, so a
 * session-level lock is taken on it and released at the end, and `work` gets the runner itself so
 * that the app's statements interleave with it. (Should the pool replace that connection meanwhile,
 * the lock is simply gone: the lock only avoids duplicate work, it is not what keeps files safe.)
 */
export async function runWithTryAdvisoryLock<T>(
  options: { runner: StatementRunner; key: number },
  work: (runner: StatementRunner) => Promise<T>,
): Promise<TryLockOutcome<T>> {
  const { runner, key } = options;
  if (!hasSingleConnection(runner.db)) {
    return runner.transaction(async (trx): Promise<TryLockOutcome<T>> => {
      if (!(await tryAdvisoryXactLock(trx, key))) return { acquired: false };
      return { acquired: true, result: await work(trx) };
    });
  }
  const taken = await runner.rows<{ locked: boolean }>({ sql: 'SELECT pg_try_advisory_lock(?::bigint) AS locked', bindings: [key] });
  if (taken[0]?.locked !== true) return { acquired: false };
  try {
    return { acquired: true, result: await work(runner) };
  } finally {
    await runner.query({ sql: 'SELECT pg_advisory_unlock(?::bigint)', bindings: [key] }).catch(() => undefined);
  }
}
