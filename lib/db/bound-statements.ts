import type { Knex } from 'knex';
import type { DatabaseContext } from './database-context.js';
import { FairGate, type GateTicket } from './fair-gate.js';
import { CANCEL_GRACE_MS, canStopStatements, cancelRunning, dropConnection, isConnectionObject, isPostgresClient, orphanedStatementOf, restartReasonOf, strayCancel, type StoppableClient } from './stop-statement.js';
import { QueueFullError, StatementInterruptedError, type InterruptionReason } from './statement-interrupted-error.js';

/** Statement timeout of the embedded engine on disk when `limits.statementTimeoutMs` is not given (see defaultStatementTimeoutMs). */
export const EMBEDDED_STATEMENT_TIMEOUT_MS = 250;
/** Statement timeout on Postgres (and the in-memory engine) when `limits.statementTimeoutMs` is not given. */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 5_000;

/**
 * The statement timeout when the host sets none, by engine (`database` as the router gets it;
 * absent, the router opens the embedded engine on disk). The embedded engine runs one statement
 * at a time for everyone and stops one by restarting its worker, so its timeout is how long one
 * client can keep every other client waiting, plus that restart: short enough that another
 * client's cheap read still answers within a second (docs/limits.md). In memory a statement
 * cannot be stopped at all, so a short timeout would only fail requests: it keeps Postgres's.
 */
export function defaultStatementTimeoutMs(database: Knex | undefined): number {
  if (database === undefined) return EMBEDDED_STATEMENT_TIMEOUT_MS;
  return (database.client as BoundableClient).stopsStatementsByRestart === true ? EMBEDDED_STATEMENT_TIMEOUT_MS : DEFAULT_STATEMENT_TIMEOUT_MS;
}

/** Units of one client that may wait for a connection when `limits.maxWaitingPerClient` is not given. */
export const DEFAULT_MAX_WAITING_PER_CLIENT = 32;
/** Units of all clients together that may wait for a connection of one pool. */
export const MAX_WAITING = 1_000;

/** How a pool is shared among clients (DatabaseContext.client): the router's resolved limits (lib/options.ts). */
export interface FairnessLimits {
  /** Connections one client's work may hold at once. Default: half the pool's `max`, at least 1 (only the pool knows its size). */
  maxConnectionsPerClient?: number;
  /** Units of one client that may wait for a connection; one more is refused at once. */
  maxWaitingPerClient: number;
}

/**
 * A statement whose client left is cancelled once it has run this long. Shorter ones finish: for
 * the embedded engine a cancel restarts its worker, which every client waits for (docs/limits.md,
 * "How a statement is cancelled"), dearer than a short statement; on Postgres it costs a
 * connection to the server.
 */
export const ABANDONED_STATEMENT_GRACE_MS = 500;

/** Knex's client as this module uses it; `_query` and `cancelQuery` are Knex internals every dialect has. */
interface BoundableClient extends StoppableClient {
  constructor: unknown;
  _query(connection: unknown, obj: unknown): Promise<unknown>;
  acquireConnection(): Promise<unknown>;
  releaseConnection(connection: unknown): Promise<unknown>;
  /** Set on a transaction's client: its one connection is the transaction's. */
  transacting?: boolean;
  /** The embedded client's restart after a stopped statement, while it is under way. */
  whenRestarted?(): Promise<unknown> | undefined;
  config?: { pool?: { max?: unknown } };
  [installed]?: true;
  /** Set on the client of a `boundedKnex`: every connection it acquires is bound to this context. */
  [clientContext]?: DatabaseContext;
  /** The pool's own acquire, without the bounds: what acquireWithin bounds by its context, once. */
  [acquireUnbounded]?(): Promise<unknown>;
}

const installed = Symbol('recordbase.statementBounds');
const clientContext = Symbol('recordbase.clientContext');
const acquireUnbounded = Symbol('recordbase.acquireUnbounded');

