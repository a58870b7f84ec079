import type { Request } from 'express';

/**
 * Who is calling, as the host's `auth()` says. `id` is what `@request.auth.id` reads; every other
 * property is readable as `@request.auth.<name>` in filters and rules.
 */
export interface Identity {
  id: string;
  /** Superusers bypass every rule and may see and filter hidden fields. */
  superuser?: boolean;
  [field: string]: unknown;
}

/**
 * The host's authentication: turns the token found in a request into an identity, or `null`
 * for a guest. May return a Promise. A thrown error (or rejection) answers 401.
 */
export type AuthFunction = (token: string, req: Request) => Identity | null | Promise<Identity | null>;
