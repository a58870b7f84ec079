import type { Knex } from 'knex';
import { sendCancelRequest, type PostgresClientLike, type ProtocolConnectionClass } from './cancel-postgres-statement.js';
import type { DatabaseContext } from './database-context.js';

/** Why a statement did not run to its end (see `StatementInterruptedError`). */
export type InterruptionReason = 'timeout' | 'aborted' | 'unresponsive' | 'busy';

/**
 * A statement that recordbase stopped, or never started: over the statement timeout (`timeout`),
 * abandoned by its client (`aborted`), sent to a database that did not even answer the cancel
 * (`unresponsive`), or never given a connection within the acquire timeout (`busy`).
 * translateDatabaseError turns it into the client's error.
 */
export class StatementInterruptedError extends Error {
  constructor(
    readonly reason: InterruptionReason,
    /** The limit that was reached, in milliseconds (for `timeout` and `busy`). */
    readonly limitMs?: number,
    /**
     * Whether the statement reached the database. One refused before it was sent (its client
     * had already gone, or no connection came) changed nothing; one stopped while it ran may
     * have been committed (a cancel that came too late, an engine that cannot stop it).
     */
    readonly sent = true,
  ) {
    super(`statement ${reason}${limitMs === undefined ? '' : ` (${limitMs} ms)`}`);
    this.name = 'StatementInterruptedError';
  }
}

/**
 * A statement whose client left is cancelled once it has run this long. Shorter ones finish: for
 * the embedded engine a cancel restarts its worker (about half a second), dearer than a short
 * statement; on Postgres it costs a connection to the server.
 */
export const ABANDONED_STATEMENT_GRACE_MS = 500;

/**
 * After a cancel, how long a statement may take to end before its connection is dropped: a
 * database that does not answer a cancel this quickly is treated as unreachable.
 */
export const CANCEL_GRACE_MS = 2_000;

/** Knex's client as this module uses it; `_query` and `cancelQuery` are Knex internals every dialect has. */
interface BoundableClient {
  constructor: unknown;
  _query(connection: unknown, obj: unknown): Promise<unknown>;
  acquireConnection(): Promise<unknown>;
  releaseConnection(connection: unknown): Promise<unknown>;
  cancelQuery?(connection: unknown): Promise<unknown>;
  canCancelQuery?: boolean;
  /** Set on a transaction's client: its one connection is the transaction's. */
  transacting?: boolean;
  /** The Postgres driver Knex loaded (`pg`): its protocol `Connection` sends cancel requests. */
  driver?: { Connection?: ProtocolConnectionClass } | null;
  /** The embedded client's cancel (embedded-knex-client.ts): false when the statement cannot be stopped. */
  cancelStatement?(connection: unknown, reason: Error): Promise<boolean>;
  [installed]?: true;
  /** Set on the client of a `boundedKnex`: every connection it acquires is bound to this context. */
  [clientContext]?: DatabaseContext;
}

const installed = Symbol('recordbase.statementBounds');
const clientContext = Symbol('recordbase.clientContext');

/**
 * The context each held connection's statements run under: set when a unit of work acquires
 * the connection within a context (acquireWithin, a boundedKnex, transactionWithin), removed
 * when it goes back to the pool. A statement on a connection without one is not bounded.
 */
const connectionContexts = new WeakMap<object, DatabaseContext>();

/** A connection as a WeakMap key (every engine's is an object; anything else is never bound). */
function isConnectionObject(connection: unknown): connection is object {
  return typeof connection === 'object' && connection !== null;
}

/**
 * Statements that run even for a client that left: they end a transaction. Refusing one would
 * leave the transaction open on a connection the pool hands to the next request (Knex does not
 * roll back after a failed COMMIT).
 */
const TRANSACTION_END = /^\s*(rollback|commit|release)\b/i;

/**
 * Makes every statement that `db` runs on a connection acquired within a database context
 * (lib/db/database-context.ts) bounded by it: cancelled past `statementTimeoutMs` or once its
 * client has gone; and such an acquire refused when no connection is free within
 * `acquireTimeoutMs`. Work acquires within a context through `acquireWithin` (run-statement.ts),
 * `transactionWithin` or a `boundedKnex`. Statements on other connections (the schema sync, the
 * sweep, a host's own queries on a shared Knex) run as before. Installed once per Knex client;
 * it adds no round trip: a timer per statement, and a cancel only when one is due.
 *
 * How a statement is stopped depends on the engine: on Postgres, a protocol cancel request
 * (cancel-postgres-statement.ts), and if the statement has not ended
 * CANCEL_GRACE_MS later its connection is dropped and the caller gets `unresponsive`; on the
 * embedded engine, the worker is terminated (on disk) or the caller is answered while the
 * statement runs on (in memory).
 */
