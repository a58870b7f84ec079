/**
 * The router's logger as an `auth` function may reach it: the caller resolver notes it on each
 * request it hands to `auth()`, so `jwtAuth` can say why it refused a token in the logger of the
 * router serving that request (one `jwtAuth` may serve several routers, each with its own logger).
 */
import type { Request } from 'express';
import type { Logger } from '../logger.js';

/**
 * Where a request keeps the logger: a symbol property of the request, as its caller is
 * (rate-limit-guard.ts), since a WeakMap keyed by each request costs every young-generation
 * garbage collection more (docs/benchmarks.md, "Issue 44's cost").
 */
const AUTH_LOGGER = Symbol('recordbase.authLogger');
type WithAuthLogger = Request & { [AUTH_LOGGER]?: Logger };

/** Notes the logger of the router about to call `auth()` for `req` (the caller resolver calls it). */
export function noteAuthLogger(req: Request, logger: Logger): void {
  (req as WithAuthLogger)[AUTH_LOGGER] = logger;
}

/** The logger noted for `req`; undefined for a call from outside a router (a host calling `auth` itself). */
export function findAuthLogger(req: Request | undefined): Logger | undefined {
  return typeof req === 'object' && req !== null ? (req as WithAuthLogger)[AUTH_LOGGER] : undefined;
}
