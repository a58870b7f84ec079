import { NotFoundError } from '../errors.js';
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
  if (ADMIN.test(path)) return 'recordbase does not serve PocketBase\'s admin endpoints (settings, logs, crons, superusers): there is no admin UI.';
  if (path === '/api/openapi.json') return 'The OpenAPI document is served only with the option openapi: true; `recordbase openapi` prints it (see docs/openapi.md).';
  return 'The requested endpoint does not exist.';
}

/**
 * `GET /api/health`: PocketBase's answer, `code` as the SDK's `HealthCheckResponse` reads it, and
 * `status` as every other body of this API carries it.
 */
export const HEALTH_ROUTE: Route = {
  method: 'GET',
  path: '/api/health',
  handlers: [
    (_req, res) => {
      res.json({ code: 200, status: 200, message: 'API is healthy.', data: {} });
    },
  ],
};

/** Whether `path` (below the router's mount) is under `/api/`, compared as Express compares mount paths (case-insensitively, at a segment boundary). */
export function isApiPath(path: string): boolean {
  const head = path.slice(0, 5).toLowerCase();
  return head === '/api' || head === '/api/';
}

/**
 * The JSON 404 for a path under `/api/` that no route answers (docs/errors.md): never Express's
 * HTML page, which the SDK would turn into "Something went wrong". Paths outside `/api/` pass
 * through to the host's own routes.
 */
export function unservedPathError(path: string): NotFoundError {
  return new NotFoundError(describeUnserved(`/api${path.slice(4)}`), 'route_not_found');
}
