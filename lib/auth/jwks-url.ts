import { customFetch, type FetchImplementation, type RemoteJWKSetOptions } from 'jose';

/** How the key set is fetched and cached (docs/auth.md). */
export interface JwksCacheOptions {
  /** Milliseconds a fetched key set is used before it is fetched again; default 10 minutes. */
  cacheMaxAgeMs?: number;
  /** Least milliseconds between two fetches, however many unknown key ids arrive; default 30 s. */
  cooldownMs?: number;
  /** Milliseconds a fetch may take; default 5 s. */
  timeoutMs?: number;
  /** Most bytes of a key set read; a larger one is refused, its keys unused; default 1 MiB. */
  maxBytes?: number;
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/** Providers publish a few keys in a few kilobytes; this leaves room for hundreds. */
const DEFAULT_MAX_BYTES = 1024 * 1024;

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

function checkMaxBytes(value: unknown): number {
  if (value === undefined) return DEFAULT_MAX_BYTES;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new TypeError('jwtAuth: jwks.maxBytes must be a whole number of bytes, 1 or more');
  }
  return value;
}

function refuseLargeKeySet(url: string, maxBytes: number): Error {
  // One message per key set, so the router logs it once however many requests it fails.
  return new Error(`jwtAuth: the key set at ${url} is larger than jwks.maxBytes (${maxBytes} bytes), so none of its keys is used`);
}

/**
 * jose's fetch of the key set, reading at most `maxBytes` of the body: jose reads a body whole
 * before parsing it, so a runaway or hostile key set would otherwise cost its whole size, and a
 * parse of it, on every fetch. The cut is counted on the decoded bytes, so a compressed body
 * cannot expand past it.
 */
function fetchWithinBytes(maxBytes: number): FetchImplementation {
  return async (url, init) => {
    const response = await fetch(url, init);
    if (response.status !== 200 || response.body === null) {
      await response.body?.cancel();
      return response;
    }
    const announced = Number(response.headers.get('content-length'));
    if (!response.headers.has('content-encoding') && announced > maxBytes) {
      await response.body.cancel();
      throw refuseLargeKeySet(url, maxBytes);
    }
    const reader = response.body.getReader();
    const parts: Uint8Array[] = [];
    let size = 0;
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
      size += chunk.value.byteLength;
      if (size > maxBytes) {
        await reader.cancel();
        throw refuseLargeKeySet(url, maxBytes);
      }
      parts.push(chunk.value);
    }
    return new Response(Buffer.concat(parts), { status: 200 });
  };
}

/** jose's settings for fetching and caching the key set, from ours. */
export function resolveJwksSettings(options: JwksCacheOptions | undefined): RemoteJWKSetOptions {
  const settings: RemoteJWKSetOptions = { [customFetch]: fetchWithinBytes(checkMaxBytes(options?.maxBytes)) };
  const cacheMaxAge = milliseconds('cacheMaxAgeMs', options?.cacheMaxAgeMs);
  const cooldown = milliseconds('cooldownMs', options?.cooldownMs);
  const timeout = milliseconds('timeoutMs', options?.timeoutMs);
  if (cacheMaxAge !== undefined) settings.cacheMaxAge = cacheMaxAge;
  if (cooldown !== undefined) settings.cooldownDuration = cooldown;
  if (timeout !== undefined) settings.timeoutDuration = timeout;
  return settings;
}
