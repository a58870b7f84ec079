import { BACKEND_LOOK_TIMEOUT_MS, BACKEND_WATCH_INTERVAL_MS, BACKEND_WATCH_MAX_MS, BackendWatcher, type WatchConnection } from './backend-watcher.js';
import { sendCancelRequest, type PostgresClientLike, type ProtocolConnectionClass } from './cancel-postgres-statement.js';
import pg from 'pg';
import type { StatementInterruptedError } from './statement-interrupted-error.js';

/**
 * How a running statement is stopped, engine by engine, for the statement bounds
 * (statement-bounds.ts): a cancel request on Postgres, the worker's restart on the embedded engine
 * on disk; a connection whose statement outlived its cancel is dropped, and its backend watched
 * until the server has ended the statement.
 */

/** A Knex client as stopping its statements needs it (a part of statement-bounds.ts's). */
export interface StoppableClient {
  cancelQuery?(connection: unknown): Promise<unknown>;
  canCancelQuery?: boolean;
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
  if (isPostgresClient(connection)) {
    // Closed when it goes back to the pool (wasCancelled): a cancel that lands late must find no other request there.
    cancelledConnections.set(connection, reason);
    await sendCancelRequest({ Connection: pg.Connection as unknown as ProtocolConnectionClass, target: connection, timeoutMs: CANCEL_GRACE_MS });
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
 * Gives up on a connection whose statement outlived its cancel: node-postgres's public `end()`,
 * which closes the socket at once while a statement runs, so the statement's promise settles and
 * the connection ends (Knex's pool, which hears its `end`, replaces it). The server goes on with
 * the statement until it notices the cancel (a backend that is planning may take long to): a
 * Postgres connection is watched until its backend has ended it. `reason` is what the caller
 * already answered with.
 */
export function dropConnection(client: StoppableClient, connection: unknown, reason: Error): void {
  if (isPostgresClient(connection) && connection.processID !== null && client.acquireRawConnection && client.destroyRawConnection) orphanedStatements.set(connection, backendWatcherOf(client).waitUntilGone(connection.processID));
  if (isConnectionObject(connection)) droppedConnections.set(connection, reason);
  void (connection as Partial<EndableConnection>).end?.().catch(() => undefined);
}

/** Connections dropped by dropConnection, and why. */
const droppedConnections = new WeakMap<object, Error>();

/** node-postgres's client as far as ending it goes: its public `end()`. */
interface EndableConnection {
  end(): Promise<void>;
}

/** Whether a cancel was sent to `connection` (then it must not be handed out again: closeConnection). */
export function wasCancelled(connection: object): boolean {
  return cancelledConnections.has(connection) && !droppedConnections.has(connection);
}

/** How long closing a cancelled connection may take before it goes back to the pool anyway. */
const CLOSE_TIMEOUT_MS = 1_000;

/**
 * Ends a connection a cancel was sent to (node-postgres's public `end()`), before it goes back to
 * the pool: once ended, Knex's pool, which hears its `end`, replaces it instead of handing it out.
 * Waits for the end at most CLOSE_TIMEOUT_MS (a server that does not close the socket).
 */
export async function closeConnection(connection: object): Promise<void> {
  droppedConnections.set(connection, cancelledConnections.get(connection) ?? new Error('closed'));
  const ended = (connection as Partial<EndableConnection>).end?.().catch(() => undefined);
  if (ended === undefined) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([ended, new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_TIMEOUT_MS)))]);
  clearTimeout(timer);
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
