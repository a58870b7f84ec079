import { createRequire } from 'node:module';
import type { Knex } from 'knex';
import type { DataDirLock } from './data-dir-lock.js';
import { EmbeddedSession } from './embedded-session.js';
import type { EmbeddedResult } from './embedded-worker.js';

/** Knex's own Postgres client: we keep its SQL compiler, quoting and transactions, and replace the connection. */
const ClientPg = createRequire(import.meta.url)('knex/lib/dialects/postgres/index.js') as typeof Knex.Client;

/** What the embedded client takes besides Knex's own settings. */
export interface EmbeddedClientOptions {
  /** The folder of a database on disk; absent for a database in memory. */
  directory?: string;
  /** The lock that makes this process the folder's only user; released by `destroy()`. */
  lock?: DataDirLock;
}

/** A query as Knex hands it to `_query`, and gets it back with `response` set. */
interface KnexQueryObject {
  sql: string;
  bindings?: unknown[];
  method?: string;
  response?: unknown;
}

/** Knex's internal methods this client overrides or calls (not in Knex's public types). */
interface ClientPgInternals {
  processResponse(obj: KnexQueryObject, runner: unknown): unknown;
  _parseVersion(version: string): string;
}

/**
 * A Knex client for the embedded engine: PGlite in a worker thread (embedded-session.ts), reached
 * by message passing. PGlite is one session, so the pool holds exactly one connection and
 * statements (and transactions) take turns; the queue is Knex's pool, which bounds the wait.
 *
 * A statement cannot be interrupted inside PGlite (it ignores statement_timeout); what can stop
 * it is terminating its worker (`cancelStatement`). On disk that is safe, a crash Postgres
 * recovers from on the next open; the pool then starts a fresh worker. In memory it would lose
 * the database, so there a statement runs to its end.
 */
export class EmbeddedKnexClient extends ClientPg {
  private readonly directory: string | undefined;
  private readonly lock: DataDirLock | undefined;
  /** Set when the in-memory database is gone with its worker: nothing can bring it back. */
  private lost: Error | undefined;

  constructor(config: Knex.Config & { embedded: EmbeddedClientOptions }) {
    super({ ...config, client: 'pg', connection: {}, pool: { min: 1, max: 1 } });
    this.directory = config.embedded.directory;
    this.lock = config.embedded.lock;
  }

  /** No `pg` driver: the worker is the connection. */
  _driver(): unknown {
    return null;
  }

  override async acquireRawConnection(): Promise<EmbeddedSession> {
    if (this.lost) throw this.lost;
    const session = await EmbeddedSession.start({ directory: this.directory });
    if (!this.version) {
      const result = await session.run('select version() as version', []);
      this.version = (this as unknown as ClientPgInternals)._parseVersion(String(result.rows[0]?.version));
    }
    return session;
  }

  override async destroyRawConnection(session: EmbeddedSession): Promise<void> {
    if (this.directory === undefined && session.failure === undefined) this.lost = new Error('the in-memory embedded database was closed');
    await session.close();
  }

  override async validateConnection(session: EmbeddedSession): Promise<boolean> {
    if (session.failure !== undefined && this.directory === undefined) this.lost ??= new Error(`the in-memory embedded database is lost: ${session.failure.message}`);
    return session.failure === undefined;
  }

  /** Runs one statement; Knex calls it for every query, transactions' BEGIN and COMMIT included. */
  async _query(session: EmbeddedSession, obj: KnexQueryObject): Promise<KnexQueryObject> {
    if (!obj.sql) throw new Error('The query is empty');
    obj.response = await session.run(obj.sql, obj.bindings ?? []);
    return obj;
  }

  /** Gives PGlite's result the shape of node-postgres's, which Knex's Postgres client reads. */
  processResponse(obj: KnexQueryObject, runner: unknown): unknown {
    const result = obj.response as EmbeddedResult;
    const command = obj.method === 'first' || obj.method === 'pluck' ? 'SELECT' : (obj.method?.toUpperCase() ?? '');
    const response = { ...result, rowCount: result.affectedRows, command };
    return (ClientPg.prototype as unknown as ClientPgInternals).processResponse.call(this, { ...obj, response }, runner);
  }

  _stream(): never {
    throw new Error('The embedded database does not stream query results.');
  }

  /**
   * Stops the statement running on `session`, if it can: on disk by terminating the worker
   * (the pending statement rejects with `reason`); in memory it cannot, and says so with false.
   */
  async cancelStatement(session: EmbeddedSession, reason: Error): Promise<boolean> {
    if (this.directory === undefined) return false;
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
