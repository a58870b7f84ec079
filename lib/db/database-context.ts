import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The bounds of the statements one unit of work (an HTTP request) sends. It travels with the
 * work's async context, so the database layer reads it without every caller passing it along.
 */
export interface DatabaseContext {
  /** Longest a statement may run before it is cancelled. */
  statementTimeoutMs: number;
  /** Longest a statement may wait for a pooled connection before the work gives up with a 503. */
  acquireTimeoutMs: number;
  /** Aborted when nobody waits for the answer any more (the client left): running statements are cancelled, new ones refused. */
  signal?: AbortSignal;
}

const storage = new AsyncLocalStorage<DatabaseContext>();

/** Runs `work` (and everything it starts) under `context`. */
export function runWithDatabaseContext<T>(context: DatabaseContext, work: () => T): T {
  return storage.run(context, work);
}

/** The context of the work in progress, or undefined outside any (start-up, the sweep, a host's own queries). */
export function currentDatabaseContext(): DatabaseContext | undefined {
  return storage.getStore();
}

/**
 * Runs `work` outside any database context (where the caller came from, for a request the
 * router passes on to the host). Cheaper than binding the caller's whole async context per
 * request, and it leaves every other async-local value as it is.
 */
export function exitDatabaseContext<T>(work: () => T): T {
  return storage.exit(work);
}
