/**
 * The realtime benchmark's load process (forked by bench/realtime-bench.ts), apart from the
 * server under test: it holds the SSE clients (raw HTTP, no SDK, no EventSource) and, for the
 * latency runs, also sends the creates, so that both ends of each delivery are timed on one
 * clock (performance.now() of this process).
 *
 * IPC, one command at a time, each answered:
 * - `open` {url, count, subscription, asUsers}: opens `count` streams, reads each PB_CONNECT and
 *   POSTs `[subscription]` for it (as user i+1 when `asUsers`); answers `opened`.
 * - `latency` {url, rate, warmupSeconds, seconds, settleSeconds, expectedPerCreate}: creates posts at a steady
 *   `rate` per second, each titled with its sequence number, and
 *   times every message each stream receives against the create's response; answers `latency`.
 *   The author of create i is user (i mod min(1000, streams)) + 1: under the owner rule each
 *   create reaches exactly one stream.
 * - `close`: ends every stream; answers `closed` and exits.
 */
import http from 'node:http';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { seededUserId, USER_COUNT, WRITE_MARKER } from './bench-data.js';

export type ClientsCommand =
  | { type: 'open'; url: string; count: number; subscription: string; asUsers: boolean }
  | { type: 'latency'; url: string; rate: number; warmupSeconds: number; seconds: number; settleSeconds: number; expectedPerCreate: number }
  | { type: 'close' };

/** What a latency run measured (times in ms). */
export interface LatencyResult {
  type: 'latency';
  creates: number;
  createErrors: number;
  /** Creates in the measured window (after the warm-up). */
  measuredCreates: number;
  /** Messages expected in the measured window (matching streams x creates) and received. */
  expected: number;
  received: number;
  /** Failed creates by cause (`HTTP <status>` or the error code). */
  createErrorKinds: Record<string, number>;
  /** Messages received twice by one stream (must be 0). */
  duplicates: number;
  /** Messages per measured create, min and max over the creates. */
  perCreateMin: number;
  perCreateMax: number;
  /** Delivery latency: a stream's message time minus its create's response time. */
  p50: number;
  p90: number;
  p99: number;
  max: number;
  /** Messages that arrived before their create's response did (negative latency, counted in the percentiles). */
  beforeResponse: number;
  /** Create response times (request sent to response read). */
  createP50: number;
  createP99: number;
  /** This process's own event-loop delay during the run: the clock's error bar. */
  loopDelayP99: number;
  /** The creates actually sent per second in the measured window. */
  achievedRate: number;
}

const MARKER = 'rt#';
/**
 * Kept-alive connections for the POSTs, closed after 4 s idle: Node's server closes them after
 * 5 s, and reusing one at that moment fails the request (ECONNRESET) through no fault of the server.
 */
const agent = new http.Agent({ keepAlive: true, maxSockets: 64, timeout: 4_000 });

interface Stream {
  index: number;
  clientId?: string;
  request: http.ClientRequest;
}

const streams: Stream[] = [];
/** Arrival times by stream and create: `arrivals[stream * capacity + seq]`; NaN = not received. */
let arrivals = new Float64Array(0);
let capacity = 0;
let duplicates = 0;

function openStream(url: string, index: number): Promise<Stream> {
  return new Promise((resolve, reject) => {
    const stream: Stream = { index, request: undefined as unknown as http.ClientRequest };
    // Own connection per stream (no agent): a stream holds its socket for good.
    stream.request = http.get(`${url}/backend/api/realtime`, { agent: false, headers: { Accept: 'text/event-stream' } }, (res) => {
      if (res.statusCode !== 200) {
        reject(new Error(`stream ${index}: HTTP ${res.statusCode}`));
        res.resume();
        return;
      }
      res.setEncoding('utf8');
      let pending = '';
      res.on('data', (chunk: string) => {
        const now = performance.now();
        const text = pending + chunk;
        const end = text.lastIndexOf('\n\n');
        if (end < 0) {
          pending = text;
          return;
        }
        pending = text.slice(end + 2);
        if (stream.clientId === undefined) {
          const id = /^id:(\S+)\nevent:PB_CONNECT/m.exec(text);
          if (id) {
            stream.clientId = id[1];
            resolve(stream);
          }
        }
        for (let at = text.indexOf(MARKER); at >= 0 && at < end; at = text.indexOf(MARKER, at + 3)) {
          const seq = Number.parseInt(text.slice(at + 3, text.indexOf('#', at + 3)), 10);
          if (!(seq >= 0 && seq < capacity)) continue;
          const slot = index * capacity + seq;
          if (Number.isNaN(arrivals[slot]!)) arrivals[slot] = now;
          else duplicates++;
        }
      });
      res.on('error', () => undefined);
    });
    stream.request.on('error', reject);
  });
}

/** Runs `work` over `items` with at most `limit` at a time. */
async function pool<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
}

/**
 * A JSON POST on a kept-alive connection. `retry`: once more on a connection reset, which is the
 * server closing an idle kept-alive socket just as it is reused (safe for the subscription POST,
 * which sets the same set again; not for creates).
 */
function post(url: string, path: string, body: string, token?: string, retry = false): Promise<{ status: number; text: string }> {
  return send(url, path, body, token).catch((error: NodeJS.ErrnoException) => {
    if (!retry || error.code !== 'ECONNRESET') throw error;
    return send(url, path, body, token);
  });
}

