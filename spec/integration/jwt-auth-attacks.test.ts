import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { once } from 'node:events';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from 'jose';
import type { CollectionDefinition } from '../../lib/index.js';
import { jwtAuth, type JwtJwksOptions } from '../../lib/auth/jwt-auth.js';
import type { AuthFunction } from '../../lib/auth/identity.js';
import { measurePeakGrowth } from '../support/measure-peak-growth.js';
import { createMemoryLogger, startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/**
 * Issue 41, finding 9: tokens that never expire, tokens issued in the future, and a key set too
 * large to read whole; over a listening router on both engines, with tokens signed by real keys.
 */

const ISSUER = 'https://issuer.test/';
const AUDIENCE = 'recordbase-tests';
const SECRET = 'a-shared-secret-of-at-least-32-bytes!';
const MIB = 1024 * 1024;

const notes: CollectionDefinition[] = [
  { name: 'notes', fields: [{ name: 'text', type: 'text' }], rules: { list: '@request.auth.id != ""', view: '@request.auth.id != ""', create: null, update: null, delete: null } },
];

interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  jwk: JWK;
}

async function makeRsaKey(kid: string): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } };
}

const now = () => Math.floor(Date.now() / 1000);

/** A token as a provider signs it (sub, iss, aud, iat, exp in 5 minutes); `edit` changes the claims. */
function sign(key: SigningKey, edit: (jwt: SignJWT) => SignJWT = (jwt) => jwt, claims: JWTPayload = {}): Promise<string> {
  const jwt = new SignJWT({ ...claims }).setProtectedHeader({ alg: 'RS256', kid: key.kid }).setSubject('user1234567890a').setIssuer(ISSUER).setAudience(AUDIENCE).setIssuedAt().setExpirationTime('5m');
  return edit(jwt).sign(key.privateKey);
}

/** What a key set server saw of one response: bytes it could write, and whether the client read them all. */
interface Served {
  sent: number;
  completed: boolean;
}

/**
 * A key set on loopback: the real key first, then `fillerBytes` of other RSA keys (as a provider
 * with a runaway key list, or an attacker who can point a host at a URL, would serve), written
 * chunk by chunk with backpressure so that the server side never holds it. `contentLength`
 * announces the size up front; otherwise the body is chunked and only its end tells it. `stall`
 * sends the start only and then nothing until the client goes.
 */
