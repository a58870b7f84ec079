import type { Knex } from 'knex';
import pg from 'pg';
import type { Logger } from '../../logger.js';
import { quoteIdent as q } from '../../sql-fragment.js';
import { LISTENER_APPLICATION_NAME } from '../shared-names.js';

/** What the listener reports: a notification, and "(re)connected: read what you may have missed". */
export interface ListenerEvents {
  onNotification(channel: string, payload: string): void;
  onConnected(): void;
}

/**
 * Where LISTEN runs (`realtime.listen`, docs/realtime.md): a connection string, node-postgres client
 * settings, or a function that makes a new, unconnected `pg.Client` (recordbase connects it, and
 * ends it). Absent: a connection made with the Knex's own settings.
 */
export type ListenConnection = string | ListenClientConfig | (() => ListenClient | Promise<ListenClient>);

/**
 * node-postgres's client settings (`pg.ClientConfig`), passed on as given. Typed by shape here, as
 * is ListenClient, so that the package's public types do not need `@types/pg` in a host's app.
 */
export interface ListenClientConfig {
  readonly [setting: string]: unknown;
}

/** A new, unconnected node-postgres client (`new pg.Client(...)`), as a `realtime.listen` function returns it. */
export interface ListenClient {
  connect(): Promise<unknown>;
  end(): Promise<unknown>;
}

/** A running listener. */
export interface NotificationListener {
  /** Where it listens, for messages: `host:port` of its connection, or `the embedded engine`. */
  readonly where: string;
  /** Stops it for good. */
  close(): Promise<void>;
}

/** Reconnect delays after the listening connection is lost: doubling from the first, capped at the last. */
const RECONNECT_DELAYS_MS = [100, 5_000] as const;

/** The embedded client's own notification hook (embedded-knex-client.ts). */
interface EmbeddedListenClient {
  listen(channels: readonly string[], handler: (channel: string, payload: string) => void): Promise<() => Promise<void>>;
}

function isEmbedded(client: unknown): client is EmbeddedListenClient {
  return typeof (client as Partial<EmbeddedListenClient>).listen === 'function';
}

/** A node-postgres client: it emits `notification` events, which is how LISTEN reaches us. */
function canListen(connection: unknown): connection is pg.Client {
  const candidate = connection as Partial<pg.Client> | null;
  return typeof candidate?.on === 'function' && typeof candidate.query === 'function' && typeof candidate.end === 'function';
}

/**
 * LISTENs on `channels` (realtime's, from shared-names.ts) and reports what arrives. On Postgres:
 * one dedicated connection, outside the pool (a pooled one could be recycled, or sit behind a
 * transaction-pooling proxy), named LISTENER_APPLICATION_NAME; when it drops it is reopened with
 * backoff, re-LISTENed, and `onConnected` tells the caller to catch up on what it may have missed.
 * On the embedded engine: the one connection the pool holds (embedded-knex-client.ts), the same
 * events.
 */
