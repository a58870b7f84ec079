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
  /** Raised when nobody waits for the answer any more (the client left): running statements are cancelled, new ones refused. */
  signal?: ClientGone;
}

/**
 * Raised once when the client of a unit of work has gone. What an AbortSignal would do here,
 * for a fraction of its cost: the router makes one per request and every statement listens to
 * it (EventTarget's listeners and the AbortController itself were measurable per request).
 */
export class ClientGone {
  private raised = false;
  private readonly listeners = new Set<() => void>();

  get aborted(): boolean {
    return this.raised;
  }

  /** Calls `listener` once when the client goes (never if it already has: check `aborted` first); returns what stops listening. */
  listen(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Raises it (once): every listener runs. */
  abort(): void {
    if (this.raised) return;
    this.raised = true;
    const listeners = [...this.listeners];
    this.listeners.clear();
    for (const listener of listeners) listener();
  }
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
