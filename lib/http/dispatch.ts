import type { ErrorRequestHandler, NextFunction, Request, Response } from 'express';
import { ClientGone } from '../db/statements/database-context.js';
import { clientKeyOfAddress } from '../db/statements/fair-gate.js';
import type { Logger } from '../logger.js';
import type { Limits } from '../options.js';
import { runWithSpan } from '../telemetry/start-span.js';
import { traceRequest } from '../telemetry/trace-request.js';
import { isApiPath, unservedPathError } from './api-fallback-routes.js';
import { noteFailedRoute } from './error-middleware.js';
import { setRequestDatabaseContext } from './request-database-context.js';
import { noteRoute } from './request-log.js';
import { runHandlers, type RouteTable } from './route-table.js';

/** How the router answers a request once it is ready (Express's handler shape, without a result). */
export type Dispatch = (req: Request, res: Response, next: NextFunction) => void;

/** What dispatch needs: the route table, the statement bounds, the one error middleware and where to warn. */
export interface DispatchOptions {
  routes: RouteTable;
  limits: Pick<Limits, 'statementTimeoutMs' | 'acquireTimeoutMs'>;
  errorMiddleware: ErrorRequestHandler;
  logger: Logger;
  /** The name of the collection a path's `:collection` names, if one exists (the request's span and metric label; never a name no collection has). */
  collectionName?: (nameOrId: string) => string | undefined;
}

/**
 * Builds the router's dispatch: the route the table finds gets a database context
 * (lib/db/statements/database-context.ts, request-database-context.ts), which its handlers pass to the
 * record service, so its statements are bounded by the limits and cancelled once the client has
 * gone (the response closed before it was finished), and take turns with other clients' (the
 * client is the request's address, `req.ip`, which honours the host's `trust proxy`). A path
 * under `/api/` that no route serves is the JSON 404 (OPTIONS: the methods served there); any
 * other path goes on to the host's next handler, whose own statements recordbase leaves alone.
 */
export function createDispatch(options: DispatchOptions): Dispatch {
  const { routes, limits, errorMiddleware } = options;
  const noticeProxy = createProxyNotice(options.logger);
  return (req, res, next) => {
    const path = req.path;
    let match;
    try {
      match = routes.find(req.method, path);
    } catch (err) {
      // A path parameter with a malformed %-escape: the client's 400.
      errorMiddleware(err, req, res, next);
      return;
    }
    if (!match) {
      if (!isApiPath(path)) {
        next();
        return;
      }
      const methods = req.method === 'OPTIONS' ? routes.methodsAt(path) : [];
      if (methods.length > 0) {
        res.setHeader('Allow', methods.join(', '));
        res.send(methods.join(', '));
        return;
      }
      errorMiddleware(unservedPathError(path), req, res, next);
      return;
    }
    req.params = match.params;
    noteRoute(req, match.route.path, match.params);
    const gone = new ClientGone();
    res.once('close', () => {
      if (!res.writableFinished) gone.abort();
    });
    noticeProxy(req);
    const collection = match.params.collection === undefined ? undefined : options.collectionName?.(match.params.collection);
    const span = traceRequest({ req, res }, { path: match.route.path, collection });
    setRequestDatabaseContext(req, { statementTimeoutMs: limits.statementTimeoutMs, acquireTimeoutMs: limits.acquireTimeoutMs, signal: gone, client: clientKeyOfAddress(req.ip), span });
    const done = (err: unknown) => {
      noteFailedRoute(req, match.route.path);
      errorMiddleware(err ?? unservedPathError(path), req, res, next);
    };
    // Untraced (no SDK, the usual case): no closure for the active context on the way.
    if (span === undefined) runHandlers(match.route.handlers, req, res, done);
    else runWithSpan(span, () => runHandlers(match.route.handlers, req, res, done));
  };
}

/** Express's compiled `trust proxy`: whether the address `hop` steps from the server is a proxy it trusts. */
type TrustProxy = (address: string | undefined, hop: number) => boolean;

/**
 * Addresses from the documentation ranges (RFC 5737, RFC 3849), which no host's proxy has, at a
 * depth no chain of proxies reaches: a `trust proxy` that trusts one of them trusts every client.
 */
const STRANGERS = ['192.0.2.1', '2001:db8::1'];
const STRANGER_HOP = 100;

/**
 * The two ways a host's `trust proxy` gets the client's address (`req.ip`) wrong, each warned
 * about once per router through its logger:
 * - requests come through a proxy (they carry `X-Forwarded-For`) that Express does not trust:
 *   `req.ip` is then the proxy's address for every client, and the per-client shares of the
 *   database (and other per-address limits) are one share for everyone;
 * - on the first request, Express trusts every address (`true`, or a list or function to the
 *   same effect): `X-Forwarded-For`, which any client writes, then picks `req.ip`, so a client
 *   chooses its own share, or another's. A hop count is not warned about: it is right when
 *   clients can reach the app only through that many proxies, which cannot be seen from here.
 */
function createProxyNotice(logger: Logger): (req: Request) => void {
  let warnedUntrusted = false;
  let checkedTrustAll = false;
  const trustOf = (req: Request) => req.app.get('trust proxy fn') as TrustProxy | undefined;
  return (req) => {
    if (!checkedTrustAll) {
      checkedTrustAll = true;
      const trusts = trustOf(req);
      if (STRANGERS.some((address) => trusts?.(address, STRANGER_HOP))) {
        logger.warn(
          `Express's 'trust proxy' trusts every address, so X-Forwarded-For, which any client can write, chooses each request's address: a client can take another's fair share of the database and of realtime's streams per address (realtime.maxClientsPerAddress), or spread its own over as many as it likes; set it to the proxies in front instead, app.set('trust proxy', 1) for one or their addresses (docs/deployment.md, "A proxy in front")`,
        );
      }
    }
    if (warnedUntrusted || req.headers['x-forwarded-for'] === undefined) return;
    if (trustOf(req)?.(req.socket.remoteAddress, 0)) return;
    warnedUntrusted = true;
    logger.warn(
      `requests arrive through a proxy (X-Forwarded-For) that Express does not trust, so every client has the proxy's address ${req.socket.remoteAddress ?? ''} and shares one client's part of the database; set app.set('trust proxy', ...) on the host app (docs/limits.md, "A fair share per client")`,
    );
  };
}
