import { createRequire } from 'node:module';
import type { Worker } from 'node:worker_threads';
import type { Knex } from 'knex';
import pg from 'pg';
import type { DataDirLock } from './data-dir-lock.js';
import { EmbeddedSession } from './embedded-session.js';

/** Knex's own Postgres client: we keep its driver (node-postgres), SQL compiler and transactions, and replace the socket. */
const ClientPg = createRequire(import.meta.url)('knex/lib/dialects/postgres/index.js') as typeof Knex.Client;

/** What the embedded client takes besides Knex's own settings. */
export interface EmbeddedClientOptions {
  /** The folder of a database on disk; absent for a database in memory. */
  directory?: string;
  /** The lock that makes this process the folder's only user; released by `destroy()`. */
  lock?: DataDirLock;
}

/** A node-postgres client whose "socket" is an embedded session. */
type EmbeddedConnection = pg.Client;

/**
 * What every copy of one embedded client shares. Knex copies a client for each transaction (from
 * its prototype, without its own fields) and for `withUserParams`, and every copy keeps its
 * `config`: the state lives here, found through `config.embedded`, so that a statement inside a
 * transaction is stopped like any other.
 */
class EmbeddedEngine {
  readonly sessions = new WeakMap<object, EmbeddedSession>();
  /** Connections that failed or ended: the pool replaces them (validateConnection). */
  readonly broken = new WeakSet<object>();
  /** Set when the in-memory database is gone with its worker: nothing can bring it back. */
  lost: Error | undefined;
  /** Channels every connection LISTENs on, and who hears their notifications (realtime, notification-listener.ts). */
  readonly channels = new Set<string>();
  readonly notificationHandlers = new Set<(channel: string, payload: string) => void>();
  /**
   * The session that replaces one whose statement was stopped: opened at once, taken by the pool
   * for its next connection. Until it is open, the unit whose statement was stopped keeps its turn
   * (statement-bounds.ts, `whenRestarted`): the restart is charged to it, not to the next client.
   */
  replacement: Promise<EmbeddedSession> | undefined;
  /** Resolves once the last worker that opened the folder has exited: a new one waits for it. */
  lastExit: Promise<void> = Promise.resolve();
  /** A worker started ahead for the next restart, once the engine has been restarted (one that never is keeps no spare thread). */
  spare: Promise<Worker> | undefined;
  closed = false;

  constructor(
    readonly directory: string | undefined,
    readonly lock: DataDirLock | undefined,
  ) {}

  /**
   * Opens a worker (a new PGlite session) once the previous one has exited: on disk, two workers
   * must never have the folder open together (one running on while its replacement recovers).
   * A restart (`restarting`) opens on the spare worker if there is one, and starts the next spare.
   */
  async openSession(options: { restarting?: boolean } = {}): Promise<EmbeddedSession> {
    if (this.directory === undefined) return EmbeddedSession.start({});
    await this.lastExit;
    const spare = await this.spare?.catch(() => undefined);
    this.spare = undefined;
    const session = await EmbeddedSession.start({ directory: this.directory, spare });
    this.lastExit = session.exited;
    if (options.restarting && !this.closed) {
      this.spare = EmbeddedSession.startSpare();
      this.spare.catch(() => undefined);
    }
    return session;
  }

  /** Stops the spare worker, if one was started. */
  async stopSpare(): Promise<void> {
    const spare = this.spare;
    this.spare = undefined;
    await spare?.then((worker) => worker.terminate(), () => undefined);
  }
}

const engines = new WeakMap<EmbeddedClientOptions, EmbeddedEngine>();

/**
 * A Knex client for the embedded engine: Knex's Postgres client, whose node-postgres connection
 * talks to PGlite in a worker thread (embedded-session.ts) over the wire protocol instead of a
 * socket. So statements, type parsing and errors are those of a Postgres server, and the event
 * loop never runs a statement. PGlite is one session, so the pool holds exactly one connection
 * and statements (and transactions) take turns: clients' turns are shared by the fair gate in
 * front of the pool (statement-bounds.ts, fair-gate.ts), and Knex's pool bounds the wait.
 *
 * A statement cannot be interrupted inside PGlite (it ignores statement_timeout); what can stop
 * it is terminating its worker (`cancelStatement`). On disk that is safe, a crash Postgres
 * recovers from on the next open; a fresh worker opens the folder at once. In memory it would
 * lose the database, so there a statement runs to its end.
 */
export class EmbeddedKnexClient extends ClientPg {
  constructor(config: Knex.Config & { embedded: EmbeddedClientOptions }) {
    super({ ...config, client: 'pg', connection: {}, pool: { min: 1, max: 1 } });
    engines.set(config.embedded, new EmbeddedEngine(config.embedded.directory, config.embedded.lock));
  }

  /** The state this client shares with its copies (see EmbeddedEngine). */
  private get engine(): EmbeddedEngine {
    return engines.get((this.config as { embedded: EmbeddedClientOptions }).embedded)!;
  }

