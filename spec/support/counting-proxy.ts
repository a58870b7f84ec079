/**
 * A loopback TCP proxy in front of Postgres that reads what clients send, as the server would:
 * each statement of the wire protocol (a simple Query, or an Execute of the extended protocol,
 * which node-postgres uses for every statement with parameters) with its text when the client
 * sent one (a Query's, or the Parse before an Execute; a prepared statement reused sends none).
 * What it counts is what reached the server, whatever client library or send path built it.
 */
import net from 'node:net';
import { connectUpstream } from './upstream-socket.js';

/** One statement a client sent: its text, empty for a prepared statement executed again by name. */
export interface SentStatement {
  readonly text: string;
}

/** A running proxy: clients connect to `port` on 127.0.0.1 and reach the target. */
export interface CountingProxy {
  readonly port: number;
  /** Every statement sent through the proxy since it started or since the last `reset()`. */
  readonly sent: readonly SentStatement[];
  reset(): void;
  /** Closes the listener and every connection. */
  close(): Promise<void>;
}

/** Starts a counting proxy to `target` on an ephemeral port of 127.0.0.1 (no TLS: the client must not ask for it). */
export async function startCountingProxy(target: { host: string; port: number }): Promise<CountingProxy> {
  const sent: SentStatement[] = [];
  const sockets = new Set<net.Socket>();

  const server = net.createServer((client) => {
    const upstream = connectUpstream(client, target, sockets);
    const read = readFrontendMessages((statement) => sent.push(statement));
    client.on('data', (chunk: Buffer) => read(chunk));
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));

  return {
    port: (server.address() as net.AddressInfo).port,
    sent,
    reset() {
      sent.length = 0;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * A reader of one connection's frontend stream: the startup message first (no type byte), then
 * typed messages (a byte, a 4-byte length that counts itself, the body), split across chunks as
 * TCP delivers them.
 */
function readFrontendMessages(onStatement: (statement: SentStatement) => void): (chunk: Buffer) => void {
  let pending = Buffer.alloc(0);
  let started = false;
  let parsed = '';
  return (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    for (;;) {
      if (!started) {
        if (pending.length < 4) return;
        const length = pending.readInt32BE(0);
        if (pending.length < length) return;
        pending = pending.subarray(length);
        started = true;
        continue;
      }
      if (pending.length < 5) return;
      const type = String.fromCharCode(pending[0]!);
      const length = pending.readInt32BE(1);
      if (pending.length < 1 + length) return;
      const body = pending.subarray(5, 1 + length);
      pending = pending.subarray(1 + length);
      if (type === 'Q') onStatement({ text: cString(body, 0) });
      else if (type === 'P') parsed = cString(body, body.indexOf(0) + 1); // name, then the text
      else if (type === 'E') {
        onStatement({ text: parsed });
        parsed = '';
      }
    }
  };
}

/** The NUL-terminated string at `offset`. */
function cString(body: Buffer, offset: number): string {
  const end = body.indexOf(0, offset);
  return body.toString('utf8', offset, end === -1 ? body.length : end);
}
