import type { Request } from 'express';
import type { AuthFunction, Identity } from '../auth/identity.js';
import { extractToken } from '../auth/extract-token.js';
import { UnauthorizedError } from '../errors.js';
import type { Caller } from '../records/caller.js';
import { readQueryParam } from './parse-list-query.js';

/** Repeated query parameters keep their first value; nested ones are dropped (rules read strings). */
function flattenQuery(query: Request['query']): Record<string, string> {
  const out: Record<string, string> = Object.create(null);
  for (const key of Object.keys(query)) {
    const value = readQueryParam(query, key);
    if (value !== undefined) out[key] = value;
  }
  return out;
}

function checkIdentity(value: unknown): Identity | null {
  if (value === null || value === undefined) return null;
  if (typeof value !== 'object' || typeof (value as Identity).id !== 'string') {
    throw new TypeError('auth() must return null or an object with a string "id"');
  }
  return value as Identity;
}

/**
 * Who is calling: the token goes to the host's `auth()`; no token or no `auth` means a guest.
 * A throwing or rejecting `auth()` (or one returning a malformed identity) answers 401.
 */
export async function resolveCaller(req: Request, options: { auth?: AuthFunction; body?: Record<string, unknown>; allowQueryToken?: boolean }): Promise<Caller> {
  const token = extractToken(req, { allowQuery: options.allowQueryToken === true });
  let auth: Identity | null = null;
  if (token !== '' && options.auth) {
    try {
      auth = checkIdentity(await options.auth(token, req));
    } catch {
      throw new UnauthorizedError('The authentication token is invalid or expired.', 'invalid_token');
    }
  }
  return { request: { auth, query: flattenQuery(req.query), body: options.body ?? {}, method: req.method.toUpperCase() } };
}
