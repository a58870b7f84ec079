/**
 * The bounds of the statements one unit of work (an HTTP request, a server-API call, realtime's
 * background work) sends. It is passed along explicitly: the router makes one per request and
 * hands it to the record service (OperationContext), whose store sends every statement under it
 * (lib/db/bound-statements.ts binds it to each connection the work holds). No AsyncLocalStorage:
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
   * `maxConnectionsPerClient` connections (lib/db/fair-gate.ts; absent: not gated). Work that
   * holds a connection must not wait for a second one under the same key: it could wait for itself.
   */
  client?: string;
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
