/**
 * The load generator, forked by the runner so that it never shares a process (or an event loop)
 * with a server under test. It receives one scenario over IPC, runs autocannon for the warm-up
 * and then for the measurement window, sends both summaries back and exits.
 */
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';
import { preparedPostId, seededPostId, seededUserId, USER_COUNT, WRITE_MARKER } from './bench-data.js';
import { buildMultipart } from './multipart.js';
import { buildBatchBody, buildCreateBody, buildUpdateBody, type LoadSpec } from './scenarios.js';

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

/** A record id no scenario ever writes: what a delete cell sends once its prepared posts are used up, so that it answers 404. */
const MISSING_ID = 'x00000000000000';

/**
 * The requests of one load request, built once for its warm-up and its measurement alike: the
 * rotations carry on from one to the other, so the measurement never deletes a post the warm-up
 * already deleted.
 */
/** JSON POSTs to `path`, each request the next of `bodies` (round robin). */
function rotatingJsonPosts(path: string, bodies: readonly string[]): autocannon.AutocannonRequest[] {
  let next = 0;
  return [{ method: 'POST', path, headers: { 'content-type': 'application/json' }, body: bodies[0], setupRequest: (request) => ({ ...request, body: bodies[next++ % bodies.length] }) }];
}

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
    case 'create':
      return rotatingJsonPosts(spec.path, Array.from({ length: USER_COUNT }, (_, i) => buildCreateBody(seededUserId(i + 1))));
    case 'update': {
      if (spec.count < 1) throw new Error('update: no prepared posts (the runner prepares them for each cell)');
      let next = 0;
      const nextRequest = (): { path: string; body: string } => {
        const n = next++;
        return { path: spec.pathPrefix + preparedPostId('update', spec.first + (n % spec.count)), body: buildUpdateBody(n) };
      };
      return [{ method: 'PATCH', headers: { 'content-type': 'application/json' }, ...nextRequest(), setupRequest: (request) => ({ ...request, ...nextRequest() }) }];
    }
    case 'delete': {
      if (spec.count < 1) throw new Error('delete: no prepared posts (the runner prepares them for each cell)');
      let next = 0;
      // Each prepared post once; after the last, a missing id: the cell fails on the 404s instead of counting them.
      const nextPath = () => spec.pathPrefix + (next < spec.count ? preparedPostId('delete', spec.first + next++) : MISSING_ID);
      return [{ method: 'DELETE', path: spec.pathPrefix + MISSING_ID, setupRequest: (request) => ({ ...request, path: nextPath() }) }];
    }
    case 'batch':
      return rotatingJsonPosts(
        spec.path,
        Array.from({ length: USER_COUNT / 10 }, (_, b) => buildBatchBody(Array.from({ length: spec.size }, (_, k) => seededUserId(((b * spec.size + k) % USER_COUNT) + 1)))),
      );
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

function run(request: LoadRequest, requests: autocannon.AutocannonRequest[], seconds: number): Promise<LoadSummary> {
  return new Promise((resolve, reject) => {
    autocannon(
      { url: request.url, connections: request.connections, duration: seconds, timeout: 30, requests, ...(request.rate ? { overallRate: request.rate } : {}) },
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
    const requests = buildRequests(message.spec);
    const warmup = await run(message, requests, message.warmupSeconds);
    const measured = await run(message, requests, message.durationSeconds);
    process.send!({ type: 'result', warmup, measured } satisfies LoadReply, () => process.exit(0));
  } catch (error) {
    console.error(error);
    process.exit(1);
  }
});
