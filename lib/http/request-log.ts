/**
 * The request log (option `onRequest`, docs/configuration.md): one entry per request the router
 * answers, handed to the host's function when the response ends. An entry says what the API did,
 * never with what credentials: no query string (file downloads carry `?token=` there), no header.
 */
import type { Request, RequestHandler } from 'express';
import type { Logger, RequestLogEntry, RequestLogFunction } from '../logger.js';
import { isApiPath } from './api-fallback-routes.js';

/** What the routes learn of a request while serving it, for its log entry. */
interface Notes {
  route?: string;
  collection?: string;
  callerId?: string;
}

const notesOf = new WeakMap<Request, Notes>();

/** Records the route a request matched (dispatch calls it), for its log entry when the log is on. */
export function noteRoute(req: Request, route: string, params: Readonly<Record<string, string>>): void {
  const notes = notesOf.get(req);
  if (!notes) return;
  notes.route = route;
  notes.collection = params.collection;
}

/** Records whom a request is served as (the caller resolvers call it), for its log entry when the log is on. */
export function noteCaller(req: Request, callerId: string | undefined): void {
  const notes = notesOf.get(req);
  if (notes) notes.callerId = callerId;
}

/**
 * The middleware that logs each request the router answers: those a route matched and every
 * path under `/api/` (the router answers them all); a path it passes on to the host is the
 * host's to log. A failing `onRequest` is reported to the logger once, not for every request.
 */
export function createRequestLog(onRequest: RequestLogFunction, logger: Logger): RequestHandler {
  let reported = false;
  const report = (err: unknown) => {
    if (reported) return;
    reported = true;
    logger.error(`onRequest failed; the requests were answered anyway (reported once): ${err instanceof Error ? err.message : String(err)}`, err);
  };
  return (req, res, next) => {
    const started = performance.now();
    const notes: Notes = {};
    notesOf.set(req, notes);
    const apiPath = isApiPath(req.path);
    const path = req.originalUrl.split('?', 1)[0]!;
    let logged = false;
    const log = () => {
      if (logged || (!apiPath && notes.route === undefined)) return;
      logged = true;
      const entry: RequestLogEntry = {
        method: req.method,
        path,
        status: res.statusCode,
        durationMs: Math.round((performance.now() - started) * 100) / 100,
        completed: res.writableFinished,
      };
      if (notes.route !== undefined) entry.route = notes.route;
      if (notes.collection !== undefined) entry.collection = notes.collection;
      if (notes.callerId !== undefined) entry.callerId = notes.callerId;
      try {
        const result = onRequest(entry);
        if (result instanceof Promise) result.catch(report);
      } catch (err) {
        report(err);
      }
    };
    res.once('finish', log);
    res.once('close', log);
    next();
  };
}
