import { NotFoundError } from '../errors.js';
import type { Response } from 'express';
import { describeUnhealthy, sendHealth, type DatabaseHealth } from './health-check.js';
import type { Route } from './route-table.js';

/** PocketBase endpoints that sign users in: in recordbase that is the host's job. */
const SIGN_IN = /^\/api\/collections\/[^/]+\/(auth-|request-|confirm-|impersonate|external-auths)/;
/** The collections API itself (`/api/collections`, `/api/collections/{c}`, import, truncate). */
const COLLECTIONS_API = /^\/api\/collections(\/[^/]+(\/truncate)?|\/import|\/meta\/.*)?\/?$/;
/** PocketBase's admin endpoints. */
const ADMIN = /^\/api\/(settings|logs|crons|superusers|admins)(\/|$)/;

/** Why a path under `/api/` is not served: the message of its 404. */
function describeUnserved(path: string): string {
  if (SIGN_IN.test(path)) {
    return 'recordbase does not serve sign-in: authentication belongs to the host application, which turns tokens into identities through the auth() option (see docs/configuration.md).';
  }
  if (COLLECTIONS_API.test(path)) {
    return 'recordbase does not serve the collections API: collections are declared in code (see docs/collections.md).';
  }
  if (ADMIN.test(path)) {
    // One message whether the dashboard is on or not: it is true either way.
    return 'recordbase does not serve PocketBase\'s admin endpoints (settings, logs, crons, superusers): settings are the options of createRecordsRouter, logs go to its logger, superusers are the identities your auth() marks superuser: true, and the dashboard (dashboard: true, at {mount}/_/) works without these endpoints (see docs/dashboard.md).';
  }
  if (path === '/api/openapi.json') return 'The OpenAPI document is served only with the option openapi: true; `recordbase openapi` prints it (see docs/openapi.md).';
  return 'The requested endpoint does not exist.';
}

/**
 * `GET /api/health` (docs/deployment.md, "Rolling restarts: readiness and drain"): 200 in
 * PocketBase's shape while the database answers `health`'s check, 503 in the same shape while it
 * does not. Before the start finished, and from the moment `close()` begins, serve-when-ready.ts
 * and drain-gate.ts answer it.
 */
export function createHealthRoute(health: DatabaseHealth): Route {
  const answer = (res: Response, healthy: boolean) => sendHealth(res, healthy ? undefined : describeUnhealthy());
  return {
    method: 'GET',
    path: '/api/health',
    handlers: [
      (_req, res, next) => {
        const healthy = health.answers();
        if (typeof healthy === 'boolean') answer(res, healthy);
        else healthy.then((known) => answer(res, known), next);
      },
    ],
  };
}

/**
 * Whether `path` (below the router's mount) is under `/api/`, compared as Express compares mount
 * paths (case-insensitively, at a segment boundary). Character by character: the drain gate asks
 * for every request, and a slice or a lowercased copy would be a string each time.
 */
export function isApiPath(path: string): boolean {
  if (path.length < 4 || path.charCodeAt(0) !== SLASH) return false;
  // `| 32` lowercases an ASCII letter (and maps no other character onto a, p or i).
  if ((path.charCodeAt(1) | 32) !== 97 || (path.charCodeAt(2) | 32) !== 112 || (path.charCodeAt(3) | 32) !== 105) return false;
  return path.length === 4 || path.charCodeAt(4) === SLASH;
}

const SLASH = 47;

/**
 * The JSON 404 for a path under `/api/` that no route answers (docs/errors.md): never Express's
 * HTML page, which the SDK would turn into "Something went wrong". Paths outside `/api/` pass
 * through to the host's own routes.
 */
export function unservedPathError(path: string): NotFoundError {
  return new NotFoundError(describeUnserved(`/api${path.slice(4)}`), 'route_not_found');
}
