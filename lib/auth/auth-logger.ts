/**
 * The router's logger as an `auth` function may reach it: the caller resolver notes it on each
 * request it hands to `auth()`, so `jwtAuth` can say why it refused a token in the logger of the
 * router serving that request (one `jwtAuth` may serve several routers, each with its own logger).
 */
import type { Request } from 'express';
import type { Logger } from '../logger.js';

const loggerOf = new WeakMap<Request, Logger>();

/** Notes the logger of the router about to call `auth()` for `req` (the caller resolver calls it). */
export function noteAuthLogger(req: Request, logger: Logger): void {
  loggerOf.set(req, logger);
}

/** The logger noted for `req`; undefined for a call from outside a router (a host calling `auth` itself). */
export function findAuthLogger(req: Request | undefined): Logger | undefined {
  return req === undefined || req === null ? undefined : loggerOf.get(req);
}