/**
 * The fair gate in front of each pool whose client has the bounds installed, keyed by the pool
 * itself: Knex's copies of a client (a boundedKnex, withUserParams) share it.
 */
const gates = new WeakMap<object, FairGate>();

/** The gate ticket a held connection's unit holds: given back when the connection is released. */
const connectionTickets = new WeakMap<object, GateTicket>();

/**
 * The context each held connection's statements run under: set when a unit of work acquires
 * the connection within a context (acquireWithin, runTransaction, a boundedKnex), removed
 * when it goes back to the pool. A statement on a connection without one is not bounded.
 */
const connectionContexts = new WeakMap<object, DatabaseContext>();

/**
 * Statements that run even for a client that left: they end a transaction. Refusing one would
 * leave the transaction open on a connection the pool hands to the next request (Knex does not
 * roll back after a failed COMMIT).
 */
const TRANSACTION_END = /^\s*(rollback|commit|release)\b/i;
const ROLLBACK = /^\s*rollback\b/i;

/**
 * Makes every statement that `db` runs on a connection acquired within a database context
 * (lib/db/database-context.ts) bounded by it: cancelled past `statementTimeoutMs` or once its
 * client has gone; and such an acquire refused when no connection is free within
 * `acquireTimeoutMs`. Work acquires within a context through `acquireWithin`, runTransaction
 * (run-statement.ts) or a `boundedKnex`. Statements on other connections (the schema sync, the
 * sweep, a host's own queries on a shared Knex) run as before. Installed once per Knex client;
 * it adds no round trip: a timer per statement, and a cancel only when one is due.
 *
 * A context with a `client` key also passes a fair gate (fair-gate.ts) before it takes a pooled
 * connection: clients take turns, each holds at most `maxConnectionsPerClient` connections, and
 * waits in a queue of at most `maxWaitingPerClient` units (MAX_WAITING for all clients). On the
 * embedded engine (one connection) the turns are the whole fairness. `fairness` is that of the
 * first router to install the bounds on a Knex that several share.
 *
 * How a statement is stopped depends on the engine: on Postgres, a protocol cancel request
 * (cancel-postgres-statement.ts), and if the statement has not ended
 * CANCEL_GRACE_MS later its connection is dropped and the caller gets `unresponsive`; on the
 * embedded engine, the worker is terminated (on disk) or the caller is answered while the
 * statement runs on (in memory).
 */
