/** A node-postgres client (a pooled Knex connection) as far as cancelling its statement needs it. */
export interface PostgresClientLike {
  processID: number | null;
  secretKey: number | null;
  host: string;
  port: number;
  ssl: unknown;
  sslNegotiation?: string;
}

/** node-postgres's wire-protocol connection (`pg.Connection`), the part a cancel request uses. */
interface ProtocolConnection {
  connect(portOrPath: number | string, host?: string): void;
  requestSsl(): void;
  cancel(processID: number, secretKey: number): void;
  on(event: string, listener: (...args: unknown[]) => void): void;
  stream: { destroy(): void };
}

/** `pg.Connection`'s constructor, as Knex's Postgres client exposes it on `client.driver.Connection`. */
export type ProtocolConnectionClass = new (config: { ssl: unknown; sslNegotiation?: string }) => ProtocolConnection;

/**
 * Sends Postgres's CancelRequest for the statement `target` is running: a short connection of
 * its own carrying the backend's pid and secret key, so it needs no sign-in, does not count
 * against max_connections, and cannot hit another session that took over the pid (the secret
 * differs). Over TLS when the target uses it. Resolves when the server has closed the cancel
 * connection, or after `timeoutMs` (the server does not answer); never rejects: a cancel that
 * did not arrive is noticed by the caller as a statement that did not end.
 */
export function sendCancelRequest(options: { Connection: ProtocolConnectionClass; target: PostgresClientLike; timeoutMs: number }): Promise<void> {
  const { target } = options;
  if (target.processID === null || target.secretKey === null) return Promise.resolve();
  const { processID, secretKey } = target;
  return new Promise<void>((resolve) => {
    const connection = new options.Connection({ ssl: target.ssl, sslNegotiation: target.sslNegotiation });
    const timer = setTimeout(() => connection.stream.destroy(), options.timeoutMs);
    timer.unref();
    const finish = () => {
      clearTimeout(timer);
      resolve();
    };
    connection.on('error', finish);
    connection.on('end', finish);
    connection.on('connect', () => {
      if (!target.ssl) connection.cancel(processID, secretKey);
      else if (target.sslNegotiation !== 'direct') connection.requestSsl();
    });
    connection.on('sslconnect', () => connection.cancel(processID, secretKey));
    if (target.host?.startsWith('/')) connection.connect(`${target.host}/.s.PGSQL.${target.port}`);
    else connection.connect(target.port, target.host);
  });
}
