import type { Knex } from 'knex';

/**
 * Takes the transaction-scoped advisory lock `key` if nobody holds it, without waiting. The lock
 * lives exactly as long as `trx`, so it is released on commit, rollback or a dropped connection,
 * whatever the pool does with the connection afterwards: no unlock to forget.
 */
export async function tryAdvisoryXactLock(trx: Knex.Transaction, key: number): Promise<boolean> {
  const result: { rows: { locked: boolean }[] } = await trx.raw('SELECT pg_try_advisory_xact_lock(?::bigint) AS locked', [key]);
  return result.rows[0]?.locked === true;
}

/**
 * Waits for the transaction-scoped advisory lock `key` and holds it until `trx` ends. A text key
 * (a prefix from shared-names.ts and an id: one lock per id) is hashed into the same 64-bit key
 * space as the numbered ones (`hashtextextended`).
 */
export async function waitForAdvisoryXactLock(trx: Knex.Transaction, key: number | string): Promise<void> {
  await trx.raw(typeof key === 'number' ? 'SELECT pg_advisory_xact_lock(?::bigint)' : 'SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [key]);
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
 * On a pooled Knex the lock is transaction-scoped and `work` gets that transaction, which is how
 * a lock stays tied to one pooled connection; the transaction only holds the lock (READ COMMITTED,
 * no writes), so keeping it open for a long walk does not hold back vacuum.
 *
 * On a single-connection Knex (PGlite, or a pool capped at one) a transaction would block every
 * other statement of the app for the whole run. There the only connection is the session, so a
 * session-level lock is taken on it and released at the end, and `work` gets the Knex itself so
 * that the app's statements interleave with it. (Should the pool replace that connection meanwhile,
 * the lock is simply gone: the lock only avoids duplicate work, it is not what keeps files safe.)
 */
export async function runWithTryAdvisoryLock<T>(
  options: { database: Knex; key: number },
  work: (db: Knex | Knex.Transaction) => Promise<T>,
): Promise<TryLockOutcome<T>> {
  const { database, key } = options;
  if (!hasSingleConnection(database)) {
    return database.transaction(async (trx): Promise<TryLockOutcome<T>> => {
      if (!(await tryAdvisoryXactLock(trx, key))) return { acquired: false };
      return { acquired: true, result: await work(trx) };
    });
  }
  const taken: { rows: { locked: boolean }[] } = await database.raw('SELECT pg_try_advisory_lock(?::bigint) AS locked', [key]);
  if (taken.rows[0]?.locked !== true) return { acquired: false };
  try {
    return { acquired: true, result: await work(database) };
  } finally {
    await database.raw('SELECT pg_advisory_unlock(?::bigint)', [key]).catch(() => undefined);
  }
}
