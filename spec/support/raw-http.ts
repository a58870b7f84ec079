import net from 'node:net';

/** What came back on a raw connection: every byte the server sent, and how the connection ended. */
export interface RawExchange {
  /** The server's bytes as latin1 text, in the order they came. */
  readonly received: string;
  /** `undefined` for a clean close (FIN); otherwise the socket's error code, e.g. ECONNRESET. */
  readonly closedWith: string | undefined;
}

/**
 * Writes `request` (a whole HTTP/1.1 request, as text) on a fresh TCP connection to `baseUrl`
 * and reads until the server closes it. An HTTP client library cannot say what the server sent
 * when the connection is reset after the answer: Node 20's client hands back the response, Node
 * 24's reports ECONNRESET instead. The bytes on the socket are the same on both.
 */
export function exchangeRaw(baseUrl: string, request: string, timeoutMs = 10_000): Promise<RawExchange> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    let closedWith: string | undefined;
    socket.setTimeout(timeoutMs, () => {
      socket.destroy();
      reject(new Error(`no close within ${timeoutMs} ms; received ${Buffer.concat(chunks).length} bytes`));
    });
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      closedWith ??= err.code ?? err.message;
    });
    socket.on('close', () => resolve({ received: Buffer.concat(chunks).toString('latin1'), closedWith }));
    socket.write(request, 'latin1');
  });
}
