import type { RemoteJWKSetOptions } from 'jose';

/** How long a fetched key set is kept and how often it may be fetched again (docs/auth.md). */
export interface JwksCacheOptions {
  /** Milliseconds a fetched key set is used before it is fetched again; default 10 minutes. */
  cacheMaxAgeMs?: number;
  /** Least milliseconds between two fetches, however many unknown key ids arrive; default 30 s. */
  cooldownMs?: number;
  /** Milliseconds a fetch may take; default 5 s. */
  timeoutMs?: number;
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * The key set's address: `https:`, or `http:` on a loopback address only, since whoever can
 * change the keys in transit can sign any token.
 */
export function checkJwksUrl(value: unknown): URL {
  let url: URL;
  try {
    url = new URL(value instanceof URL ? value.href : String(value));
  } catch {
    throw new TypeError('jwtAuth: jwksUrl must be an absolute URL');
  }
  if (url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname))) return url;
  throw new TypeError('jwtAuth: jwksUrl must be https: (http: only on a loopback address)');
}

function milliseconds(name: string, value: number | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!Number.isFinite(value) || value < 0) throw new TypeError(`jwtAuth: jwks.${name} must be a number of milliseconds, 0 or more`);
  return value;
}

/** jose's settings for the key set's cache, from ours. */
export function jwksCacheSettings(options: JwksCacheOptions | undefined): RemoteJWKSetOptions {
  const settings: RemoteJWKSetOptions = {};
  const cacheMaxAge = milliseconds('cacheMaxAgeMs', options?.cacheMaxAgeMs);
  const cooldown = milliseconds('cooldownMs', options?.cooldownMs);
  const timeout = milliseconds('timeoutMs', options?.timeoutMs);
  if (cacheMaxAge !== undefined) settings.cacheMaxAge = cacheMaxAge;
  if (cooldown !== undefined) settings.cooldownDuration = cooldown;
  if (timeout !== undefined) settings.timeoutDuration = timeout;
  return settings;
}
