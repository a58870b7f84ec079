import type { Request } from 'express';
import { createRemoteJWKSet, jwtVerify, type JWTPayload, type JWTVerifyOptions } from 'jose';
import type { Logger } from '../logger.js';
import { findAuthLogger } from './auth-logger.js';
import type { AuthFunction, Identity } from './identity.js';
import { checkJwksUrl, type JwksCacheOptions, resolveJwksSettings } from './jwks-url.js';

/** Turns the verified claims of a token into the caller's identity, or `null` for a guest. */
export type ClaimsMapper = (claims: JWTPayload) => Identity | null;

/** Who is a superuser, read from one claim of a verified token (docs/auth.md). */
export interface SuperuserClaim {
  /** The claim to read, e.g. `'role'`. */
  superuserClaim?: string;
  /** The value that makes a superuser (a claim holding an array matches when it contains it). Absent: the claim must be `true`. */
  superuserValue?: string | number | boolean;
}

interface CommonOptions extends SuperuserClaim {
  /** Seconds of clock skew allowed on `exp`, `nbf` and `iat`; default 5, at most 300. */
  clockTolerance?: number;
  /** Whether a token must carry `exp`; default `true`. `false` accepts tokens that never expire. */
  requireExp?: boolean;
}

/** Tokens signed with a shared secret (HS256): the host's own sign-in, Supabase's legacy JWT secret. */
export interface JwtSecretOptions extends CommonOptions {
  /** At least 32 bytes. */
  secret: string | Uint8Array;
  issuer?: string | string[];
  audience?: string | string[];
}

/** Tokens signed by a provider's keys (RS256, ES256), published as a JSON Web Key Set. */
export interface JwtJwksOptions extends CommonOptions {
  /** `https:` (plain `http:` only on a loopback address). */
  jwksUrl: string | URL;
  /** The `iss` the provider writes; required, since one key set can sign for several tenants. */
  issuer: string | string[];
  /** The `aud` of tokens meant for this app; `null` only for a provider whose tokens carry none (Clerk). */
  audience: string | string[] | null;
  jwks?: JwksCacheOptions;
}

export type JwtAuthOptions = JwtSecretOptions | JwtJwksOptions;

/** A secret signs HMAC tokens only; a key set signs asymmetric ones only: no HS/RS confusion, no `none`. */
const SECRET_ALGORITHMS = ['HS256'];
const JWKS_ALGORITHMS = ['RS256', 'ES256'];
const DEFAULT_CLOCK_TOLERANCE = 5;
const MAX_CLOCK_TOLERANCE = 300;
const MIN_SECRET_BYTES = 32;

/**
 * jose's errors that mean "this token is not good" (bad signature, expired, wrong claims, an
 * algorithm not allowed, an unknown key id): the caller is then a guest. Others (the key set cannot
 * be fetched or is malformed) are the host's problem and are thrown, so the router answers 401 and
 * logs them.
 */
const TOKEN_ERRORS = new Set([
  'ERR_JWT_EXPIRED',
  'ERR_JWT_CLAIM_VALIDATION_FAILED',
  'ERR_JWT_INVALID',
  'ERR_JWS_INVALID',
  'ERR_JWS_SIGNATURE_VERIFICATION_FAILED',
  'ERR_JOSE_ALG_NOT_ALLOWED',
  'ERR_JOSE_NOT_SUPPORTED',
  'ERR_JWKS_NO_MATCHING_KEY',
  'ERR_JWKS_MULTIPLE_MATCHING_KEYS',
  'ERR_JWK_INVALID',
]);

/** Why jwtAuth made a token's caller a guest, as its log line says (docs/auth.md). */
export type JwtRejectReason =
  | 'malformed'
  | 'algorithm not allowed'
  | 'bad signature'
  | 'unknown key'
  | 'expired'
  | 'not yet valid'
  | 'issued in the future'
  | 'no expiry'
  | 'wrong issuer'
  | 'wrong audience'
  | 'no subject';

