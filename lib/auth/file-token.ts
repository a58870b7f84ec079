import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { SharedSetting } from '../db/schema/settings-store.js';
import { FILE_TOKEN_SECRET_SETTING, SETTINGS_TABLE } from '../db/shared-names.js';
import type { Identity } from './identity.js';

/**
 * What a file token opens. `all`: protected files and, for a superuser, backups: PocketBase's one
 * kind of file token, what `POST /api/files/token` gives the SDK. `files`: protected files only,
 * what the dashboard asks for, since its tokens sit in `<img src>` URLs (history, logs, caches).
 */
export type FileTokenScope = 'files' | 'all';

/** The scopes a client may ask `POST /api/files/token` for. */
export const FILE_TOKEN_SCOPES: readonly FileTokenScope[] = ['files', 'all'];

/** What a valid file token stands for. */
export interface VerifiedFileToken {
  /** The id and superuser flag it was signed for; nothing else of the identity travels in it. */
  identity: Identity;
  scope: FileTokenScope;
}

/**
 * Short-lived file tokens (docs/protected-files.md): `POST /api/files/token` hands one out so that a file URL
 * can carry `?token=` without exposing the caller's long-lived token. The library signs and
 * checks them itself; the host's `auth()` never sees them.
 */
export interface FileTokens {
  /**
   * A token for `identity` opening `scope` (default `files`, the narrower), valid for the
   * configured lifetime from `now` (milliseconds, default `Date.now()`). Throws a TypeError when
   * the identity has no string `id` (there is nobody to bind the token to).
   */
  sign(identity: Identity, options?: { scope?: FileTokenScope; now?: number }): string;
  /**
   * What a valid token stands for, or `null`: a bad signature, an expired token, or one whose
   * expiry lies further ahead than a token this lifetime could carry. Never throws: whatever a
   * client puts in `?token=` (any length, any bytes) is just "not a file token".
   */
  verify(token: string, now?: number): VerifiedFileToken | null;
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

/**
 * How far ahead of this instance's clock a token's expiry may lie beyond the lifetime: another
 * instance's clock may run ahead of ours. Anything further ahead was not signed by an instance
 * for this lifetime (a forged or hand-made `exp`), and is refused however valid its signature.
 */
export const FILE_TOKEN_CLOCK_SKEW_MS = 5_000;

const PREFIX = 'rbft.';
/**
 * Bound into every MAC, by format version, so a signature made with the same secret for anything
 * else, or for another format, never passes as this one. Version 3 carries a scope; version 2
 * (releases before it) had none and opened what `all` opens, which is what it is read as.
 */
const MAC_CONTEXTS = { 3: 'recordbase-file-token:v3:', 2: 'recordbase-file-token:v2:' } as const;
const CURRENT_VERSION = 3;
/** Longer than any token `sign` makes (an id, a flag, an expiry and a scope, base64url, plus the signature); a cheap first reject. */
const MAX_TOKEN_LENGTH = 4096;
/** Longest identity id a token carries; longer ids (not ours to limit elsewhere) cannot get a file token. */
const MAX_ID_LENGTH = 1024;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/**
 * Creates the signer and checker of file tokens: `rbft.<base64url payload>.<base64url HMAC-SHA256>`,
 * the payload being `{"v":3,"exp":<unix seconds>,"sub":"<identity id>","scope":"files"|"all"}` plus
 * `"su":true` for a superuser.
 *
 * A token carries only the identity's id, its superuser flag, the expiry and the scope: it ends
 * up in URLs, logs and Referer headers, so whatever else `auth()` returned (emails, roles, session
 * data) must not travel in it. A view rule that reads other `@request.auth.<field>` values sees
 * them empty for a download made with a file token (docs/protected-files.md). A token is valid
 * for `ttlSeconds` at most (slightly less when signed mid-second: `exp` is counted in whole
 * seconds), whatever `exp` it carries: one further ahead than the lifetime (and
 * FILE_TOKEN_CLOCK_SKEW_MS) is refused, so that no token, however it was signed, outlives it.
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
  const signPayload = (version: keyof typeof MAC_CONTEXTS, payload: string): string => createHmac('sha256', key).update(MAC_CONTEXTS[version] + payload).digest('base64url');
  const longestAheadMs = ttlSeconds * 1000 + FILE_TOKEN_CLOCK_SKEW_MS;

  return {
    sign(identity: Identity, options: { scope?: FileTokenScope; now?: number } = {}): string {
      if (!identity || typeof identity.id !== 'string' || identity.id === '' || identity.id.length > MAX_ID_LENGTH) {
        throw new TypeError(`FileTokens.sign: the identity needs a non-empty string \`id\` of at most ${MAX_ID_LENGTH} characters`);
      }
      const scope = options.scope ?? 'files';
      if (!FILE_TOKEN_SCOPES.includes(scope)) throw new TypeError(`FileTokens.sign: \`scope\` must be one of ${FILE_TOKEN_SCOPES.join(', ')}`);
      const exp = Math.floor((options.now ?? Date.now()) / 1000) + ttlSeconds;
      const claims = { v: CURRENT_VERSION, exp, sub: identity.id, scope, ...(identity.superuser === true ? { su: true } : {}) };
      const payload = Buffer.from(JSON.stringify(claims), 'utf8').toString('base64url');
      return `${PREFIX}${payload}.${signPayload(CURRENT_VERSION, payload)}`;
    },

    verify(token: string, now = Date.now()): VerifiedFileToken | null {
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

  /** The format version whose MAC `signature` is, or undefined when it is none of them. */
  function versionSigned(payload: string, signature: string): keyof typeof MAC_CONTEXTS | undefined {
    const given = Buffer.from(signature, 'ascii');
    for (const version of [3, 2] as const) {
      const expected = Buffer.from(signPayload(version, payload), 'ascii');
      if (given.length === expected.length && timingSafeEqual(given, expected)) return version;
    }
    return undefined;
  }

