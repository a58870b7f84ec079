import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { SharedSetting } from '../db/settings-store.js';
import { FILE_TOKEN_SECRET_SETTING, SETTINGS_TABLE } from '../db/shared-names.js';
import type { Identity } from './identity.js';

/**
 * Short-lived file tokens (docs/protected-files.md): `POST /api/files/token` hands one out so that a file URL
 * can carry `?token=` without exposing the caller's long-lived token. The library signs and
 * checks them itself; the host's `auth()` never sees them.
 */
export interface FileTokens {
  /**
   * A token for `identity`, valid for the configured lifetime from `now` (milliseconds, default
   * `Date.now()`). Throws a TypeError when the identity has no string `id` (there is nobody to
   * bind the token to).
   */
  sign(identity: Identity, now?: number): string;
  /**
   * The identity a valid, unexpired token was signed for, or `null`. Never throws: whatever a
   * client puts in `?token=` (any length, any bytes) is just "not a file token".
   */
  verify(token: string, now?: number): Identity | null;
  /** Whether a token has the file-token shape, so a caller can verify it here instead of passing it to `auth()`. */
  isFileToken(token: string): boolean;
}

/** Options of `createFileTokens`. */
export interface FileTokensOptions {
  /** The HMAC key; every instance that serves the same files must use the same one. */
  secret: Uint8Array | string;
  /** Lifetime of a token. Default 180 (docs/protected-files.md): long enough to follow a link, short enough to leak little. */
  ttlSeconds?: number;
}

const PREFIX = 'rbft.';
/** Bound into every MAC, so a signature made with the same secret for anything else (or an older token format) never passes. */
const MAC_CONTEXT = 'recordbase-file-token:v2:';
/** Longer than any token `sign` makes (an id, a flag and an expiry, base64url, plus the signature); a cheap first reject. */
const MAX_TOKEN_LENGTH = 4096;
/** Longest identity id a token carries; longer ids (not ours to limit elsewhere) cannot get a file token. */
const MAX_ID_LENGTH = 1024;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/**
 * Creates the signer and checker of file tokens: `rbft.<base64url payload>.<base64url HMAC-SHA256>`,
 * the payload being `{"v":2,"exp":<unix seconds>,"sub":"<identity id>"}` plus `"su":true` for a
 * superuser.
 *
 * A token carries only the identity's id, its superuser flag and the expiry: it ends up in URLs,
 * logs and Referer headers, so whatever else `auth()` returned (emails, roles, session data) must
 * not travel in it. A view rule that reads other `@request.auth.<field>` values sees them empty
 * for a download made with a file token (docs/protected-files.md). A token is valid for
 * `ttlSeconds` at most (slightly less when signed mid-second: `exp` is counted in whole seconds).
 */
