import type { TelemetrySpan } from '../../telemetry/start-span.js';

/**
 * The bounds of the statements one unit of work (an HTTP request, a server-API call, realtime's
 * background work) sends. It is passed along explicitly: the router makes one per request and
 * hands it to the record service (OperationContext), whose store sends every statement under it
 * (lib/db/statements/statement-bounds.ts binds it to each connection the work holds). No AsyncLocalStorage:
 * once on, its hooks cost every promise of the process, whether or not it carries a context.
 */
export interface DatabaseContext {
  /** Longest a statement may run before it is cancelled. */
  statementTimeoutMs: number;
  /** Longest a statement may wait for a pooled connection before the work gives up with a 503. */
  acquireTimeoutMs: number;
  /** Raised when nobody waits for the answer any more (the client left): running statements are cancelled, new ones refused. */
  signal?: ClientGone;
  /**
   * Who the work is for, as the pool's fairness sees it (a request's address; realtime's own
   * keys): units of one client take turns with other clients' and hold at most
   * `maxConnectionsPerClient` connections (lib/db/statements/fair-gate.ts; absent: not gated). Work that
   * holds a connection must not wait for a second one under the same key: it could wait for itself.
   */
  client?: string;
  /**
   * Present when the unit's statements share one budget (an HTTP request's): together they may
   * run `statementTimeoutMs`, each later one only what the earlier ones left, so a request's list
   * and its count together cost at most one statement timeout.
   */
  budget?: StatementBudget;
  /**
   * The unit's span (an HTTP request's), the explicit parent of its statements' spans: with no
   * async context manager in the host's SDK the active context would not reach them.
   */
  span?: TelemetrySpan;
}

/**
 * The time the statements of one unit of work share: the time they run, added up, never more
 * than `limitMs` in all. Waits between them (for a connection, for another client's turn on the
 * embedded engine's one connection) do not count: they cost the database nothing, and counting
 * them would make one client's slow statements fail another client's requests.
 */
export class StatementBudget {
  private spentMs = 0;

  /** Milliseconds the next statement may run: what is left of `limitMs` (0 when nothing is). */
  allow(limitMs: number): number {
    return Math.max(0, limitMs - this.spentMs);
  }

  /** Counts a statement's running time against the budget. */
  spend(ms: number): void {
    this.spentMs += ms;
  }
}

/**
 * Raised once when the client of a unit of work has gone. What an AbortSignal would do here,
 * with only the flag and the listeners it needs: the router makes one per request and every
 * statement listens to it, where an AbortController brings an EventTarget, its event objects and
 * their dispatch.
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
