import { createRequire } from 'node:module';
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

/** A node-postgres client whose "socket" is an embedded session, and Knex's mark on a broken connection. */
type EmbeddedConnection = pg.Client & { __knex__disposed?: unknown };

/**
 * A Knex client for the embedded engine: Knex's Postgres client, whose node-postgres connection
 * talks to PGlite in a worker thread (embedded-session.ts) over the wire protocol instead of a
 * socket. So statements, type parsing and errors are those of a Postgres server, and the event
 * loop never runs a statement. PGlite is one session, so the pool holds exactly one connection
 * and statements (and transactions) take turns; the queue is Knex's pool, which bounds the wait.
 *
 * A statement cannot be interrupted inside PGlite (it ignores statement_timeout); what can stop
 * it is terminating its worker (`cancelStatement`). On disk that is safe, a crash Postgres
 * recovers from on the next open; the pool then starts a fresh worker. In memory it would lose
 * the database, so there a statement runs to its end.
 */
export class EmbeddedKnexClient extends ClientPg {
  private readonly directory: string | undefined;
  private readonly lock: DataDirLock | undefined;
  private readonly sessions = new WeakMap<object, EmbeddedSession>();
  /** Set when the in-memory database is gone with its worker: nothing can bring it back. */
  private lost: Error | undefined;
  /** Channels every connection LISTENs on, and who hears their notifications (realtime, lib/realtime/change-listener.ts). */
  private readonly channels = new Set<string>();
  private readonly notificationHandlers = new Set<(channel: string, payload: string) => void>();

  constructor(config: Knex.Config & { embedded: EmbeddedClientOptions }) {
    super({ ...config, client: 'pg', connection: {}, pool: { min: 1, max: 1 } });
    this.directory = config.embedded.directory;
    this.lock = config.embedded.lock;
  }

  /**
   * node-postgres as recordbase resolves it (a dependency of its own), not as Knex would from
   * its folder: a host that only uses the embedded engine need not install it.
   */
  _driver(): typeof pg {
    return pg;
  }

  /** Opens a worker (a new PGlite session) and connects node-postgres to it. */
  async _acquireOnlyConnection(): Promise<EmbeddedConnection> {
    if (this.lost) throw this.lost;
    const session = await EmbeddedSession.start({ directory: this.directory });
    if (this.directory === undefined) {
      session.onFailure((reason) => (this.lost ??= new Error(`the in-memory embedded database is lost: ${reason.message}`)));
    }
    const connection: EmbeddedConnection = new pg.Client({ stream: () => session.openStream() as never, user: 'postgres', database: 'postgres' });
    // As Knex's own Postgres client does: a broken connection is marked, and the pool drops it.
    connection.on('error', (error) => (connection.__knex__disposed = error));
    connection.on('end', () => (connection.__knex__disposed ??= 'Connection ended unexpectedly'));
    this.sessions.set(connection, session);
    // The embedded engine's only session is the pool's one connection: it LISTENs itself, and
    // Postgres delivers a session's own notifications to it once the transaction commits.
    connection.on('notification', (message) => {
      for (const handler of this.notificationHandlers) handler(message.channel, message.payload ?? '');
    });
    try {
      await connection.connect();
      for (const channel of this.channels) await connection.query(`LISTEN "${channel}"`);
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
    this.notificationHandlers.add(handler);
    const added = channels.filter((channel) => !this.channels.has(channel));
    for (const channel of added) this.channels.add(channel);
    const connection = (await this.acquireConnection()) as EmbeddedConnection;
    try {
      for (const channel of added) await connection.query(`LISTEN "${channel}"`);
    } finally {
      await this.releaseConnection(connection);
    }
    return async () => {
      this.notificationHandlers.delete(handler);
      for (const channel of added) this.channels.delete(channel);
    };
  }

  override async destroyRawConnection(connection: EmbeddedConnection): Promise<void> {
    const session = this.sessions.get(connection);
    if (this.directory === undefined && session?.failure === undefined) this.lost ??= new Error('the in-memory embedded database was closed');
    await connection.end().catch(() => undefined);
    await session?.close();
  }

  /**
   * Stops the statement running on `connection`, if it can: on disk by terminating the worker
   * (the statement fails, the pool replaces the connection); in memory it cannot, and says so
   * with false.
   */
  async cancelStatement(connection: EmbeddedConnection, reason: Error): Promise<boolean> {
    const session = this.sessions.get(connection);
    if (this.directory === undefined || session === undefined) return false;
    await session.terminate(reason);
    return true;
  }

  /** Closes the pool (and so the worker), then releases the folder's lock. */
  override async destroy(callback?: (error?: unknown) => void): Promise<void> {
    try {
      await super.destroy(undefined);
    } finally {
      this.lock?.release();
    }
    callback?.();
  }
}
