import { performance } from 'node:perf_hooks';
import type { Knex } from 'knex';
import { traceparentOf } from '../../telemetry/start-span.js';
import { recordConnectionWait, recordGateWait } from '../../telemetry/telemetry-metrics.js';
import { TRACEPARENT_SESSION_SETTING } from '../shared-names.js';
import type { DatabaseContext } from './database-context.js';
import { FairGate, type GateTicket } from './fair-gate.js';
import { CANCEL_GRACE_MS, canStopStatements, cancelRunning, closeConnection, dropConnection, isConnectionObject, isPostgresClient, orphanedStatementOf, restartReasonOf, strayCancel, wasCancelled, type StoppableClient } from './stop-statement.js';
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
  return (database.client as PoolClient).stopsStatementsByRestart === true ? EMBEDDED_STATEMENT_TIMEOUT_MS : DEFAULT_STATEMENT_TIMEOUT_MS;
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

/**
 * The parts of a Knex client this module uses, all of them its public methods and properties:
 * its pool's acquire and release, the pool itself (as a key, and its size), its events.
 */
interface PoolClient extends StoppableClient {
  acquireConnection(): Promise<unknown>;
  releaseConnection(connection: unknown): Promise<unknown>;
  /** The embedded client's restart after a stopped statement, while it is under way. */
  whenRestarted?(): Promise<unknown> | undefined;
  config?: { pool?: { max?: unknown } };
}

/**
 * The fair gate in front of each pool recordbase shares among clients, keyed by the pool itself:
 * Knex's copies of a client share it. Kept here, beside the host's objects, never on them.
 */
const gates = new WeakMap<object, FairGate>();

/** The gate ticket a held connection's unit holds: given back when the connection is released. */
const connectionTickets = new WeakMap<object, GateTicket>();

/**
 * The context each held connection's statements run under: set when a unit of work acquires
 * the connection within a context (acquireWithin), removed when it goes back to the pool.
 */
const connectionContexts = new WeakMap<object, DatabaseContext>();

/**
 * Statements that run even for a client that left: they end a transaction. Refusing one would
 * leave the transaction open on a connection that goes back to the pool.
 */
const TRANSACTION_END = /^\s*(rollback|commit|release)\b/i;
const ROLLBACK = /^\s*rollback\b/i;

/**
 * Shares `db`'s pool fairly among the clients of recordbase's units of work (DatabaseContext's
 * `client`): before a unit takes a pooled connection it passes a fair gate (fair-gate.ts), where
 * clients take turns, each holds at most `maxConnectionsPerClient` connections and waits in a
 * queue of at most `maxWaitingPerClient` units (MAX_WAITING for all clients). On the embedded
 * engine (one connection) the turns are the whole fairness. The gate is recordbase's own,
 * kept beside the pool: the host's Knex instance, its client and its pool are left exactly as
 * the host made them, and the host's own queries pass no gate and no timeout. `fairness` is that
 * of the first router to share a pool that several share.
 *
 * Every statement recordbase sends goes through its own send path (run-statement.ts), which
 * acquires within a context (acquireWithin), sends, and releases (releaseWithin): there the
 * statement is bounded (sendWithin) by `statementTimeoutMs`, its unit's budget, and its client
 * leaving.
 */
