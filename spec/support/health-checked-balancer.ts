import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { bufferRequestBody } from './round-robin-proxy.js';

/** A load balancer configured as docs/deployment.md ("Rolling restarts") asks, in front of instances on loopback. */
export interface HealthCheckedBalancer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** How many requests each upstream slot answered (a replaced instance's count goes on in its slot). */
  readonly served: number[];
  /** Requests sent again to another upstream: refused by a draining instance (`Recordbase-Refused`), or a refused connection. */
  readonly retried: { drain: number; refused: number };
  /** Points slot `index` at another instance (the one started in place of a stopped one); it gets traffic once its health answers 200. */
  replace(index: number, base: string): void;
  close(): Promise<void>;
}

/** Largest request body the balancer buffers (for a retry); the tests send small JSON bodies. */
const MAX_BODY_BYTES = 1024 * 1024;
/** How long a request may wait for some upstream to be in before the balancer answers 502. */
const NO_UPSTREAM_WAIT_MS = 10_000;

/**
 * Starts a round-robin balancer on 127.0.0.1 (port 0) in front of `upstreams` (base URLs of
 * hosts with the router under `healthPath`'s mount), behaving as a production load balancer
 * configured for draining: it probes `healthPath` on every upstream every `probeMs` and sends
 * requests only to upstreams whose last probe answered 200 (a new upstream is out until it does);
 * a request refused by a draining instance (503 with `Recordbase-Refused`) or whose connection is
 * refused goes to another upstream, and the first upstream is taken out at once. Any other answer,
 * a 503 included, goes back to the client as it is. Bodies are buffered for the retry, and every
 * upstream request has a connection of its own.
 */
export async function startHealthCheckedBalancer(upstreams: readonly string[], options: { healthPath: string; probeMs?: number }): Promise<HealthCheckedBalancer> {
  const targets = upstreams.map((base) => new URL(base));
  const healthy = targets.map(() => false);
  const served = targets.map(() => 0);
  const retried = { drain: 0, refused: 0 };
  let cursor = 0;
  let closed = false;

  function probe(index: number): void {
    const target = targets[index]!;
    const req = http.get({ host: target.hostname, port: target.port, path: options.healthPath, agent: false, timeout: 1_000 }, (res) => {
      res.resume();
      // A probe of an instance replaced meanwhile says nothing about the new one.
      if (targets[index] === target) healthy[index] = res.statusCode === 200;
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => {
      if (targets[index] === target) healthy[index] = false;
    });
  }
  const prober = setInterval(() => targets.forEach((_, index) => probe(index)), options.probeMs ?? 100);
  targets.forEach((_, index) => probe(index));

  function pick(except: ReadonlySet<number>): number | undefined {
    for (let tried = 0; tried < targets.length; tried++) {
      const index = cursor++ % targets.length;
      if (healthy[index] && !except.has(index)) return index;
    }
    return undefined;
  }

  type Outcome = 'answered' | 'drain' | 'refused';

  /** Sends one request to one upstream; a drain refusal or a refused connection is not passed to the client. */
  function forward(index: number, req: IncomingMessage, body: Buffer, res: ServerResponse): Promise<Outcome> {
    const target = targets[index]!;
    return new Promise((resolve, reject) => {
      const upstream = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: { ...req.headers, host: target.host }, agent: false }, (answer) => {
        if (answer.statusCode === 503 && answer.headers['recordbase-refused'] !== undefined) {
          answer.resume();
          resolve('drain');
          return;
        }
        served[index]!++;
        res.writeHead(answer.statusCode ?? 502, { ...answer.headers, 'x-upstream': String(index) });
        answer.pipe(res);
        answer.on('error', () => res.destroy());
        answer.on('end', () => resolve('answered'));
      });
      upstream.on('error', (error: NodeJS.ErrnoException) => (error.code === 'ECONNREFUSED' ? resolve('refused') : reject(error)));
      upstream.end(body);
    });
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await bufferRequestBody(req, res, MAX_BODY_BYTES);
    if (body === undefined) return;
    const tried = new Set<number>();
    const giveUpAt = performance.now() + NO_UPSTREAM_WAIT_MS;
    while (performance.now() < giveUpAt) {
      const index = pick(tried);
      if (index === undefined) {
        // Every upstream is out (or was tried): wait for a probe to bring one back.
        tried.clear();
        await new Promise((resolve) => setTimeout(resolve, 20));
        continue;
      }
      const outcome = await forward(index, req, body, res);
      if (outcome === 'answered') return;
      healthy[index] = false;
      tried.add(index);
      retried[outcome]++;
    }
    res.writeHead(502).end();
  }

  const server = http.createServer((req, res) => void handle(req, res).catch(() => res.destroy()));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    served,
    retried,
    replace(index, base) {
      targets[index] = new URL(base);
      healthy[index] = false;
      probe(index);
    },
    close: () =>
      new Promise((resolve) => {
        if (closed) return resolve();
        closed = true;
        clearInterval(prober);
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
