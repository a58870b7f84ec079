import net from 'node:net';

/**
 * Opens the upstream side of a test proxy's connection: a socket to `target` for `client`, the two
 * tracked in `sockets` until they close and closed together (either side's close ends both; errors
 * are the close's business). The caller pipes the two as its proxy needs.
 */
export function connectUpstream(client: net.Socket, target: { host: string; port: number }, sockets: Set<net.Socket>): net.Socket {
  const upstream = net.connect(target.port, target.host);
  for (const socket of [client, upstream]) {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => {
      sockets.delete(socket);
      client.destroy();
      upstream.destroy();
    });
  }
  return upstream;
}