export async function startNotificationListener(options: {
  db: Knex;
  /** `realtime.listen`; absent: the Knex's own settings. */
  connection?: ListenConnection;
  channels: readonly string[];
  events: ListenerEvents;
  logger: Logger;
}): Promise<NotificationListener> {
  const { db, channels, events, logger } = options;
  if (isEmbedded(db.client)) {
    if (options.connection !== undefined) {
      throw new Error('realtime.listen is for a Postgres server; the embedded engine listens on its own connection: remove realtime.listen, or pass a Knex of a Postgres server as `database`.');
    }
    const stop = await db.client.listen(channels, events.onNotification);
    events.onConnected();
    return { where: 'the embedded engine', close: stop };
  }
  const open = openListenConnection(db, options.connection);
  let closed = false;
  let connection: pg.Client | undefined;
  let retryTimer: NodeJS.Timeout | undefined;
  let failures = 0;
  let where = describeConnection(undefined, options.connection);

  const connect = async (): Promise<void> => {
    const next = await open();
    where = describeConnection(next, options.connection);
    let lost = false;
    const onLost = (reason: unknown) => {
      if (lost) return;
      lost = true;
      if (connection === next) connection = undefined;
      next.removeAllListeners('notification');
      void next.end().catch(() => undefined);
      if (closed) return;
      logger.warn(`realtime: the listening connection was lost (${reason instanceof Error ? reason.message : String(reason)}); reconnecting`);
      schedule();
    };
    next.on('error', onLost);
    next.on('end', () => onLost('connection ended'));
    next.on('notification', (message: pg.Notification) => events.onNotification(message.channel, message.payload ?? ''));
    try {
      await next.query(`SET application_name = '${LISTENER_APPLICATION_NAME}'`);
      for (const channel of channels) await next.query(`LISTEN ${q(channel)}`);
    } catch (error) {
      onLost(error);
      throw error;
    }
    if (closed) {
      await next.end().catch(() => undefined);
      return;
    }
    connection = next;
    failures = 0;
    events.onConnected();
  };

  const schedule = () => {
    if (closed || retryTimer) return;
    const delay = Math.min(RECONNECT_DELAYS_MS[0] * 2 ** failures, RECONNECT_DELAYS_MS[1]);
    failures++;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      connect().catch((error: unknown) => {
        logger.warn(`realtime: could not reopen the listening connection (${error instanceof Error ? error.message : String(error)}); retrying`);
        schedule();
      });
    }, delay);
    retryTimer.unref();
  };

  await connect();
  return {
    get where() {
      return where;
    },
    async close() {
      closed = true;
      if (retryTimer) clearTimeout(retryTimer);
      const last = connection;
      connection = undefined;
      if (last) {
        last.removeAllListeners('end');
        await last.end().catch(() => undefined);
      }
    },
  };
}

/** `host:port` of a listening connection (no user, no password), or what is known of it before it connects. */
function describeConnection(connection: pg.Client | undefined, given: ListenConnection | undefined): string {
  if (connection && typeof connection.host === 'string') return `${connection.host}:${String(connection.port)}`;
  if (typeof given === 'string') {
    try {
      const url = new URL(given);
      return `${url.hostname}:${url.port || '5432'}`;
    } catch {
      return 'realtime.listen';
    }
  }
  return given === undefined ? "the Knex's connection" : 'realtime.listen';
}

/**
 * How the listener opens its connection: with `given` (realtime.listen), a client of its own
 * outside the Knex's pool; without, a raw connection of the Knex's client (its own settings).
 */
function openListenConnection(db: Knex, given: ListenConnection | undefined): () => Promise<pg.Client> {
  if (given === undefined) {
    const client = db.client as Knex.Client & { acquireRawConnection(): Promise<pg.Client>; destroyRawConnection(connection: pg.Client): Promise<void> };
    return async () => {
      const next = await client.acquireRawConnection();
      if (!canListen(next)) {
        await client.destroyRawConnection(next).catch(() => undefined);
        throw new Error(
          `realtime listens for changes over a node-postgres connection (a Knex with client 'pg') or the embedded engine; ` +
            `this Knex's client (${String((client as { dialect?: unknown }).dialect ?? client.constructor.name)}) gives connections that cannot LISTEN. ` +
            "Pass `realtime: false`, or a Knex with client 'pg'.",
        );
      }
      return next;
    };
  }
  return async () => {
    const made: unknown = typeof given === 'function' ? await given() : new pg.Client(typeof given === 'string' ? { connectionString: given } : (given as pg.ClientConfig));
    if (!canListen(made)) throw new Error('realtime.listen must be a connection string, node-postgres client settings, or a function returning a new pg.Client');
    // Until the listener's own handlers are on: an error of a connection not yet listening must not crash the process.
    const ignore = () => undefined;
    made.on('error', ignore);
    try {
      await made.connect();
    } catch (error) {
      await made.end().catch(() => undefined);
      throw error;
    } finally {
      made.off('error', ignore);
    }
    return made;
  };
}