async function startKeySetServer(key: SigningKey, options: { fillerBytes: number; contentLength: boolean; stall?: boolean }) {
  const filler = { ...key.jwk, kid: 'filler-key' };
  const entry = `,${JSON.stringify(filler)}`;
  const chunk = Buffer.from(entry.repeat(Math.ceil((64 * 1024) / entry.length)));
  const chunks = Math.ceil(options.fillerBytes / chunk.length);
  const head = Buffer.from(`{"keys":[${JSON.stringify(key.jwk)}`);
  const tail = Buffer.from(']}');
  const total = head.length + chunks * chunk.length + tail.length;
  const responses: Array<Promise<Served>> = [];

  async function write(res: ServerResponse, served: Served, bytes: Buffer): Promise<boolean> {
    if (res.destroyed) return false;
    served.sent += bytes.length;
    if (!res.write(bytes)) await Promise.race([once(res, 'drain'), once(res, 'close')]);
    return !res.destroyed;
  }

  const server = createServer((_req, res) => {
    const served: Served = { sent: 0, completed: false };
    responses.push(
      (async () => {
        res.setHeader('content-type', 'application/json');
        if (options.contentLength) res.setHeader('content-length', total);
        let open = await write(res, served, head);
        if (options.stall) {
          if (open) await once(res, 'close');
          return served;
        }
        for (let i = 0; open && i < chunks; i += 1) open = await write(res, served, chunk);
        if (open && (await write(res, served, tail))) {
          res.end();
          await once(res, 'finish');
          served.completed = true;
        }
        return served;
      })(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/jwks.json`;
  return {
    url,
    total,
    /** What each response so far came to, once each has finished or been cut off. */
    served: () => Promise.all(responses),
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe.each(testEngines())('jwtAuth under attack (%s)', (engine) => {
  let rsa: SigningKey;
  let small: Awaited<ReturnType<typeof startKeySetServer>>;
  let app: TestApp;
  let logger: ReturnType<typeof createMemoryLogger>;
  /** The router's auth() is this jwtAuth, swapped by each test so that one app serves them all. */
  let current: AuthFunction;
  const jwks = (more: Partial<JwtJwksOptions> = {}, url = small.url) => jwtAuth({ jwksUrl: url, issuer: ISSUER, audience: AUDIENCE, ...more });

  beforeAll(async () => {
    rsa = await makeRsaKey('rsa-1');
    small = await startKeySetServer(rsa, { fillerBytes: 0, contentLength: true });
    logger = createMemoryLogger();
    app = await startTestApp(engine, { collections: notes, logger, auth: (token, req) => current(token, req) });
    await app.router.api.collection('notes').create({ text: 'members only' }, { as: 'superuser' });
  }, 60_000);

  afterAll(async () => {
    await app?.close();
    await small?.close();
  });

  /** The status and how many notes the caller sees: 1 signed in, 0 as a guest. */
  async function listAs(token: string): Promise<{ status: number; visible: number | undefined }> {
    const res = await app.http.get('/backend/api/collections/notes/records').set('Authorization', `Bearer ${token}`);
    return { status: res.status, visible: res.body.totalItems };
  }

  test('a token issued an hour ahead is a guest; one issued within the clock tolerance signs in', async () => {
    current = jwks();
    expect(await listAs(await sign(rsa, (jwt) => jwt.setIssuedAt(now() + 3600)))).toEqual({ status: 200, visible: 0 });
    expect(await listAs(await sign(rsa, (jwt) => jwt.setIssuedAt(now() + 60)))).toEqual({ status: 200, visible: 0 });
    expect(await listAs(await sign(rsa, (jwt) => jwt.setIssuedAt(now() + 2)))).toEqual({ status: 200, visible: 1 });
    // The tolerance is the one clockTolerance sets for exp and nbf.
    current = jwks({ clockTolerance: 120 });
    expect(await listAs(await sign(rsa, (jwt) => jwt.setIssuedAt(now() + 60)))).toEqual({ status: 200, visible: 1 });
    expect(await listAs(await sign(rsa, (jwt) => jwt.setIssuedAt(now() + 3600)))).toEqual({ status: 200, visible: 0 });
  });

  test('a token without exp is a guest, unless requireExp: false', async () => {
    const noExp = await new SignJWT({}).setProtectedHeader({ alg: 'RS256', kid: rsa.kid }).setSubject('user1234567890a').setIssuer(ISSUER).setAudience(AUDIENCE).setIssuedAt().sign(rsa.privateKey);
    current = jwks();
    expect(await listAs(noExp)).toEqual({ status: 200, visible: 0 });
    current = jwks({ requireExp: false });
    expect(await listAs(noExp)).toEqual({ status: 200, visible: 1 });
    // Allowing none still refuses an exp that has passed.
    expect(await listAs(await sign(rsa, (jwt) => jwt.setIssuedAt(now() - 120).setExpirationTime(now() - 60)))).toEqual({ status: 200, visible: 0 });
  });

  test('a 40 MB key set is cut off after jwks.maxBytes: 401, logged once, and the process never holds it', async () => {
    const huge = await startKeySetServer(rsa, { fillerBytes: 40 * MIB, contentLength: false });
    try {
      current = jwks({}, huge.url);
      const token = await sign(rsa);
      // Node's fetch loads its code on first use; that is not the key set's cost.
      await (await fetch(small.url)).arrayBuffer();
      let first = { status: 0, visible: undefined as number | undefined };
      const growth = await measurePeakGrowth(async () => {
        first = await listAs(token);
      });
      const again = [await listAs(token), await listAs(token)];
      const served = await huge.served();

      // Before: the whole set was read and parsed (+300 MB and more), and its keys signed the caller in.
      expect(growth).toBeLessThan(64 * MIB);
      expect([first, ...again].map((r) => r.status)).toEqual([401, 401, 401]);
      // Each fetch stopped early: the server could write only what the socket buffers hold beyond the cap.
      expect(served).toHaveLength(3);
      for (const response of served) {
        expect(response.completed).toBe(false);
        expect(response.sent).toBeLessThan(huge.total / 2);
      }
      const said = logger.lines.filter((line) => line.includes(huge.url));
      expect(said).toHaveLength(1);
      expect(said[0]).toMatch(/larger than jwks\.maxBytes \(1048576 bytes\)/);
    } finally {
      await huge.close();
    }
  }, 60_000);

  test('a key set whose Content-Length is over jwks.maxBytes is refused before its body is read', async () => {
    const announced = await startKeySetServer(rsa, { fillerBytes: 40 * MIB, contentLength: true, stall: true });
    try {
      // Were the body awaited, the request would end only at this timeout, and say so.
      current = jwks({ jwks: { timeoutMs: 20_000 } }, announced.url);
      expect((await listAs(await sign(rsa))).status).toBe(401);
      expect(logger.lines.filter((line) => line.includes(announced.url))).toEqual([expect.stringMatching(/larger than jwks\.maxBytes/)]);
    } finally {
      await announced.close();
    }
  }, 40_000);

  test('jwks.maxBytes: a 2 MiB key set announced by Content-Length is refused by default and read under a larger cap', async () => {
    const large = await startKeySetServer(rsa, { fillerBytes: 2 * MIB, contentLength: true });
    try {
      const token = await sign(rsa);
      current = jwks({}, large.url);
      expect((await listAs(token)).status).toBe(401);
      current = jwks({ jwks: { maxBytes: 4 * MIB } }, large.url);
      expect(await listAs(token)).toEqual({ status: 200, visible: 1 });
    } finally {
      await large.close();
    }
  });
});

describe('jwtAuth with a secret: iat and exp', () => {
  const key = new TextEncoder().encode(SECRET);
  const hs = (edit: (jwt: SignJWT) => SignJWT) =>
    edit(new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject('user1234567890a').setIssuer(ISSUER).setAudience(AUDIENCE)).sign(key);
  const req = undefined as never;

  test('a future iat and a missing exp are guests; requireExp: false accepts no exp', async () => {
    const identify = jwtAuth({ secret: SECRET, issuer: ISSUER, audience: AUDIENCE });
    expect(await identify(await hs((jwt) => jwt.setIssuedAt().setExpirationTime('5m')), req)).toMatchObject({ id: 'user1234567890a' });
    expect(await identify(await hs((jwt) => jwt.setIssuedAt(now() + 3600).setExpirationTime('2h')), req)).toBeNull();
    expect(await identify(await hs((jwt) => jwt.setIssuedAt()), req)).toBeNull();
    const lenient = jwtAuth({ secret: SECRET, issuer: ISSUER, audience: AUDIENCE, requireExp: false });
    expect(await lenient(await hs((jwt) => jwt.setIssuedAt()), req)).toMatchObject({ id: 'user1234567890a' });
    expect(await lenient(await hs((jwt) => jwt), req)).toMatchObject({ id: 'user1234567890a' });
    expect(await lenient(await hs((jwt) => jwt.setIssuedAt(now() + 3600)), req)).toBeNull();
  });

  test('requireExp and jwks.maxBytes are checked when built', () => {
    const keySet = { jwksUrl: 'https://keys.example.com/jwks.json', issuer: ISSUER, audience: AUDIENCE };
    expect(() => jwtAuth({ secret: SECRET, requireExp: 'no' as never })).toThrow(/requireExp must be true or false/);
    for (const maxBytes of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '1048576' as never]) {
      expect(() => jwtAuth({ ...keySet, jwks: { maxBytes } })).toThrow(/jwks\.maxBytes must be a whole number of bytes/);
    }
    expect(() => jwtAuth({ ...keySet, jwks: { maxBytes: 64 * 1024 } })).not.toThrow();
  });
});
