import type { ErrorRequestHandler, Request, Response } from 'express';
import { BadRequestError, InternalError, PayloadTooLargeError, RecordbaseError } from '../errors.js';
import { translateDatabaseError } from '../db/statements/translate-database-error.js';
import type { Logger } from '../logger.js';

/** Sends the one error body shape (docs/errors.md); an answer that must not be logged (the drain's refusals) sends it directly. */
export function sendError(res: Response, error: RecordbaseError): void {
  res.status(error.status).json({ status: error.status, message: error.message, data: error.data });
}

/**
 * The route template of each request that failed after dispatch matched its route, noted on the
 * error path only (nothing per request on the way that succeeds).
 */
const failedRoutes = new WeakMap<Request, string>();

/** Notes the route template (`/api/collections/:collection/records/:id`) `req` matched, for its error's log line. */
export function noteFailedRoute(req: Request, route: string): void {
  failedRoutes.set(req, route);
}

/**
 * How a log line names a request: its method and route template, never its path or query
 * (they carry record ids, filter text, file names and file tokens; docs/observability.md).
 */
export function describeRequestForLog(req: Request): string {
  return `${req.method} ${failedRoutes.get(req) ?? '(no route)'}`;
}

/** body-parser and multer signal their failures with `type`/`code`; these are the client's fault. */
function fromParserError(err: unknown): RecordbaseError | undefined {
  if (!err || typeof err !== 'object') return undefined;
  const { type, status } = err as { type?: unknown; status?: unknown };
  if (type === 'entity.too.large') return new PayloadTooLargeError();
  if (type === 'entity.parse.failed') return new BadRequestError('The request body is not valid JSON.', 'invalid_json');
  if (typeof type === 'string' && typeof status === 'number' && status >= 400 && status < 500) {
    return new BadRequestError('The request body could not be read.', 'invalid_body');
  }
  // Express's router throws this for a path parameter with a malformed %-escape (`/records/%ZZ`).
  if (err instanceof URIError && status === 400) return new BadRequestError('The request path is not valid: it holds a malformed %-escape.', 'invalid_path');
  return undefined;
}

/**
 * A database error with a meaning for the client (a statement over its timeout, the database
 * busy or unavailable, ...) that reached here without passing the record service, which
 * translates its own: realtime's connects and subscriptions.
 */
function fromDatabaseError(err: unknown): RecordbaseError | undefined {
  const translated = translateDatabaseError(err);
  return translated instanceof RecordbaseError ? translated : undefined;
}

/**
 * The single place where errors become responses: our errors keep their status, message and
 * data; parser errors become 400/413; database errors as translateDatabaseError says; anything
 * else is a generic 500 whose cause goes to the logger only, so no stack trace or driver message
 * reaches a client.
 */
export function createErrorMiddleware(logger: Logger): ErrorRequestHandler {
  return (err, req, res, next) => {
    if (res.headersSent) {
      next(err);
      return;
    }
    let error = err instanceof RecordbaseError ? err : (fromParserError(err) ?? fromDatabaseError(err));
    if (!error) {
      logger.error(`${describeRequestForLog(req)} failed`, err);
      error = new InternalError(err);
    } else if (error.status >= 500) {
      logger.error(`${describeRequestForLog(req)}: ${error.message}`, error.cause ?? '');
    }
    sendError(res, error);
  };
}