export function installStatementBounds(db: Knex): void {
  const client = db.client as unknown as BoundableClient;
  if (client[installed]) return;
  // A subclass of the client's own class, made this client's prototype: Knex builds each
  // transaction's client (and a withUserParams clone's) from `client.constructor.prototype`, so
  // methods set on the instance alone would miss every statement inside a transaction. Other
  // Knex instances are untouched.
  const Base = client.constructor as new (...args: never[]) => BoundableClient;
  const runStatement = Base.prototype._query;
  const acquire = Base.prototype.acquireConnection;
  const release = Base.prototype.releaseConnection;
  class BoundClient extends Base {
    override _query(connection: unknown, obj: unknown): Promise<unknown> {
      const context = isConnectionObject(connection) ? connectionContexts.get(connection) : undefined;
      if (context === undefined) return runStatement.call(this, connection, obj);
      // A client that has gone gets no new statement, but one that ends a transaction.
      if (context.signal?.aborted && !TRANSACTION_END.test((obj as { sql?: string }).sql ?? '')) return Promise.reject(new StatementInterruptedError('aborted', undefined, false));
      return runBounded(this, context, connection, runStatement.call(this, connection, obj));
    }

    override acquireConnection(): Promise<unknown> {
      const context = this[clientContext];
      if (context === undefined) return acquire.call(this);
      return acquireBounded(this, context, () => acquire.call(this));
    }

    override releaseConnection(connection: unknown): Promise<unknown> {
      if (isConnectionObject(connection)) connectionContexts.delete(connection);
      return release.call(this, connection);
    }
  }
  Object.setPrototypeOf(client, BoundClient.prototype);
  client[installed] = true;
}

/** The context `connection`'s statements run under now, if a unit of work holds it within one. */
export function contextOfConnection(connection: object): DatabaseContext | undefined {
  return connectionContexts.get(connection);
}

/**
 * A connection for `context`'s work from `db`'s pool, bound to the context until it goes back
 * (the bounds' `releaseConnection` unbinds it): refused with `busy` past `acquireTimeoutMs`,
 * `aborted` once the client has gone. Inside a transaction, its own connection (bound when the
 * transaction began). Without a context, the pool's connection as it comes.
 */
export function acquireWithin(db: Knex | Knex.Transaction, context: DatabaseContext | undefined): Promise<unknown> {
  const client = db.client as unknown as BoundableClient;
  if (context === undefined || client.transacting) return client.acquireConnection();
  return acquireBounded(client, context, () => client.acquireConnection());
}

/**
 * Runs `work` in a transaction whose every statement (BEGIN and COMMIT included) is bounded by
 * `context`: its connection is acquired within the context and handed to Knex, which then
 * neither acquires nor releases one itself. Inside a transaction, a savepoint of it.
 */
export async function transactionWithin<T>(db: Knex | Knex.Transaction, context: DatabaseContext | undefined, work: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  if (context === undefined || (db as Knex.Transaction).isTransaction) return db.transaction(work);
  const connection = await acquireWithin(db, context);
  try {
    return await db.transaction(work, { connection });
  } finally {
    await (db.client as unknown as BoundableClient).releaseConnection(connection);
  }
}

/**
 * `db` (a Knex whose statement bounds are installed) with every statement of its own (its query
 * builder, `raw`, its transactions) bounded by `context`: for long-lived work that holds one
 * fixed context and uses Knex's builder, such as realtime's background work. Made once per such
 * user: Knex copies its client for it (sharing the pool).
 */
export function boundedKnex(db: Knex, context: DatabaseContext): Knex {
  const bounded = db.withUserParams({});
  (bounded.client as unknown as BoundableClient)[clientContext] = context;
  return bounded;
}

/**
 * Connections a cancel was sent to, and why. A cancel that arrives just after its statement ended
 * hits the next statement of the same session instead: that one fails as query_canceled, and is
 * reported with the original reason. Such a connection is also marked for the pool to discard
 * (see cancelRunning), so the stray cancel can never reach another request.
 */
const cancelledConnections = new WeakMap<object, StatementInterruptedError>();
const QUERY_CANCELED = '57014';

/**
 * `running` (a statement sent on `connection`), bounded by `context`: one promise and one timer
 * per statement; the cancel's timers and the client-gone listener only when they are due.
 */