function send(url: string, path: string, body: string, token?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${url}${path}`,
      { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...(token ? { authorization: token } : {}) } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function open(command: Extract<ClientsCommand, { type: 'open' }>): Promise<void> {
  const first = streams.length;
  const indexes = Array.from({ length: command.count }, (_, i) => first + i);
  await pool(indexes, 50, async (index) => {
    const stream = await openStream(command.url, index);
    streams.push(stream);
    const token = command.asUsers ? `user:${seededUserId((index % USER_COUNT) + 1)}` : undefined;
    const answer = await post(command.url, '/backend/api/realtime', JSON.stringify({ clientId: stream.clientId, subscriptions: [command.subscription] }), token, true);
    if (answer.status !== 204) throw new Error(`subscribing stream ${index}: HTTP ${answer.status} ${answer.text.slice(0, 200)}`);
  });
  streams.sort((a, b) => a.index - b.index);
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function latency(command: Extract<ClientsCommand, { type: 'latency' }>): Promise<LatencyResult> {
  const warmupCount = Math.round(command.rate * command.warmupSeconds);
  const total = warmupCount + Math.round(command.rate * command.seconds);
  capacity = total;
  arrivals = new Float64Array(streams.length * total).fill(NaN);
  duplicates = 0;
  const sentAt = new Float64Array(total).fill(NaN);
  const answeredAt = new Float64Array(total).fill(NaN);
  let createErrors = 0;
  const createErrorKinds: Record<string, number> = {};
  const failed = (kind: string) => {
    createErrors++;
    createErrorKinds[kind] = (createErrorKinds[kind] ?? 0) + 1;
  };
  const delay = monitorEventLoopDelay({ resolution: 10 });
  // Authors rotate over the users the streams subscribed as (all of them when there are 1,000 streams).
  const authors = Math.max(1, Math.min(USER_COUNT, streams.length));
  const interval = 1000 / command.rate;
  const start = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let seq = 0; seq < total; seq++) {
    if (seq === warmupCount) delay.enable();
    const wait = start + seq * interval - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const body = JSON.stringify({ title: `${WRITE_MARKER} ${MARKER}${seq}#`, body: 'Written by the realtime benchmark.', views: 1, published: true, author: seededUserId((seq % authors) + 1) });
    sentAt[seq] = performance.now();
    inFlight.push(
      post(command.url, '/backend/api/collections/posts/records', body).then(
        (answer) => {
          answeredAt[seq] = performance.now();
          if (answer.status !== 200) failed(`HTTP ${answer.status}`);
        },
        (error: NodeJS.ErrnoException) => failed(error.code ?? error.message),
      ),
    );
  }
  const lastSent = performance.now();
  await Promise.all(inFlight);
  delay.disable();
  // Wait for the last messages: until every expected one is in, or nothing new arrived for settleSeconds.
  const everything = command.expectedPerCreate * total;
  let received = -1;
  for (;;) {
    let now = 0;
    for (let i = 0; i < arrivals.length; i++) if (!Number.isNaN(arrivals[i]!)) now++;
    if (now === received || now >= everything) break;
    received = now;
    await new Promise((resolve) => setTimeout(resolve, command.settleSeconds * 1000));
  }

  const latencies: number[] = [];
  let expected = 0;
  let got = 0;
  let perCreateMin = Infinity;
  let perCreateMax = 0;
  let beforeResponse = 0;
  const createTimes: number[] = [];
  for (let seq = warmupCount; seq < total; seq++) {
    createTimes.push(answeredAt[seq]! - sentAt[seq]!);
    let count = 0;
    for (let s = 0; s < streams.length; s++) {
      const at = arrivals[s * capacity + seq]!;
      if (Number.isNaN(at)) continue;
      count++;
      const ms = at - answeredAt[seq]!;
      if (ms < 0) beforeResponse++;
      latencies.push(ms);
    }
    got += count;
    perCreateMin = Math.min(perCreateMin, count);
    perCreateMax = Math.max(perCreateMax, count);
  }
  expected = command.expectedPerCreate * (total - warmupCount);
  const sorted = Float64Array.from(latencies).sort();
  const createSorted = Float64Array.from(createTimes).sort();
  return {
    type: 'latency',
    creates: total,
    createErrors,
    createErrorKinds,
    measuredCreates: total - warmupCount,
    duplicates,
    expected,
    received: got,
    perCreateMin,
    perCreateMax,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    max: sorted.length ? sorted[sorted.length - 1]! : NaN,
    beforeResponse,
    createP50: percentile(createSorted, 50),
    createP99: percentile(createSorted, 99),
    loopDelayP99: delay.percentile(99) / 1e6,
    achievedRate: (total - warmupCount) / ((lastSent - sentAt[warmupCount]!) / 1000),
  };
}

process.on('message', (command: ClientsCommand) => {
  void (async () => {
    try {
      if (command.type === 'open') {
        await open(command);
        process.send!({ type: 'opened', count: streams.length });
      } else if (command.type === 'latency') {
        const result = await latency(command);
        process.send!(result);
      } else if (command.type === 'close') {
        for (const stream of streams.splice(0)) stream.request.destroy();
        process.send!({ type: 'closed' }, () => process.exit(0));
      }
    } catch (error) {
      console.error(error);
      process.exit(1);
    }
  })();
});