/** The reason of one of jose's TOKEN_ERRORS; only its code and the claim's name are read, never a value the token carries. */
function classifyTokenError(error: { code: string; claim?: unknown; reason?: unknown }): JwtRejectReason {
  switch (error.code) {
    case 'ERR_JWT_EXPIRED':
      return 'expired';
    case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
      return 'bad signature';
    case 'ERR_JWKS_NO_MATCHING_KEY':
    case 'ERR_JWKS_MULTIPLE_MATCHING_KEYS':
      return 'unknown key';
    case 'ERR_JOSE_ALG_NOT_ALLOWED':
    case 'ERR_JOSE_NOT_SUPPORTED':
      return 'algorithm not allowed';
    case 'ERR_JWT_CLAIM_VALIDATION_FAILED':
      // A claim of the wrong type ("invalid") is a malformed token, whichever claim it is.
      if (error.reason === 'invalid') return 'malformed';
      if (error.claim === 'aud') return 'wrong audience';
      if (error.claim === 'iss') return 'wrong issuer';
      if (error.claim === 'nbf') return 'not yet valid';
      if (error.claim === 'exp') return 'no expiry';
      return 'malformed';
    default:
      return 'malformed';
  }
}

function tokenErrorOf(error: unknown): { code: string; claim?: unknown; reason?: unknown } | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && TOKEN_ERRORS.has(code) ? (error as { code: string }) : undefined;
}

/**
 * Reports each reason once per logger (the router's, found through the request), at info: a flood
 * of bad tokens writes one line per reason, and what is remembered is bounded by the reasons, held
 * weakly per logger. The line names the reason and what this jwtAuth expects (its own
 * configuration), never the token or a value it carries: those are the caller's to choose.
 */
function createRejectionReport(expected: { issuer?: string | string[]; audience?: string | string[] | null; keySet?: boolean }) {
  const reported = new WeakMap<Logger, Set<JwtRejectReason>>();
  const detail = (reason: JwtRejectReason): string => {
    if (reason === 'wrong audience' && expected.audience) return `; this app expects the audience ${JSON.stringify(expected.audience)}`;
    if (reason === 'wrong issuer' && expected.issuer) return `; this app expects the issuer ${JSON.stringify(expected.issuer)}`;
    if (reason === 'unknown key') return '; no key of the key set has its key id, even after the set was fetched again (at most once per jwks.cooldownMs)';
    if (reason === 'no expiry') return '; a token must carry exp unless requireExp is false';
    if (reason === 'algorithm not allowed') return expected.keySet ? '; a key set verifies RS256 and ES256 only' : '; a secret verifies HS256 only';
    return '';
  };
  return (req: Request | undefined, reason: JwtRejectReason): null => {
    const logger = findAuthLogger(req);
    if (logger === undefined) return null;
    let reasons = reported.get(logger);
    if (reasons === undefined) reported.set(logger, (reasons = new Set()));
    if (reasons.has(reason)) return null;
    reasons.add(reason);
    logger.info(`jwtAuth refused a token, so its request was served as a guest: ${reason}${detail(reason)} (each reason is logged once)`);
    return null;
  };
}

function checkClockTolerance(value: number | undefined): number {
  if (value === undefined) return DEFAULT_CLOCK_TOLERANCE;
  if (!Number.isFinite(value) || value < 0 || value > MAX_CLOCK_TOLERANCE) {
    throw new TypeError(`jwtAuth: clockTolerance must be a number of seconds from 0 to ${MAX_CLOCK_TOLERANCE}`);
  }
  return value;
}

function checkRequireExp(value: unknown): boolean {
  if (value === undefined) return true;
  if (typeof value !== 'boolean') throw new TypeError('jwtAuth: requireExp must be true or false');
  return value;
}

function secretKey(secret: unknown): Uint8Array {
  const key = typeof secret === 'string' ? new TextEncoder().encode(secret) : secret;
  if (!(key instanceof Uint8Array) || key.byteLength < MIN_SECRET_BYTES) {
    throw new TypeError(`jwtAuth: secret must be a string or bytes of at least ${MIN_SECRET_BYTES} bytes`);
  }
  return key;
}

function matchesSuperuser(claims: JWTPayload, options: SuperuserClaim): boolean {
  if (options.superuserClaim === undefined) return false;
  if (!Object.hasOwn(claims, options.superuserClaim)) return false;
  const value = claims[options.superuserClaim];
  const wanted = options.superuserValue ?? true;
  return Array.isArray(value) ? value.includes(wanted) : value === wanted;
}

/**
 * The default mapping: `sub` is the id (no `sub`: a guest), the other claims are readable as
 * `@request.auth.<claim>`, and `superuser` comes only from `superuserClaim`, never from a claim
 * of that name.
 */
function defaultMapper(options: SuperuserClaim): ClaimsMapper {
  return (claims) => {
    if (!hasSubject(claims)) return null;
    const { id: _id, superuser: _superuser, ...rest } = claims;
    return { ...rest, id: claims.sub as string, superuser: matchesSuperuser(claims, options) };
  };
}

function hasSubject(claims: JWTPayload): boolean {
  return typeof claims.sub === 'string' && claims.sub !== '';
}

