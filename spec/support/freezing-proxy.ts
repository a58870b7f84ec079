/**
 * A loopback TCP proxy that can go silent: while frozen it keeps every connection open and
 * accepts new ones, but forwards nothing in either direction. To the client that is a database
 * host gone quiet behind a network fault: no RST, no FIN, its packets acknowledged (by the
 * proxy's kernel) and never answered, which TCP keepalive does not notice either. `thaw()` lets
 * the held bytes through and traffic flow again.
 */
import net from 'node:net';
import { connectUpstream } from './upstream-socket.js';

/** A running proxy: clients connect to `port` on 127.0.0.1 and reach the target. */
export interface FreezingProxy {
  readonly port: number;
  /** Stops forwarding (held bytes stay queued). */
  freeze(): void;
  /** Forwards again, the queued bytes first. */
  thaw(): void;
  /** Closes the listener and every connection. */
  close(): Promise<void>;
}

/** Starts a proxy to `target` (host and port) on an ephemeral port of 127.0.0.1. */
export async function startFreezingProxy(target: { host: string; port: number }): Promise<FreezingProxy> {
  let frozen = false;
  const sockets = new Set<net.Socket>();
  const pairs = new Set<[net.Socket, net.Socket]>();

  const server = net.createServer((client) => {
    const upstream = connectUpstream(client, target, sockets);
    client.pipe(upstream);
    upstream.pipe(client);
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    client.on('close', () => pairs.delete(pair));
    if (frozen) pause(pair);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));

  // Unpiping (rather than only pausing) matters: pipe() resumes a paused source on 'drain'.
  function pause([client, upstream]: [net.Socket, net.Socket]): void {
    client.unpipe(upstream);
    upstream.unpipe(client);
    client.pause();
    upstream.pause();
  }

  return {
    port: (server.address() as net.AddressInfo).port,
    freeze() {
      frozen = true;
      for (const pair of pairs) pause(pair);
    },
    thaw() {
      frozen = false;
      for (const [client, upstream] of pairs) {
        client.pipe(upstream);
        upstream.pipe(client);
      }
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
