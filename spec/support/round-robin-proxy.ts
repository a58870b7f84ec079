import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A load balancer of the simplest kind, in front of several instances on loopback. */
export interface RoundRobinProxy {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** How many requests each upstream (by index) answered. */
  readonly served: number[];
  /** Upstreams found dead (connection refused); they get no more requests. */
  readonly dead: ReadonlySet<number>;
  close(): Promise<void>;
}

/**
 * Reads a request's whole body, which a proxy keeps to send it again to another upstream; over
 * `maxBytes` it answers 413 itself and resolves undefined.
 */
export async function bufferRequestBody(req: IncomingMessage, res: ServerResponse, maxBytes: number): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) {
      res.writeHead(413).end();
      return undefined;
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** Largest request body the proxy buffers; the tests send a few MiB at most. */
const MAX_BODY_BYTES = 32 * 1024 * 1024;

/**
 * Starts a round-robin HTTP proxy on 127.0.0.1 (port 0) in front of `upstreams` (base URLs).
 * Each request goes to the next live upstream; one that refuses the connection (a killed
 * instance) is marked dead and the request is sent to the next, so clients never see it. The
 * request body is buffered for that retry; a new upstream connection per request (no keep-alive)
 * makes a dead upstream show as a refused connection, never as a request half sent. Every answer
 * carries `x-upstream: <index>`.
 */
export async function startRoundRobinProxy(upstreams: readonly string[]): Promise<RoundRobinProxy> {
  const targets = upstreams.map((base) => new URL(base));
  const served = targets.map(() => 0);
  const dead = new Set<number>();
  let cursor = 0;

  function pickUpstream(): number | undefined {
    for (let tried = 0; tried < targets.length; tried++) {
      const index = cursor++ % targets.length;
      if (!dead.has(index)) return index;
    }
    return undefined;
  }

  /** Sends one request to one upstream; rejects only when no response has begun. */
  function forward(index: number, req: IncomingMessage, body: Buffer, res: ServerResponse): Promise<void> {
    const target = targets[index]!;
    return new Promise((resolve, reject) => {
      const upstream = http.request(
        { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: { ...req.headers, host: target.host }, agent: false },
        (answer) => {
          served[index]!++;
          res.writeHead(answer.statusCode ?? 502, { ...answer.headers, 'x-upstream': String(index) });
          answer.pipe(res);
          answer.on('error', () => res.destroy());
          answer.on('end', () => resolve());
        },
      );
      upstream.on('error', reject);
      upstream.end(body);
    });
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await bufferRequestBody(req, res, MAX_BODY_BYTES);
    if (body === undefined) return;
    for (let index = pickUpstream(); index !== undefined; index = pickUpstream()) {
      try {
        await forward(index, req, body, res);
        return;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ECONNREFUSED' || res.headersSent) {
          if (!res.headersSent) res.writeHead(502).end();
          else res.destroy();
          return;
        }
        dead.add(index);
      }
    }
    res.writeHead(503).end();
  }

  const server = http.createServer((req, res) => void handle(req, res).catch(() => res.destroy()));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    served,
    dead,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
