import type { ErrorRequestHandler } from 'express';
import { UnavailableError } from '../errors.js';
import type { Dispatch } from './dispatch.js';
import { isHealthPath, sendHealth } from './health-check.js';

/**
 * The 503 of a router whose start failed (`not_ready`, with the reason): what every request and
 * every server-API call answers from then on, so the host sees why in each of them.
 */
export function describeStartFailure(err: unknown): UnavailableError {
  return new UnavailableError(`recordbase could not start: ${err instanceof Error ? err.message : String(err)}`, 'not_ready');
}

/**
 * The router's readiness gate. A request that arrives while the router starts waits for
 * `starting`; if the start failed, it answers the 503 of describeStartFailure through the error
 * middleware (the one error body); once started, requests go straight to the dispatch it
 * resolved to, with no await (and no promise) per request. The health check waits for nothing:
 * a probe answers 503 `not_ready` at once while the start runs, and after a failed start the 503
 * with the reason, both in the health check's shape (a load balancer's probe gives up long before
 * a slow migration ends).
 */
export function serveWhenReady(starting: Promise<Dispatch>, errorMiddleware: ErrorRequestHandler): Dispatch {
  let dispatch: Dispatch | undefined;
  let failure: UnavailableError | undefined;
  starting.then(
    (started) => (dispatch = started),
    (err: unknown) => (failure = describeStartFailure(err)),
  );
  return (req, res, next) => {
    if (dispatch) {
      dispatch(req, res, next);
      return;
    }
    if (req.method === 'GET' && isHealthPath(req.path)) {
      sendHealth(res, failure ?? new UnavailableError('API is not ready yet: recordbase is starting.', 'not_ready'));
      return;
    }
    starting.then(
      (started) => started(req, res, next),
      (err: unknown) => errorMiddleware(describeStartFailure(err), req, res, next),
    );
  };
}