export function createFileTokens(options: FileTokensOptions): FileTokens {
  const secret = typeof options?.secret === 'string' ? Buffer.from(options.secret, 'utf8') : options?.secret;
  if (!(secret instanceof Uint8Array) || secret.length === 0) {
    throw new TypeError('createFileTokens: `secret` must be a non-empty string or Uint8Array');
  }
  const key = Buffer.from(secret); // a copy: the caller may reuse or wipe its buffer
  const ttlSeconds = options.ttlSeconds ?? 180;
  if (!Number.isSafeInteger(ttlSeconds) || ttlSeconds <= 0) {
    throw new TypeError('createFileTokens: `ttlSeconds` must be a positive integer');
  }
  const signPayload = (payload: string): string => createHmac('sha256', key).update(MAC_CONTEXT + payload).digest('base64url');

  return {
    sign(identity: Identity, now = Date.now()): string {
      if (!identity || typeof identity.id !== 'string' || identity.id === '' || identity.id.length > MAX_ID_LENGTH) {
        throw new TypeError(`FileTokens.sign: the identity needs a non-empty string \`id\` of at most ${MAX_ID_LENGTH} characters`);
      }
      const exp = Math.floor(now / 1000) + ttlSeconds;
      const claims = identity.superuser === true ? { v: 2, exp, sub: identity.id, su: true } : { v: 2, exp, sub: identity.id };
      const payload = Buffer.from(JSON.stringify(claims), 'utf8').toString('base64url');
      return `${PREFIX}${payload}.${signPayload(payload)}`;
    },

    verify(token: string, now = Date.now()): Identity | null {
      try {
        return readToken(token, now);
      } catch {
        return null; // belt and braces: nothing a client sends may throw out of here
      }
    },

    isFileToken(token: string): boolean {
      return typeof token === 'string' && token.startsWith(PREFIX);
    },
  };

  function readToken(token: unknown, now: number): Identity | null {
    if (typeof token !== 'string' || token.length > MAX_TOKEN_LENGTH || !token.startsWith(PREFIX)) return null;
    const parts = token.slice(PREFIX.length).split('.');
    if (parts.length !== 2) return null;
    const [payload = '', signature = ''] = parts;
    if (!BASE64URL.test(payload) || !BASE64URL.test(signature)) return null;
    const expected = Buffer.from(signPayload(payload), 'ascii');
    const given = Buffer.from(signature, 'ascii');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
    // Only a payload we signed gets parsed.
    const body: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    if (!isPlainObject(body) || body.v !== 2) return null;
    const { exp, sub, su } = body;
    if (typeof exp !== 'number' || !Number.isSafeInteger(exp) || !Number.isFinite(now) || now >= exp * 1000) return null;
    if (typeof sub !== 'string' || sub === '') return null;
    return su === true ? { id: sub, superuser: true } : { id: sub };
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Options of `loadFileTokenSecret`. */
export interface LoadFileTokenSecretOptions {
  /** An explicit secret (`fileTokenSecret`), already checked by `checkFileTokenSecret` when the options were resolved. */
  secret?: string;
  /** The secret's place in the database (`_recordbase_settings`), which every instance on it shares. */
  shared: SharedSetting;
  /** Where earlier versions kept a generated secret (`<dataDir>/file-token.secret`); read, never written. */
  dataDir: string;
}

const MIN_SECRET_LENGTH = 32;
const SECRET_FILE = 'file-token.secret';

/**
 * The check of the `fileTokenSecret` option, run once when the options are resolved: a short key
 * makes every file token guessable offline, so it refuses the start rather than signing with it.
 */
export function checkFileTokenSecret(path: string, value: unknown): string {
  if (typeof value !== 'string' || value.length < MIN_SECRET_LENGTH) {
    throw new TypeError(`${path} must be a string of at least ${MIN_SECRET_LENGTH} characters (use e.g. 32 random bytes as hex)`);
  }
  return value;
}

/**
 * The key file tokens are signed with. An explicit `secret` wins. Otherwise the secret kept in
 * the database (`shared`): created once, by whichever instance starts first (32 random bytes,
 * hex), so that every instance on the database accepts every other's tokens and tokens survive
 * restarts, with no configuration and no shared disk. Instances starting together agree on one
 * secret (the first insert wins, the others read it).
 *
 * Upgrade path: when the database holds no secret yet and `<dataDir>/file-token.secret` (where
 * earlier versions generated it) exists, that secret is stored instead, so tokens already handed
 * out keep working; from then on the database is the source and the file is no longer read.
 *
 * Throws an Error for a stored secret or secret file that is too short (corrupted: delete it, or
 * pass `fileTokenSecret`), and the database's error when it cannot be reached.
 */
export async function loadFileTokenSecret(options: LoadFileTokenSecretOptions): Promise<Buffer> {
  if (options.secret !== undefined) return Buffer.from(options.secret, 'utf8');
  const stored = (await options.shared.read()) ?? (await options.shared.claim(await readLegacySecret(options.dataDir) ?? randomBytes(32).toString('hex')));
  if (stored.length < MIN_SECRET_LENGTH) {
    throw new Error(`the file-token secret stored in the database is under ${MIN_SECRET_LENGTH} characters; delete it (key "${FILE_TOKEN_SECRET_SETTING}" of ${SETTINGS_TABLE}) or pass fileTokenSecret`);
  }
  return Buffer.from(stored, 'utf8');
}

/** The secret an earlier version generated under `dataDir`, or undefined when there is no file. */
async function readLegacySecret(dataDir: string): Promise<string | undefined> {
  const file = path.join(dataDir, SECRET_FILE);
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException)?.code === 'ENOENT') return undefined;
    throw error;
  }
  const secret = text.trim();
  if (secret.length < MIN_SECRET_LENGTH) {
    throw new Error(`${file} holds no usable secret (under ${MIN_SECRET_LENGTH} characters); delete it or pass fileTokenSecret`);
  }
  return secret;
}