function runBounded(client: BoundableClient, context: DatabaseContext, connection: unknown, running: Promise<unknown>): Promise<unknown> {
  const signal = context.signal;
  const started = signal === undefined ? 0 : Date.now();
  return new Promise((resolve, reject) => {
    let stopped: StatementInterruptedError | undefined;
    let graceTimer: NodeJS.Timeout | undefined;
    let abandonTimer: NodeJS.Timeout | undefined;
    let settled = false;
    const finish = () => {
      settled = true;
      clearTimeout(timeoutTimer);
      if (graceTimer !== undefined) clearTimeout(graceTimer);
      if (abandonTimer !== undefined) clearTimeout(abandonTimer);
      stopListening?.();
    };
    // Answers before the statement ends (it cannot be stopped, or its database does not answer).
    const answerEarly = (error: Error) => {
      if (settled) return;
      finish();
      reject(error);
    };
    const stop = (reason: InterruptionReason) => {
      if (stopped || settled) return;
      const interrupted = new StatementInterruptedError(reason, reason === 'timeout' ? context.statementTimeoutMs : undefined);
      stopped = interrupted;
      void cancelRunning(client, connection, interrupted).then((cancelled) => {
        // Nothing could stop it (the in-memory engine): answer now, let it run on.
        if (!cancelled) answerEarly(interrupted);
      });
      graceTimer = setTimeout(() => {
        const unresponsive = new StatementInterruptedError('unresponsive');
        dropConnection(connection, unresponsive);
        answerEarly(unresponsive);
      }, CANCEL_GRACE_MS);
    };
    const timeoutTimer = setTimeout(stop, context.statementTimeoutMs, 'timeout');
    const stopListening = signal?.listen(() => {
      abandonTimer = setTimeout(stop, Math.max(0, started + ABANDONED_STATEMENT_GRACE_MS - Date.now()), 'aborted');
    });
    running.then(
      (value) => {
        if (settled) return;
        finish();
        resolve(value);
      },
      (error: unknown) => {
        if (settled) return;
        finish();
        reject(stopped ?? strayCancel(connection, error) ?? error);
      },
    );
  });
}

/** The reason of an earlier cancel on `connection` when `error` is that cancel landing late. */
function strayCancel(connection: unknown, error: unknown): StatementInterruptedError | undefined {
  if ((error as { code?: unknown } | null)?.code !== QUERY_CANCELED || !isConnectionObject(connection)) return undefined;
  return cancelledConnections.get(connection);
}

/** Cancels what `connection` runs; resolves false when the engine cannot stop a statement. */
async function cancelRunning(client: BoundableClient, connection: unknown, reason: StatementInterruptedError): Promise<boolean> {
  if (client.cancelStatement) return client.cancelStatement(connection, reason).catch(() => true);
  const Connection = client.driver?.Connection;
  if (Connection && isPostgresClient(connection)) {
    // The pool discards the connection afterwards: a cancel that lands late must find no other request there.
    cancelledConnections.set(connection, reason);
    (connection as { __knex__disposed?: unknown }).__knex__disposed = reason;
    await sendCancelRequest({ Connection, target: connection, timeoutMs: CANCEL_GRACE_MS });
    return true;
  }
  if (client.canCancelQuery && client.cancelQuery) {
    // Another Postgres driver: Knex's own cancel (pg_cancel_backend from a fresh connection).
    await client.cancelQuery(connection).catch(() => undefined);
    return true;
  }
  return false;
}

function isPostgresClient(connection: unknown): connection is PostgresClientLike {
  return typeof (connection as PostgresClientLike | null)?.processID === 'number' && typeof (connection as PostgresClientLike).secretKey === 'number';
}

/**
 * Gives up on a connection whose statement outlived its cancel: marked so Knex's pool destroys
 * it instead of handing it out again, and its socket closed so the statement's promise settles.
 */
function dropConnection(connection: unknown, reason: Error): void {
  const pgClient = connection as { __knex__disposed?: unknown; connection?: { stream?: { destroy(): void } } };
  pgClient.__knex__disposed = reason;
  pgClient.connection?.stream?.destroy();
}

/**
 * Acquires a pooled connection and binds it to `context`, or gives up after `acquireTimeoutMs`
 * (or when the client leaves) with `busy` (`aborted`). The pool's own request cannot be
 * withdrawn: when it is served later, the connection goes straight back.
 */
function acquireBounded(client: BoundableClient, context: DatabaseContext, acquire: () => Promise<unknown>): Promise<unknown> {
  if (context.signal?.aborted) return Promise.reject(new StatementInterruptedError('aborted', undefined, false));
  const pending = acquire();
  return new Promise((resolve, reject) => {
    let settled = false;
    const giveUp = (error: StatementInterruptedError) => {
      if (settled) return;
      settled = true;
      cleanup();
      pending.then((connection) => client.releaseConnection(connection), () => undefined);
      reject(error);
    };
    const timer = setTimeout(() => giveUp(new StatementInterruptedError('busy', context.acquireTimeoutMs, false)), context.acquireTimeoutMs);
    const stopListening = context.signal?.listen(() => giveUp(new StatementInterruptedError('aborted', undefined, false)));
    const cleanup = () => {
      clearTimeout(timer);
      stopListening?.();
    };
    pending.then(
      (connection) => {
        if (settled) return;
        settled = true;
        cleanup();
        if (isConnectionObject(connection)) connectionContexts.set(connection, context);
        resolve(connection);
      },
      (error: unknown) => {
        if (settled) return;
        settled = true;
        cleanup();
        reject(error);
      },
    );
  });
}