export function shareConnectionsFairly(db: Knex, fairness: FairnessLimits): void {
  const client = db.client as unknown as PoolClient;
  if (!isConnectionObject(client.pool) || gates.has(client.pool)) return;
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

/** How recordbase sends its statements on one pool: the router's resolved options (lib/options.ts). */
export interface SendPathSettings {
  /** How the pool is shared among clients (shareConnectionsFairly). */
  readonly fairness: FairnessLimits;
  /**
   * Whether statements whose text is fixed per collection go out as named prepared statements
   * (run-statement.ts's `preparedName`). `false` for a pooler in transaction mode that does not
   * keep them (PgBouncer before 1.21, or without `max_prepared_statements`): every statement is
   * then sent unnamed, parsed anew on whatever server connection the pooler gives.
   */
  readonly preparedStatements: boolean;
}

/**
 * Pools whose statements go out without a prepared-statement name, keyed by the pool as the
 * gates are. A set, not a value per router: when several routers share a pool and one says
 * `preparedStatements: false`, names are off for all of them, since a name sent by any of them
 * fails behind such a pooler, and an unnamed statement works everywhere.
 */
const unnamedPools = new WeakSet<object>();

/**
 * Configures recordbase's send path for `db`'s pool, beside the pool and never on it: its fair
 * gate (shareConnectionsFairly) and whether statements are sent with prepared-statement names
 * (sendsPreparedStatements). The record store and every other sender know nothing of either.
 */
export function configureSendPath(db: Knex, settings: SendPathSettings): void {
  shareConnectionsFairly(db, settings.fairness);
  const pool = (db.client as unknown as PoolClient).pool;
  if (!settings.preparedStatements && isConnectionObject(pool)) unnamedPools.add(pool);
}

/** Whether a statement sent on `db`'s pool may carry a prepared-statement name (configureSendPath). */
export function sendsPreparedStatements(db: Knex): boolean {
  const pool = (db.client as unknown as PoolClient).pool;
  return !isConnectionObject(pool) || !unnamedPools.has(pool);
}

/** The size of the client's pool: tarn's `max`, else the configured one, else Knex's default (10). */
function poolSizeOf(client: PoolClient): number {
  const max = client.pool?.max ?? client.config?.pool?.max;
  return typeof max === 'number' && Number.isSafeInteger(max) && max > 0 ? max : 10;
}

/** The fair gate of `client`'s pool, if recordbase shares it (shareConnectionsFairly). */
function gateOf(client: PoolClient): FairGate | undefined {
  return isConnectionObject(client.pool) ? gates.get(client.pool) : undefined;
}

/** The context `connection`'s statements run under now, if a unit of work holds it within one. */
export function contextOfConnection(connection: object): DatabaseContext | undefined {
  return connectionContexts.get(connection);
}

/**
 * A connection for `context`'s work from `db`'s pool, bound to the context until it goes back
 * (releaseWithin): refused with `busy` past `acquireTimeoutMs`, `aborted` once the client has
 * gone. Without a context, the pool's connection as it comes.
 */
export function acquireWithin(db: Knex, context: DatabaseContext | undefined): Promise<unknown> {
  const client = db.client as unknown as PoolClient;
  if (context === undefined) return client.acquireConnection();
  return acquireBounded(client, context, () => client.acquireConnection());
}

/**
 * Gives back a connection acquireWithin gave, with its unit's turn at the fair gate. A connection
 * a cancel was sent to is closed first (the pool then replaces it): a cancel that lands late must
 * find no other request there.
 */
export async function releaseWithin(db: Knex, connection: unknown): Promise<void> {
  const client = db.client as unknown as PoolClient;
  if (!isConnectionObject(connection)) {
    await client.releaseConnection(connection);
    return;
  }
  connectionContexts.delete(connection);
  if (wasCancelled(connection)) await closeConnection(connection);
  const ticket = connectionTickets.get(connection);
  if (ticket === undefined) {
    await client.releaseConnection(connection);
    return;
  }
  connectionTickets.delete(connection);
  // The pool has the connection back before the next client's unit is let through to take it.
  const released = client.releaseConnection(connection);
  // A unit whose statement was stopped by restarting the embedded engine keeps its turn until
  // the engine is back: the next client then waits for the rest of the restart only if it
  // came during it, never for a restart and the next slow statement of the same client. One
  // whose Postgres connection was dropped with its statement still running keeps it until
  // the server has ended that statement: the client's share counts the work it causes.
  const stillBusy = client.whenRestarted?.() ?? orphanedStatementOf(connection);
  if (stillBusy === undefined) ticket.leave();
  else
    void stillBusy.then(
      () => ticket.leave(),
      () => ticket.leave(),
    );
  await released;
}

/** What a statement is sent as: node-postgres's public QueryConfig, and Knex's `query` event's fields. */
export interface SentStatement {
  readonly sql: string;
  readonly bindings: readonly unknown[];
  /** node-postgres's QueryConfig: `text` with `$n` placeholders, `values`, and `name`/`types` when set. */
  readonly config: { text: string; values: unknown[]; name?: string; types?: unknown };
}

/** node-postgres's client (both engines' connections), as far as sending a statement needs it: its public `query`. */
interface QueryConnection {
  query(config: SentStatement['config']): Promise<unknown>;
}

/** Knex's client as the dialect fallback uses it: its query method (which emits the `query` event itself). */
interface DialectClient {
  emit(event: string, data: unknown): boolean;
  query(connection: unknown, obj: { sql: string; bindings: unknown[]; options: { name?: string; types?: unknown } }): Promise<{ response: unknown }>;
}

/**
 * Sends one statement: on a node-postgres client (both engines' connections, and every Knex of
 * the `pg` client) with its public `query`; on a connection of another Postgres dialect (a
 * host's knex-pglite, whose connections are PGlite instances) through that dialect's Knex client
 * `query`, which knows its connection. Either way Knex's `query` event is emitted once.
 */
function send(client: DialectClient, connection: unknown, statement: SentStatement): Promise<unknown> {
  if (isConnectionObject(connection) && 'processID' in connection && typeof (connection as unknown as Partial<QueryConnection>).query === 'function') {
    client.emit('query', { sql: statement.sql, bindings: statement.bindings, method: 'raw' });
    return (connection as unknown as QueryConnection).query(statement.config);
  }
  const { name, types } = statement.config;
  return client.query(connection, { sql: statement.sql, bindings: [...statement.bindings], options: name === undefined ? { types } : { name, types } }).then((obj) => obj.response);
}

/**
 * Sends `statement` on `connection` with node-postgres's public `query`, bounded by `context`
 * when there is one: cancelled past its limit (the statement timeout, or what is left of its
 * unit's budget) or once its client has gone. Emits Knex's public `query` event on `db`'s client
 * first, so a host's query log (`knex.on('query')`) shows recordbase's statements as before.
 */
export function sendWithin(db: Knex, connection: unknown, statement: SentStatement, context: DatabaseContext | undefined): Promise<unknown> {
  const client = db.client as unknown as PoolClient & DialectClient;
  const restarted = restartReasonOf(connection);
  if (restarted !== undefined) {
    if (!ROLLBACK.test(statement.sql)) return Promise.reject(restarted);
    return Promise.resolve({ command: 'ROLLBACK', rowCount: null, rows: [], fields: [] });
  }
  let limitMs = 0;
  if (context !== undefined) {
    // The request's shared budget bounds what it costs the database; where a statement cannot be
    // stopped (the in-memory engine) answering early saves nothing, so each keeps the whole timeout.
    limitMs = canStopStatements(client) ? statementLimitMs(context) : context.statementTimeoutMs;
    const aborted = context.signal?.aborted === true;
    // A client that has gone, or whose budget is cut, gets no new statement, but one that ends a
    // transaction, which keeps the whole timeout (the text is read only then, not per statement).
    if ((aborted || limitMs < context.statementTimeoutMs) && TRANSACTION_END.test(statement.sql)) limitMs = context.statementTimeoutMs;
    else if (aborted) return Promise.reject(new StatementInterruptedError('aborted', undefined, false));
    if (limitMs === 0) return Promise.reject(new StatementInterruptedError('timeout', context.statementTimeoutMs, false));
  }
  const running = send(client, connection, statement);
  if (context === undefined) return running;
  return runBounded(client, { context, connection, limitMs }, running);
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
 * restarting its worker; work without bounds) plain `BEGIN;`. A traced unit's transaction also
 * carries its span's `traceparent` (TRACEPARENT_SESSION_SETTING), which the realtime capture
 * trigger copies into the outbox, so a delivery on any instance links to the write.
 */
export function transactionBeginSql(connection: unknown, context: DatabaseContext | undefined): string {
  const begin = transactionBeginOf(connection, context);
  const traceparent = traceparentOf(context?.span);
  // traceparentOf writes only hex digits and dashes: nothing to escape.
  return traceparent === null ? begin : `BEGIN; ${begin === 'BEGIN;' ? '' : `${begin.slice('BEGIN; '.length)}; `}SET LOCAL ${TRACEPARENT_SESSION_SETTING} = '${traceparent}'`;
}

function transactionBeginOf(connection: unknown, context: DatabaseContext | undefined): string {
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
function runBounded(client: StoppableClient, statement: BoundedStatement, running: Promise<unknown>): Promise<unknown> {
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
function acquireBounded(client: PoolClient, context: DatabaseContext, acquire: () => Promise<unknown>): Promise<unknown> {
  if (context.signal?.aborted) return Promise.reject(new StatementInterruptedError('aborted', undefined, false));
  const gate = context.client === undefined ? undefined : gateOf(client);
  return new Promise((resolve, reject) => {
    let settled = false;
    let pending: Promise<unknown> | undefined;
    let ticket: GateTicket | undefined;
    // The waits at the gate and for the pool, each its own histogram (docs/observability.md).
    const enteredAt = performance.now();
    let takenAt = 0;
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
      takenAt = performance.now();
      if (ticket !== undefined) recordGateWait((takenAt - enteredAt) / 1000);
      pending = acquire();
      pending.then(
        (connection) => {
          if (settled) return;
          settled = true;
          cleanup();
          recordConnectionWait((performance.now() - takenAt) / 1000);
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
