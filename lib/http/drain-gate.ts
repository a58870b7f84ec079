import type { NextFunction, Request, Response } from 'express';
import { UnavailableError } from '../errors.js';
import type { CollectionApi, RecordsApi } from '../records/records-api.js';
import { isApiPath } from './api-fallback-routes.js';
import { sendError } from './error-middleware.js';
import { isHealthPath, sendHealth } from './health-check.js';

/**
 * The header of the drain's 503: the request was refused before anything ran, so a load balancer
 * may send it (a POST included) to another instance (docs/deployment.md, "Rolling restarts").
 */
const REFUSED_HEADER = 'Recordbase-Refused';

/** How long a cut request's sockets are given to report their close before close() goes on. */
const CUT_SETTLE_MS = 100;

/**
 * A running request in the drain's list. A doubly linked list rather than a `Set` of responses:
 * a Set that takes in and lets go of a young response per request made every scavenge of the
 * young generation slower, twice the garbage collector's time for a view request
 * (docs/benchmarks.md, "Issue 44's cost"); an entry dies young with its request.
 */
interface Running {
  readonly res: Response;
  prev: Running | undefined;
  next: Running | undefined;
}

/**
 * The router's drain (docs/deployment.md, "Rolling restarts: readiness and drain"). Keeps the
 * requests under `/api/` that run (realtime's streams aside: they end with the hub), each with
 * one list entry and one `close` listener, so that `close()` can wait for them. From the moment
 * `refuse()` is called, every new request under `/api/` answers 503 `draining` with
 * `Connection: close` (the health check in its own shape); `drain(ms)` then waits for the running
 * ones at most `ms`, and cuts what is left by destroying its socket, which raises the request's
 * ClientGone (dispatch.ts) and so cancels its statements: a slow client cannot hold `close()`.
 */
export class DrainGate {
  /** The most recent running request; undefined when none runs. */
  private head: Running | undefined;
  private refusing = false;
  private whenIdle: (() => void) | undefined;

  /** Whether `refuse()` was called: the router is closing. */
  get closing(): boolean {
    return this.refusing;
  }

  /** The middleware in front of the router's dispatch. */
  readonly handle = (req: Request, res: Response, next: NextFunction): void => {
    const path = req.path;
    if (!isApiPath(path)) {
      next();
      return;
    }
    if (this.refusing) {
      refuseDuringDrain(req, res);
      return;
    }
    if (!isStreamRequest(req.method, path)) {
      const entry: Running = { res, prev: undefined, next: this.head };
      if (this.head !== undefined) this.head.prev = entry;
      this.head = entry;
      res.on('close', () => this.leave(entry));
    }
    next();
  };

  private leave(entry: Running): void {
    if (entry.prev !== undefined) entry.prev.next = entry.next;
    else if (this.head === entry) this.head = entry.next;
    if (entry.next !== undefined) entry.next.prev = entry.prev;
    entry.prev = entry.next = undefined;
    if (this.head === undefined) this.whenIdle?.();
  }

  /** The responses of the requests running now. */
  private runningResponses(): Response[] {
    const responses: Response[] = [];
    for (let entry = this.head; entry !== undefined; entry = entry.next) responses.push(entry.res);
    return responses;
  }

  /** From now on, new requests are refused. Synchronous: nothing new gets in once close() has begun. */
  refuse(): void {
    this.refusing = true;
  }

  /**
   * Waits for the running requests to finish, at most `ms`; then cuts the rest (their sockets
   * destroyed) and resolves once they closed (or after a short settle). Responses not yet begun
   * say `Connection: close`, so no client sends its next request on a connection that is going.
   */
  async drain(ms: number): Promise<void> {
    this.refuse();
    for (const res of this.runningResponses()) if (!res.headersSent) res.setHeader('Connection', 'close');
    if (this.head !== undefined) await this.waitForIdle(ms);
    if (this.head === undefined) return;
    for (const res of this.runningResponses()) res.socket?.destroy();
    await this.waitForIdle(CUT_SETTLE_MS);
  }

  private waitForIdle(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      const gate = this;
      function done() {
        clearTimeout(timer);
        gate.whenIdle = undefined;
        resolve();
      }
      this.whenIdle = done;
    });
  }
}

/** `GET /api/realtime`: a stream, which runs until its client or the hub ends it. */
function isStreamRequest(method: string, path: string): boolean {
  return method === 'GET' && path.length === 13 && path.toLowerCase() === '/api/realtime';
}

/** The drain's 503: the one error body (the health check: its own shape), `Connection: close`, and the header saying nothing ran. */
function refuseDuringDrain(req: Request, res: Response): void {
  const error = new UnavailableError(undefined, 'draining');
  res.setHeader('Connection', 'close');
  res.setHeader(REFUSED_HEADER, 'draining');
  if (req.method === 'GET' && isHealthPath(req.path)) {
    sendHealth(res, error);
    return;
  }
  sendError(res, error);
}

/**
 * The server API as `records.api` hands it to the host: a call that starts after `close()` began
 * rejects with the drain's 503 (`draining`), as a new request does. Only new calls: the API a
 * hook or a transaction was given (a request or a call already running) goes on, so that what
 * runs can finish within `drainMs`.
 */
export function refuseNewCallsWhenClosing(api: RecordsApi, gate: DrainGate): RecordsApi {
  const refusal = () => Promise.reject(new UnavailableError(undefined, 'draining'));
  return {
    collection(nameOrId) {
      const collection = api.collection(nameOrId);
      const guarded = {} as Record<keyof CollectionApi, unknown>;
      for (const name of Object.keys(collection) as (keyof CollectionApi)[]) {
        const method = collection[name] as (...args: unknown[]) => Promise<unknown>;
        guarded[name] = (...args: unknown[]) => (gate.closing ? refusal() : method(...args));
      }
      return guarded as CollectionApi;
    },
    transaction: (work) => (gate.closing ? refusal() : api.transaction(work)),
  };
}