export function installStatementBounds(db: Knex, fairness: FairnessLimits): void {
  const client = db.client as unknown as BoundableClient;
  if (client[installed]) return;
  if (isConnectionObject(client.pool)) {
    const capacity = poolSizeOf(client);
    gates.set(
      client.pool,
      new FairGate({
        capacity,
        maxHeldPerClient: fairness.maxConnectionsPerClient ?? Math.max(1, Math.floor(capacity / 2)),
        maxWaitingPerClient: fairness.maxWaitingPerClient,
        maxWaiting: MAX_WAITING,
      }),
    );
  }
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
      const restarted = restartReasonOf(connection);
      if (restarted !== undefined) {
        if (!ROLLBACK.test((obj as { sql?: string }).sql ?? '')) return Promise.reject(restarted);
        return Promise.resolve(Object.assign(obj as object, { response: { command: 'ROLLBACK', rowCount: null, rows: [], fields: [] } }));
      }
      const context = isConnectionObject(connection) ? connectionContexts.get(connection) : undefined;
      if (context === undefined) return runStatement.call(this, connection, obj);
      // The request's shared budget bounds what it costs the database; where a statement cannot be
      // stopped (the in-memory engine) answering early saves nothing, so each keeps the whole timeout.
      let limitMs = canStopStatements(this) ? statementLimitMs(context) : context.statementTimeoutMs;
      const aborted = context.signal?.aborted === true;
      // A client that has gone, or whose budget is cut, gets no new statement, but one that ends a
      // transaction, which keeps the whole timeout (the text is read only then, not per statement).
      if ((aborted || limitMs < context.statementTimeoutMs) && TRANSACTION_END.test((obj as { sql?: string }).sql ?? '')) limitMs = context.statementTimeoutMs;
      else if (aborted) return Promise.reject(new StatementInterruptedError('aborted', undefined, false));
      if (limitMs === 0) return Promise.reject(new StatementInterruptedError('timeout', context.statementTimeoutMs, false));
      return runBounded(this, { context, connection, limitMs }, runStatement.call(this, connection, obj));
    }

    override acquireConnection(): Promise<unknown> {
      const context = this[clientContext];
      if (context === undefined) return acquire.call(this);
      return acquireBounded(this, context, () => acquire.call(this));
    }

    override [acquireUnbounded](): Promise<unknown> {
      return acquire.call(this);
    }

    override releaseConnection(connection: unknown): Promise<unknown> {
      if (!isConnectionObject(connection)) return release.call(this, connection);
      connectionContexts.delete(connection);
      const ticket = connectionTickets.get(connection);
      if (ticket === undefined) return release.call(this, connection);
      connectionTickets.delete(connection);
      // The pool has the connection back before the next client's unit is let through to take it.
      const released = release.call(this, connection);
      // A unit whose statement was stopped by restarting the embedded engine keeps its turn until
      // the engine is back: the next client then waits for the rest of the restart only if it
      // came during it, never for a restart and the next slow statement of the same client. One
      // whose Postgres connection was dropped with its statement still running keeps it until
      // the server has ended that statement: the client's share counts the work it causes.
      const stillBusy = this.whenRestarted?.() ?? orphanedStatementOf(connection);
      if (stillBusy === undefined) ticket.leave();
      else
        void stillBusy.then(
          () => ticket.leave(),
          () => ticket.leave(),
        );
      return released;
    }
  }
  Object.setPrototypeOf(client, BoundClient.prototype);
  client[installed] = true;
}

/** The size of the client's pool: tarn's `max`, else the configured one, else Knex's default (10). */
function poolSizeOf(client: BoundableClient): number {
  const max = client.pool?.max ?? client.config?.pool?.max;
  return typeof max === 'number' && Number.isSafeInteger(max) && max > 0 ? max : 10;
}

