import { BACKEND_LOOK_TIMEOUT_MS, BACKEND_WATCH_INTERVAL_MS, BACKEND_WATCH_MAX_MS, BackendWatcher, type WatchConnection } from './backend-watcher.js';
import { sendCancelRequest, type PostgresClientLike, type ProtocolConnectionClass } from './cancel-postgres-statement.js';
import type { StatementInterruptedError } from './statement-interrupted-error.js';

/**
 * How a running statement is stopped, engine by engine, for the statement bounds
 * (bound-statements.ts): a cancel request on Postgres, the worker's restart on the embedded engine
 * on disk; a connection whose statement outlived its cancel is dropped, and its backend watched
 * until the server has ended the statement.
 */

/** A Knex client as stopping its statements needs it (a part of bound-statements.ts's). */
export interface StoppableClient {
  cancelQuery?(connection: unknown): Promise<unknown>;
  canCancelQuery?: boolean;
  /** The Postgres driver Knex loaded (`pg`): its protocol `Connection` sends cancel requests. */
  driver?: { Connection?: ProtocolConnectionClass } | null;
  /** The embedded client's cancel (embedded-knex-client.ts): false when the statement cannot be stopped. */
  cancelStatement?(connection: unknown, reason: Error): Promise<boolean>;
  /** Set by the embedded client on disk: stopping a statement restarts the engine for everyone. */
  stopsStatementsByRestart?: boolean;
  /** Knex's pool (tarn), shared by the client's copies. */
  pool?: { max?: unknown } | null;
  /** A connection outside the pool, and its end (Knex's own, as the realtime listener uses them). */
  acquireRawConnection?(): Promise<unknown>;
  destroyRawConnection?(connection: unknown): Promise<unknown>;
}

/**
 * Whether the engine can stop a running statement: Postgres (a cancel request) and the embedded
 * engine on disk (its worker restarted) can; the in-memory engine cannot (the caller is answered
 * while the statement runs on to its end).
 */
export function canStopStatements(client: StoppableClient): boolean {
  return client.cancelStatement === undefined || client.stopsStatementsByRestart === true;
}

/** A connection as a WeakMap key (every engine's is an object; anything else is never bound). */
export function isConnectionObject(connection: unknown): connection is object {
  return typeof connection === 'object' && connection !== null;
}

/**
 * After a cancel, how long a statement may take to end before its connection is dropped: a
 * database that does not answer a cancel this quickly is treated as unreachable.
 */
export const CANCEL_GRACE_MS = 2_000;

/**
 * Connections a cancel was sent to, and why. A cancel that arrives just after its statement ended
 * hits the next statement of the same session instead: that one fails as query_canceled, and is
 * reported with the original reason. Such a connection is also marked for the pool to discard
 * (see cancelRunning), so the stray cancel can never reach another request.
 */
const cancelledConnections = new WeakMap<object, StatementInterruptedError>();
const QUERY_CANCELED = '57014';

/**
 * Embedded connections whose worker was terminated to stop a statement, and why. The session is
 * gone, and the transaction it held with it (rolled back when the next worker recovers): a
 * ROLLBACK that Knex sends after the failed statement succeeds at once, any other statement
 * fails with that reason. Sent, the ROLLBACK would fail with a connection error, which Knex
 * reports instead of the transaction's own error (a statement timeout would reach the client
 * as "unavailable").
 */
const restartedConnections = new WeakMap<object, StatementInterruptedError>();

/** Why `connection`'s embedded worker was restarted under it, if it was (see restartedConnections). */
export function restartReasonOf(connection: unknown): StatementInterruptedError | undefined {
  return isConnectionObject(connection) ? restartedConnections.get(connection) : undefined;
}

/** The reason of an earlier cancel on `connection` when `error` is that cancel landing late. */
export function strayCancel(connection: unknown, error: unknown): StatementInterruptedError | undefined {
  if ((error as { code?: unknown } | null)?.code !== QUERY_CANCELED || !isConnectionObject(connection)) return undefined;
  return cancelledConnections.get(connection);
}

/** Cancels what `connection` runs; resolves false when the engine cannot stop a statement. */
export async function cancelRunning(client: StoppableClient, connection: unknown, reason: StatementInterruptedError): Promise<boolean> {
  if (client.cancelStatement) {
    // Marked before the worker goes: the failed statement's ROLLBACK follows at once.
    if (client.stopsStatementsByRestart && isConnectionObject(connection)) restartedConnections.set(connection, reason);
    return client.cancelStatement(connection, reason).catch(() => true);
  }
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

export function isPostgresClient(connection: unknown): connection is PostgresClientLike {
  return typeof (connection as PostgresClientLike | null)?.processID === 'number' && typeof (connection as PostgresClientLike).secretKey === 'number';
}

/**
 * Postgres connections dropped while their statement still ran on the server, and when the
 * server has ended it (see watchOrphanedBackends): the unit keeps its place at the fair gate
 * until then.
 */
const orphanedStatements = new WeakMap<object, Promise<void>>();

/** When the server has ended the statement of `connection`, dropped while it ran; undefined when it was not. */
export function orphanedStatementOf(connection: object): Promise<void> | undefined {
  return orphanedStatements.get(connection);
}

/**
 * Gives up on a connection whose statement outlived its cancel: marked so Knex's pool destroys
 * it instead of handing it out again, and its socket closed so the statement's promise settles.
 * The server goes on with the statement until it notices the cancel (a backend that is planning
 * may take long to): a Postgres connection is watched until its backend has ended it.
 */
export function dropConnection(client: StoppableClient, connection: unknown, reason: Error): void {
  const pgClient = connection as { __knex__disposed?: unknown; connection?: { stream?: { destroy(): void } } };
  pgClient.__knex__disposed = reason;
  if (isPostgresClient(connection) && connection.processID !== null && client.acquireRawConnection && client.destroyRawConnection) orphanedStatements.set(connection, backendWatcherOf(client).waitUntilGone(connection.processID));
  pgClient.connection?.stream?.destroy();
}

/** The watcher of dropped connections' backends, one per pool, made when first needed. */
const backendWatchers = new WeakMap<object, BackendWatcher>();

function backendWatcherOf(client: StoppableClient): BackendWatcher {
  const key = isConnectionObject(client.pool) ? client.pool : client;
  let watcher = backendWatchers.get(key);
  if (watcher === undefined) {
    watcher = new BackendWatcher({
      connect: () => client.acquireRawConnection!() as Promise<WatchConnection>,
      disconnect: async (connection) => void (await client.destroyRawConnection!(connection)),
      intervalMs: BACKEND_WATCH_INTERVAL_MS,
      maxWaitMs: BACKEND_WATCH_MAX_MS,
      lookTimeoutMs: BACKEND_LOOK_TIMEOUT_MS,
    });
    backendWatchers.set(key, watcher);
  }
  return watcher;
}
