import type { Request } from 'express';
import type { AuthFunction, Identity } from '../auth/identity.js';
import { noteAuthLogger } from '../auth/auth-logger.js';
import { extractToken, type TokenSources } from '../auth/extract-token.js';
import { UnauthorizedError } from '../errors.js';
import type { Caller } from '../records/caller.js';
import type { Logger } from '../logger.js';
import { lazyRuleHeaders } from '../query/request-headers.js';
import { readQueryParam } from './parse-list-query.js';
import { noteCaller } from './request-log.js';

/** Repeated query parameters keep their first value; nested ones are dropped (rules read strings). */
function flattenQuery(query: Request['query']): Record<string, string> {
  const out: Record<string, string> = Object.create(null);
  for (const key of Object.keys(query)) {
    const value = readQueryParam(query, key);
    if (value !== undefined) out[key] = value;
  }
  return out;
}

/** Thrown for an identity `auth()` should not have returned; reported to the host like a throw. */
class MalformedIdentityError extends Error {}

function checkIdentity(value: unknown): Identity | null {
  if (value === null || value === undefined) return null;
  if (typeof value !== 'object' || typeof (value as Identity).id !== 'string') {
    throw new MalformedIdentityError('auth() must return null or an object with a string "id"');
  }
  return value as Identity;
}

/** What the rules may read of a request, for an identity already known (`null`: a guest). */
export function describeRequest(req: Request, auth: Identity | null): Caller {
  noteCaller(req, auth?.id);
  return {
    request: {
      auth,
      query: flattenQuery(req.query),
      // req.headers, not the raw ones: what the host's middleware set or removed is what rules read.
      headers: lazyRuleHeaders(() => req.headers),
      body: {},
      method: req.method.toUpperCase(),
      context: 'default',
    },
  };
}

/** Most distinct auth() failures reported; beyond it a broken auth() has made its point. */
const MAX_REPORTED_CAUSES = 50;

/** Resolves who is calling; see createCallerResolver. */
export type CallerResolver = (req: Request) => Promise<Caller>;

/**
 * Builds the resolver of callers for one set of routes: the token (from `sources`, docs/
 * configuration.md "Tokens") goes to the host's `auth()`; no token or no `auth` means a guest. An
 * `auth()` that throws, rejects or returns something without a string `id` answers 401 to the
 * client and is reported to the logger as the host's bug, once per distinct cause, so that a
 * broken `auth()` shows up in the logs without flooding them.
 */
export function createCallerResolver(options: { auth?: AuthFunction; logger: Logger; sources: TokenSources }): CallerResolver {
  const reported = new Set<string>();
  const report = (err: unknown) => {
    const cause = err instanceof Error ? err.message : String(err);
    if (reported.has(cause) || reported.size >= MAX_REPORTED_CAUSES) return;
    reported.add(cause);
    options.logger.error(`auth() failed, so the request was answered 401 (reported once per cause): ${cause}`, err);
  };
  return async (req) => {
    const token = extractToken(req, options.sources);
    let auth: Identity | null = null;
    if (token !== '' && options.auth) {
      noteAuthLogger(req, options.logger);
      try {
        auth = checkIdentity(await options.auth(token, req));
      } catch (err) {
        report(err);
        throw new UnauthorizedError('The authentication token is invalid or expired.', 'invalid_token');
      }
    }
    return describeRequest(req, auth);
  };
}