/**
 * An `auth` option that accepts JSON Web Tokens: HS256 with `{ secret }`, or RS256/ES256 with
 * `{ jwksUrl, issuer, audience }` (the key set is read up to `jwks.maxBytes`, cached, and fetched
 * again for an unknown key id at most once per cooldown). A token that fails verification, has no
 * `exp` (unless `requireExp: false`) or was issued in the future makes the caller a guest. `map`
 * replaces the default mapping of claims to an identity (docs/auth.md).
 */
export function jwtAuth(options: JwtAuthOptions, map?: ClaimsMapper): AuthFunction {
  if (typeof options !== 'object' || options === null) throw new TypeError('jwtAuth: options must be an object');
  if (map !== undefined && typeof map !== 'function') throw new TypeError('jwtAuth: map must be a function');
  const usesSecret = 'secret' in options;
  if (usesSecret === 'jwksUrl' in options) throw new TypeError('jwtAuth: pass either secret or jwksUrl, not both');
  const clockTolerance = checkClockTolerance(options.clockTolerance);
  const verifyOptions: JWTVerifyOptions = {
    algorithms: usesSecret ? SECRET_ALGORITHMS : JWKS_ALGORITHMS,
    clockTolerance,
  };
  if (checkRequireExp(options.requireExp)) verifyOptions.requiredClaims = ['exp'];
  if (options.issuer !== undefined) verifyOptions.issuer = options.issuer;
  if (options.audience !== undefined && options.audience !== null) verifyOptions.audience = options.audience;
  const mapClaims = map ?? defaultMapper(options);

  if (usesSecret) {
    const key = secretKey(options.secret);
    const reject = createRejectionReport({ issuer: options.issuer, audience: options.audience });
    const toIdentity = checkClaims({ clockTolerance, mapClaims, mapsSubject: map === undefined, reject });
    return (token, req) => verify({ run: () => jwtVerify(token, key, verifyOptions), toIdentity, reject, req });
  }
  if (typeof options.issuer !== 'string' && !Array.isArray(options.issuer)) {
    throw new TypeError('jwtAuth: issuer is required with jwksUrl');
  }
  if (options.audience === undefined) {
    throw new TypeError('jwtAuth: audience is required with jwksUrl (null only for a provider whose tokens carry none)');
  }
  const keySet = createRemoteJWKSet(checkJwksUrl(options.jwksUrl), resolveJwksSettings(options.jwks));
  const reject = createRejectionReport({ issuer: options.issuer, audience: options.audience, keySet: true });
  const toIdentity = checkClaims({ clockTolerance, mapClaims, mapsSubject: map === undefined, reject });
  return (token, req) => verify({ run: () => jwtVerify(token, keySet, verifyOptions), toIdentity, reject, req });
}

type Reject = ReturnType<typeof createRejectionReport>;
type ToIdentity = (claims: JWTPayload, req: Request | undefined) => Identity | null;

/**
 * What follows jose's verification: `iat` (isIssuedInFuture), then the mapping. A missing `sub`
 * is reported only under the default mapping; a host's `map` answering `null` is its own decision.
 */
function checkClaims(options: { clockTolerance: number; mapClaims: ClaimsMapper; mapsSubject: boolean; reject: Reject }): ToIdentity {
  return (claims, req) => {
    if (isIssuedInFuture(claims, options.clockTolerance)) return options.reject(req, 'issued in the future');
    if (options.mapsSubject && !hasSubject(claims)) return options.reject(req, 'no subject');
    return options.mapClaims(claims);
  };
}

/**
 * jose checks `iat` only with a maximum token age, which we do not impose. A token issued later
 * than now (beyond the tolerance) comes from a wrong clock or was minted ahead to be used later;
 * either way a `map` or a rule reading `iat` would trust a date that has not happened.
 */
function isIssuedInFuture(claims: JWTPayload, clockTolerance: number): boolean {
  return typeof claims.iat === 'number' && claims.iat > Math.floor(Date.now() / 1000) + clockTolerance;
}

async function verify(options: { run: () => Promise<{ payload: JWTPayload }>; toIdentity: ToIdentity; reject: Reject; req: Request | undefined }): Promise<Identity | null> {
  let payload: JWTPayload;
  try {
    ({ payload } = await options.run());
  } catch (error) {
    const tokenError = tokenErrorOf(error);
    if (tokenError) return options.reject(options.req, classifyTokenError(tokenError));
    throw error;
  }
  return options.toIdentity(payload, options.req);
}

export type { AuthFunction, Identity } from './identity.js';