  /**
   * Whether stopping a statement restarts the engine (on disk: the worker is terminated and the
   * folder opened again), which every client waits for; in memory a statement cannot be stopped.
   * Read by statement-bounds.ts (defaultStatementTimeoutMs).
   */
  get stopsStatementsByRestart(): boolean {
    return this.engine.directory !== undefined;
  }

  /**
   * node-postgres as recordbase resolves it (a dependency of its own), not as Knex would from
   * its folder: a host that only uses the embedded engine need not install it.
   */
  _driver(): typeof pg {
    return pg;
  }

  /** Opens a worker (a new PGlite session, or the one opened after a stopped statement) and connects node-postgres to it. */
  async _acquireOnlyConnection(): Promise<EmbeddedConnection> {
    const engine = this.engine;
    if (engine.lost) throw engine.lost;
    const replacement = engine.replacement;
    engine.replacement = undefined;
    const session = await (replacement ?? engine.openSession());
    if (engine.directory === undefined) {
      session.onFailure((reason) => (engine.lost ??= new Error(`the in-memory embedded database is lost: ${reason.message}`)));
    }
    const connection: EmbeddedConnection = new pg.Client({ stream: () => session.openStream() as never, user: 'postgres', database: 'postgres' });
    // A broken connection is remembered, and the pool replaces it (validateConnection).
    connection.on('error', () => engine.broken.add(connection));
    connection.on('end', () => engine.broken.add(connection));
    engine.sessions.set(connection, session);
    // The embedded engine's only session is the pool's one connection: it LISTENs itself, and
    // Postgres delivers a session's own notifications to it once the transaction commits.
    connection.on('notification', (message) => {
      for (const handler of engine.notificationHandlers) handler(message.channel, message.payload ?? '');
    });
    try {
      await connection.connect();
      for (const channel of engine.channels) await connection.query(`LISTEN "${channel}"`);
    } catch (error) {
      await session.terminate(error as Error);
      throw error;
    }
    return connection;
  }

  /**
   * Hears `channels` on the one connection, now and on every connection that replaces it (a
   * restarted worker). Channel names are recordbase's own (letters, digits, underscores). Returns
   * the function that stops hearing them.
   */
  async listen(channels: readonly string[], handler: (channel: string, payload: string) => void): Promise<() => Promise<void>> {
    for (const channel of channels) {
      if (!/^[a-z0-9_]+$/.test(channel)) throw new Error(`recordbase: refusing to LISTEN on ${JSON.stringify(channel)}`);
    }
    const engine = this.engine;
    engine.notificationHandlers.add(handler);
    const added = channels.filter((channel) => !engine.channels.has(channel));
    for (const channel of added) engine.channels.add(channel);
    const connection = (await this.acquireConnection()) as EmbeddedConnection;
    try {
      for (const channel of added) await connection.query(`LISTEN "${channel}"`);
    } finally {
      await this.releaseConnection(connection);
    }
    return async () => {
      engine.notificationHandlers.delete(handler);
      for (const channel of added) engine.channels.delete(channel);
    };
  }

  /** Knex's pool asks before handing out a connection: one whose session failed or ended is replaced. */
  override async validateConnection(connection: EmbeddedConnection): Promise<boolean> {
    return !this.engine.broken.has(connection);
  }

  override async destroyRawConnection(connection: EmbeddedConnection): Promise<void> {
    const engine = this.engine;
    const session = engine.sessions.get(connection);
    if (engine.directory === undefined && session?.failure === undefined) engine.lost ??= new Error('the in-memory embedded database was closed');
    await connection.end().catch(() => undefined);
    await session?.close();
  }

  /**
   * Stops the statement running on `connection`, if it can: on disk by terminating the worker
   * (the statement fails, the pool replaces the connection with a worker opened at once); in
   * memory it cannot, and says so with false.
   */
  async cancelStatement(connection: EmbeddedConnection, reason: Error): Promise<boolean> {
    const engine = this.engine;
    const session = engine.sessions.get(connection);
    if (engine.directory === undefined || session === undefined) return false;
    // Set before the first await: the unit whose statement this was releases its connection as
    // soon as the statement fails, and must find the restart under way (whenRestarted).
    const replacement = session.terminate(reason).then(() => engine.openSession({ restarting: true }));
    engine.replacement = replacement;
    // Nobody may be waiting for it when it fails: the pool's next connection reports the failure.
    replacement.catch(() => undefined);
    await session.exited;
    return true;
  }

  /**
   * While a stopped statement's worker is being replaced, resolves once the replacement is open
   * (or failed to open); undefined otherwise. statement-bounds.ts holds the stopped unit's turn
   * until then.
   */
  whenRestarted(): Promise<unknown> | undefined {
    return this.engine.replacement;
  }

  /** Closes the pool (and so the worker, and one opened to replace it), then releases the folder's lock. */
  override async destroy(callback?: (error?: unknown) => void): Promise<void> {
    const engine = this.engine;
    engine.closed = true;
    try {
      await super.destroy(undefined);
      const replacement = engine.replacement;
      engine.replacement = undefined;
      await replacement?.then((session) => session.close(), () => undefined);
      await engine.stopSpare();
    } finally {
      await engine.lastExit;
      engine.lock?.release();
    }
    callback?.();
  }
}
