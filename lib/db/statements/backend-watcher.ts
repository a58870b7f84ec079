/**
 * A connection to the server of its own, outside the pool, that can run one query: what a
 * Knex Postgres client's `acquireRawConnection` gives (a node-postgres client).
 */
export interface WatchConnection {
  query(text: string, values: unknown[]): Promise<{ rows: { pid: number }[] }>;
}

/** Where a BackendWatcher gets its connection, and how often and how long it looks. */
export interface BackendWatcherOptions {
  connect(): Promise<WatchConnection>;
  disconnect(connection: WatchConnection): Promise<void>;
  /** Pause between two looks at the server. */
  intervalMs: number;
  /** Longest a backend is waited for; past it, its waiter resolves all the same. */
  maxWaitMs: number;
  /** Longest one look (connecting included) may take; past it the server counts as one that cannot be asked. */
  lookTimeoutMs: number;
}

/** Pause between two looks at pg_stat_activity while backends are watched. */
export const BACKEND_WATCH_INTERVAL_MS = 250;
/** Longest a dropped connection's backend is waited for (its client keeps its share meanwhile). */
export const BACKEND_WATCH_MAX_MS = 120_000;
/** Longest one look at pg_stat_activity may take, connecting included. */
export const BACKEND_LOOK_TIMEOUT_MS = 2_000;

interface Waiter {
  readonly pid: number;
  readonly since: number;
  readonly resolve: () => void;
}

/**
 * Tells when server backends have ended: the statement of a connection recordbase dropped (its
 * cancel went unanswered) runs on until the backend notices the cancel, and the client that sent
 * it must keep its share of the pool until then (statement-bounds.ts). One connection of its own
 * and one statement per look for every backend watched, only while some are: nothing runs
 * otherwise. It never fails its callers: when the server cannot be asked, they are released at
 * once (the pool's own bounds still hold), so a database outage cannot hold a client's share for
 * ever.
 */
export class BackendWatcher {
  private waiters: Waiter[] = [];
  private connection: WatchConnection | undefined;
  private timer: NodeJS.Timeout | undefined;
  private looking = false;

  constructor(private readonly options: BackendWatcherOptions) {}

  /** Resolves when no backend with `pid` runs on the server any more (or after `maxWaitMs`). */
  waitUntilGone(pid: number): Promise<void> {
    return new Promise((resolve) => {
      this.waiters.push({ pid, since: Date.now(), resolve });
      this.schedule();
    });
  }

  /** Backends waited for now (for tests and diagnostics). */
  get watching(): number {
    return this.waiters.length;
  }

  private schedule(): void {
    if (this.timer !== undefined || this.looking) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.look();
    }, this.options.intervalMs);
    this.timer.unref();
  }

  private async look(): Promise<void> {
    this.looking = true;
    try {
      const pids = [...new Set(this.waiters.map((waiter) => waiter.pid))];
      const { rows } = await this.withinLookTimeout(async () => {
        this.connection ??= await this.connectOnce();
        return this.connection.query('SELECT pid FROM pg_stat_activity WHERE pid = ANY($1::int[])', [pids]);
      });
      const running = new Set(rows.map((row) => Number(row.pid)));
      const asked = new Set(pids);
      const now = Date.now();
      // A backend that joined while the server was asked waits for the next look.
      this.release((waiter) => asked.has(waiter.pid) && (!running.has(waiter.pid) || now - waiter.since >= this.options.maxWaitMs));
    } catch {
      // The server cannot be asked: nobody is held for what cannot be known.
      this.release(() => true);
      await this.closeConnection();
    } finally {
      this.looking = false;
    }
    if (this.waiters.length > 0) this.schedule();
    else await this.closeConnection();
  }

  /** `look`, or a rejection once it took lookTimeoutMs (the connection, however it ends, is then dropped). */
  private withinLookTimeout<T>(look: () => Promise<T>): Promise<T> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the server did not answer')), this.options.lookTimeoutMs);
      look().then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  }

  /** A new connection; one that comes after its look gave up is ended at once. */
  private async connectOnce(): Promise<WatchConnection> {
    const started = Date.now();
    const connection = await this.options.connect();
    if (Date.now() - started > this.options.lookTimeoutMs) {
      await this.options.disconnect(connection).catch(() => undefined);
      throw new Error('connected too late');
    }
    return connection;
  }

  private release(done: (waiter: Waiter) => boolean): void {
    const kept: Waiter[] = [];
    for (const waiter of this.waiters) {
      if (done(waiter)) waiter.resolve();
      else kept.push(waiter);
    }
    this.waiters = kept;
  }

  private async closeConnection(): Promise<void> {
    const connection = this.connection;
    this.connection = undefined;
    if (connection !== undefined) await this.options.disconnect(connection).catch(() => undefined);
  }
}