  function readToken(token: unknown, now: number): VerifiedFileToken | null {
    if (typeof token !== 'string' || token.length > MAX_TOKEN_LENGTH || !token.startsWith(PREFIX)) return null;
    const parts = token.slice(PREFIX.length).split('.');
    if (parts.length !== 2) return null;
    const [payload = '', signature = ''] = parts;
    if (!BASE64URL.test(payload) || !BASE64URL.test(signature)) return null;
    const version = versionSigned(payload, signature);
    if (version === undefined) return null;
    // Only a payload we signed gets parsed.
    const body: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    if (!isPlainObject(body) || body.v !== version) return null;
    const { exp, sub, su } = body;
    if (typeof exp !== 'number' || !Number.isSafeInteger(exp) || !Number.isFinite(now) || now >= exp * 1000 || exp * 1000 - now > longestAheadMs) return null;
    if (typeof sub !== 'string' || sub === '') return null;
    const scope = version === 2 ? 'all' : body.scope;
    if (!FILE_TOKEN_SCOPES.includes(scope as FileTokenScope)) return null;
    return { identity: su === true ? { id: sub, superuser: true } : { id: sub }, scope: scope as FileTokenScope };
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
  /** Where the key file lives (`keyInDataDir`), and where earlier versions kept a generated secret (`<dataDir>/file-token.secret`, read, never written). */
  dataDir: string;
  /**
   * Keep the generated secret in `<dataDir>/file-token.key` instead of the database: for the
   * embedded database the router opened itself, which a backup copies whole (one process holds
   * it, so no other instance needs the secret).
   */
  keyInDataDir?: boolean;
}

const MIN_SECRET_LENGTH = 32;
const SECRET_FILE = 'file-token.secret';
/** The embedded engine's key file: beside the database folder, so never in a backup's copy of it. */
const KEY_FILE = 'file-token.key';

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
 * The key file tokens are signed with. An explicit `secret` wins. With `keyInDataDir` (the
 * embedded database the router opened), a key kept in `<dataDir>/file-token.key`, made on the
 * first start: a backup copies the database and the storage, never this file, so a stolen
 * backup signs no token for the running instance, and a restore into a new data dir starts with
 * a new key. Earlier releases kept the embedded secret in the database (so in every backup):
 * that row is deleted and never used again.
 *
 * Otherwise the secret kept in the database (`shared`): created once, by whichever instance
 * starts first (32 random bytes, hex), so that every instance on the database accepts every
 * other's tokens and tokens survive restarts, with no configuration and no shared disk.
 * Instances starting together agree on one secret (the first insert wins, the others read it).
 * Upgrade path: when the database holds no secret yet and `<dataDir>/file-token.secret` (where
 * earlier versions generated it) exists, that secret is stored instead, so tokens already handed
 * out keep working; from then on the database is the source and the file is no longer read.
 *
 * Throws an Error for a stored secret, key file or secret file that is too short (corrupted:
 * delete it, or pass `fileTokenSecret`), and the database's error when it cannot be reached.
 */
export async function loadFileTokenSecret(options: LoadFileTokenSecretOptions): Promise<Buffer> {
  if (options.secret !== undefined) return Buffer.from(options.secret, 'utf8');
  if (options.keyInDataDir === true) {
    const key = await loadKeyFile(path.join(options.dataDir, KEY_FILE));
    await options.shared.remove();
    return Buffer.from(key, 'utf8');
  }
  const stored = (await options.shared.read()) ?? (await options.shared.claim(await readSecretFile(path.join(options.dataDir, SECRET_FILE)) ?? randomBytes(32).toString('hex')));
  if (stored.length < MIN_SECRET_LENGTH) {
    throw new Error(`the file-token secret stored in the database is under ${MIN_SECRET_LENGTH} characters; delete it (key "${FILE_TOKEN_SECRET_SETTING}" of ${SETTINGS_TABLE}) or pass fileTokenSecret`);
  }
  return Buffer.from(stored, 'utf8');
}

/**
 * The key in `file`, made first when there is none: written whole under another name, then
 * linked into place, so that a crash never leaves half a key and a key already there is never
 * replaced. Readable by its owner only.
 */
async function loadKeyFile(file: string): Promise<string> {
  const existing = await readSecretFile(file);
  if (existing !== undefined) return existing;
  await fs.mkdir(path.dirname(file), { recursive: true });
  const staged = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    await fs.writeFile(staged, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600, flag: 'wx', flush: true });
    await fs.link(staged, file).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error;
    });
  } finally {
    await fs.rm(staged, { force: true });
  }
  return (await readSecretFile(file))!;
}

/** The secret in `file`, or undefined when there is no file. */
async function readSecretFile(file: string): Promise<string | undefined> {
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
