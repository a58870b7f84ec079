/**
 * The load generator, forked by the runner so that it never shares a process (or an event loop)
 * with a server under test. It receives one scenario over IPC, runs autocannon for the warm-up
 * and then for the measurement window, sends both summaries back and exits.
 */
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';
import { seededPostId, seededUserId, USER_COUNT, WRITE_MARKER } from './bench-data.js';
import { buildMultipart } from './multipart.js';
import { buildCreateBody, type LoadSpec } from './scenarios.js';

/** What the runner asks for. */
export interface LoadRequest {
  type: 'run';
  url: string;
  spec: LoadSpec;
  connections: number;
  warmupSeconds: number;
  durationSeconds: number;
  /** Requests per second over all connections (autocannon's `overallRate`); absent: as fast as the server answers. */
  rate?: number;
}

/** One autocannon run, reduced to what the table needs. */
export interface LoadSummary {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  total: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  seconds: number;
}

/** What the load generator answers. */
export interface LoadReply {
  type: 'result';
  warmup: LoadSummary;
  measured: LoadSummary;
}

/** How many distinct random ids the view scenario rotates over (all of them for small tables). */
const VIEW_SAMPLE = 100_000;

function buildRequests(spec: LoadSpec): autocannon.AutocannonRequest[] {
  switch (spec.kind) {
    case 'get':
      return [{ method: 'GET', path: spec.path }];
    case 'view': {
      const count = Math.min(spec.rows, VIEW_SAMPLE);
      const paths = Array.from({ length: count }, () => spec.pathPrefix + seededPostId(1 + Math.floor(Math.random() * spec.rows)));
      let next = 0;
      return [
        {
          method: 'GET',
          path: paths[0],
          setupRequest: (request) => ({ ...request, path: paths[next++ % paths.length] }),
        },
      ];
    }
    case 'create': {
      const bodies = Array.from({ length: USER_COUNT }, (_, i) => buildCreateBody(seededUserId(i + 1)));
      let next = 0;
      return [
        {
          method: 'POST',
          path: spec.path,
          headers: { 'content-type': 'application/json' },
          body: bodies[0],
          setupRequest: (request) => ({ ...request, body: bodies[next++ % bodies.length] }),
        },
      ];
    }
    case 'upload': {
      const { body, contentType } = buildMultipart([
        { name: 'title', value: `${WRITE_MARKER} upload` },
        { name: 'author', value: seededUserId(1) },
        { name: 'cover', fileName: 'upload.png', contentType: 'image/png', data: readFileSync(spec.file) },
      ]);
      return [{ method: 'POST', path: spec.path, headers: { 'content-type': contentType }, body }];
    }
  }
}

function run(request: LoadRequest, seconds: number): Promise<LoadSummary> {
  return new Promise((resolve, reject) => {
    autocannon(
      { url: request.url, connections: request.connections, duration: seconds, timeout: 30, requests: buildRequests(request.spec), ...(request.rate ? { overallRate: request.rate } : {}) },
      (error, result) => {
        if (error) return reject(error);
        resolve({
          requestsPerSecond: result.requests.average,
          p50: result.latency.p50,
          p99: result.latency.p99,
          total: result.requests.total,
          non2xx: result.non2xx,
          errors: result.errors,
          timeouts: result.timeouts,
          seconds: result.duration,
        });
      },
    );
  });
}

process.once('message', async (message: LoadRequest) => {
  try {
    const warmup = await run(message, message.warmupSeconds);
    const measured = await run(message, message.durationSeconds);
    process.send!({ type: 'result', warmup, measured } satisfies LoadReply, () => process.exit(0));
  } catch (error) {
    console.error(error);
    process.exit(1);
  }
});