/** The fair gate of `client`'s pool, if its bounds are installed. */
function gateOf(client: BoundableClient): FairGate | undefined {
  return isConnectionObject(client.pool) ? gates.get(client.pool) : undefined;
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
  // Not the client's acquireConnection: a boundedKnex's would bound (and gate) the unit a second time under its own context.
  const unbounded = client[acquireUnbounded];
  return acquireBounded(client, context, () => (unbounded ? unbounded.call(client) : client.acquireConnection()));
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

/** Postgres's largest `statement_timeout`, in milliseconds. */
const MAX_SERVER_TIMEOUT_MS = 2 ** 31 - 1;

/**
 * The text that begins a transaction for `context`'s work on `connection`. On a Postgres server,
 * `BEGIN` with the server's own `statement_timeout` for the transaction (`SET LOCAL`, in the same
 * round trip): what is left of the unit's time, plus the cancel's grace. It is the backstop that
 * needs no cancel: it ends the transaction's statements even where recordbase cannot (its process
 * gone, the cancel lost on the way), and it ends with the transaction, so the session goes back
 * to the pool as the host made it. Elsewhere (the embedded engine, which stops a statement by
 * restarting its worker; work without bounds) plain `BEGIN;`.
 */
export function transactionBeginSql(connection: unknown, context: DatabaseContext | undefined): string {
  if (context === undefined || !isPostgresClient(connection)) return 'BEGIN;';
  const backstopMs = statementLimitMs(context) + CANCEL_GRACE_MS;
  return backstopMs > MAX_SERVER_TIMEOUT_MS ? 'BEGIN;' : `BEGIN; SET LOCAL statement_timeout = ${backstopMs}`;
}

/**
 * How long the next statement of `context` may run: its statement timeout, or what is left of its
 * unit's shared budget (0: nothing).
 */
export function statementLimitMs(context: DatabaseContext): number {
  return context.budget === undefined ? context.statementTimeoutMs : context.budget.allow(context.statementTimeoutMs);
}

/** One statement that runBounded bounds: its unit's context, the connection it runs on, and how long it may run. */
interface BoundedStatement {
  readonly context: DatabaseContext;
  readonly connection: unknown;
  readonly limitMs: number;
}

/**
 * `running` (a statement sent on `connection`), bounded by `context`: one promise and one timer
 * per statement; the cancel's timers and the client-gone listener only when they are due.
 */
function runBounded(client: BoundableClient, statement: BoundedStatement, running: Promise<unknown>): Promise<unknown> {
  const { context, connection, limitMs } = statement;
  const signal = context.signal;
  const started = signal === undefined && context.budget === undefined ? 0 : Date.now();
  return new Promise((resolve, reject) => {
    let stopped: StatementInterruptedError | undefined;
    let graceTimer: NodeJS.Timeout | undefined;
    let abandonTimer: NodeJS.Timeout | undefined;
    let settled = false;
    const finish = () => {
      settled = true;
      context.budget?.spend(Date.now() - started);
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
        dropConnection(client, connection, unresponsive);
        answerEarly(unresponsive);
      }, CANCEL_GRACE_MS);
    };
    const timeoutTimer = setTimeout(stop, limitMs, 'timeout');
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

/**
 * Acquires a pooled connection and binds it to `context`, or gives up after `acquireTimeoutMs`
 * (or when the client leaves) with `busy` (`aborted`). A context with a client key first waits
 * for its turn at the pool's fair gate (refused at once with a QueueFullError when its queue is
 * full); the acquire timeout bounds both waits together. The pool's own request cannot be
 * withdrawn: when it is served later, the connection goes straight back (and the turn with it).
 */
function acquireBounded(client: BoundableClient, context: DatabaseContext, acquire: () => Promise<unknown>): Promise<unknown> {
  if (context.signal?.aborted) return Promise.reject(new StatementInterruptedError('aborted', undefined, false));
  const gate = context.client === undefined ? undefined : gateOf(client);
  return new Promise((resolve, reject) => {
    let settled = false;
    let pending: Promise<unknown> | undefined;
    let ticket: GateTicket | undefined;
    const giveUp = (error: StatementInterruptedError) => {
      if (settled) return;
      settled = true;
      cleanup();
      if (pending === undefined) ticket?.leave();
      else
        pending
          .then((connection) => client.releaseConnection(connection))
          .then(
            () => ticket?.leave(),
            () => ticket?.leave(),
          );
      reject(error);
    };
    const take = () => {
      if (settled) return;
      pending = acquire();
      pending.then(
        (connection) => {
          if (settled) return;
          settled = true;
          cleanup();
          if (isConnectionObject(connection)) {
            connectionContexts.set(connection, context);
            if (ticket !== undefined) connectionTickets.set(connection, ticket);
          } else ticket?.leave();
          resolve(connection);
        },
        (error: unknown) => {
          if (settled) return;
          settled = true;
          cleanup();
          ticket?.leave();
          reject(error);
        },
      );
    };
    if (gate !== undefined) {
      const entry = gate.enter(context.client!, take);
      if ('refused' in entry) {
        settled = true;
        reject(new QueueFullError(entry));
        return;
      }
      ticket = entry;
    }
    const timer = setTimeout(() => giveUp(new StatementInterruptedError('busy', context.acquireTimeoutMs, false)), context.acquireTimeoutMs);
    const stopListening = context.signal?.listen(() => giveUp(new StatementInterruptedError('aborted', undefined, false)));
    const cleanup = () => {
      clearTimeout(timer);
      stopListening?.();
    };
    if (ticket === undefined || ticket.granted) take();
  });
}
