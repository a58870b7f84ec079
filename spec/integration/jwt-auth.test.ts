import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { exportJWK, exportSPKI, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from 'jose';
import PocketBase from 'pocketbase';
import { createAppServer, type CollectionDefinition } from '../../lib/index.js';
import { jwtAuth } from '../../lib/auth/jwt-auth.js';
import type { AuthFunction } from '../../lib/auth/identity.js';
import { createAuthExample, MOUNT } from '../../examples/auth/app.js';
import { createMemoryLogger, startTestApp, type TestApp } from '../support/test-app.js';
import { openTestDatabase, testEngines, type TestDatabase } from '../support/test-database.js';

const ISSUER = 'https://issuer.test/';
const AUDIENCE = 'recordbase-tests';
const SECRET = 'a-shared-secret-of-at-least-32-bytes!';

const notes: CollectionDefinition[] = [
  { name: 'notes', fields: [{ name: 'text', type: 'text' }], rules: { list: '@request.auth.id != ""', view: '@request.auth.id != ""', create: null, update: null, delete: null } },
];

interface SigningKey {
  kid: string;
  alg: 'RS256' | 'ES256';
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  jwk: JWK;
}

async function makeKey(kid: string, alg: 'RS256' | 'ES256'): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { kid, alg, privateKey, publicKey, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } };
}

/** A key set served on loopback; `keys` can be swapped (rotation) and fetches are counted. */
async function startJwksServer() {
  const state = { keys: [] as JWK[], fetches: 0 };
  const server: Server = createServer((_req, res) => {
    state.fetches += 1;
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ keys: state.keys }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/jwks.json`;
  return { state, url, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

function sign(key: SigningKey, claims: JWTPayload = {}, edit: (jwt: SignJWT) => SignJWT = (jwt) => jwt): Promise<string> {
  const jwt = new SignJWT({ ...claims }).setProtectedHeader({ alg: key.alg, kid: key.kid }).setSubject('user1234567890a').setIssuer(ISSUER).setAudience(AUDIENCE).setIssuedAt().setExpirationTime('5m');
  return edit(jwt).sign(key.privateKey);
}

const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
const now = () => Math.floor(Date.now() / 1000);

describe.each(testEngines())('jwtAuth (%s)', (engine) => {
  let jwks: Awaited<ReturnType<typeof startJwksServer>>;
  let rsa: SigningKey;
  let ec: SigningKey;
  let app: TestApp;
  let auth: AuthFunction;

  beforeAll(async () => {
    [rsa, ec] = await Promise.all([makeKey('rsa-1', 'RS256'), makeKey('ec-1', 'ES256')]);
    jwks = await startJwksServer();
    jwks.state.keys = [rsa.jwk, ec.jwk];
    // No cooldown, so that the rotation test need not wait 30 s for a refetch.
    auth = jwtAuth({ jwksUrl: jwks.url, issuer: ISSUER, audience: AUDIENCE, jwks: { cooldownMs: 0 } });
    app = await startTestApp(engine, { collections: notes, auth });
    await app.router.api.collection('notes').create({ text: 'members only' }, { as: 'superuser' });
  }, 60_000);

  afterAll(async () => {
    await app?.close();
    await jwks?.close();
  });

  /** How many notes the caller sees over HTTP: 1 signed in, 0 as a guest. */
  async function visibleNotes(token?: string): Promise<number> {
    const request = app.http.get('/backend/api/collections/notes/records');
    const res = token === undefined ? await request : await request.set('Authorization', `Bearer ${token}`);
    expect(res.status).toBe(200);
    return res.body.totalItems;
  }

  test('valid RS256 and ES256 tokens sign the caller in; no token is a guest', async () => {
    expect(await visibleNotes()).toBe(0);
    expect(await visibleNotes(await sign(rsa))).toBe(1);
    expect(await visibleNotes(await sign(ec))).toBe(1);
  });

  test('the key set is cached, and fetched again for a new kid after the provider rotates its keys', async () => {
    await visibleNotes(await sign(rsa));
    const before = jwks.state.fetches;
    expect(await visibleNotes(await sign(ec))).toBe(1);
    expect(jwks.state.fetches).toBe(before); // a known kid: from the cache

    const rotated = await makeKey('rsa-2', 'RS256');
    jwks.state.keys = [rotated.jwk, ec.jwk];
    expect(await visibleNotes(await sign(rotated))).toBe(1);
    expect(jwks.state.fetches).toBe(before + 1);
    // The retired key is gone from the new set: its tokens no longer sign in.
    expect(await visibleNotes(await sign(rsa))).toBe(0);
    jwks.state.keys = [rsa.jwk, rotated.jwk, ec.jwk];
  });

  test('expired tokens, past the clock tolerance, are guests; within it they pass', async () => {
    expect(await visibleNotes(await sign(rsa, {}, (jwt) => jwt.setIssuedAt(now() - 120).setExpirationTime(now() - 60)))).toBe(0);
    expect(await visibleNotes(await sign(rsa, {}, (jwt) => jwt.setIssuedAt(now() - 120).setExpirationTime(now() - 1)))).toBe(1);
    expect(await visibleNotes(await sign(rsa, {}, (jwt) => jwt.setNotBefore(now() + 60)))).toBe(0);
  });

  test('a wrong audience, a wrong issuer or no subject is a guest', async () => {
    expect(await visibleNotes(await sign(rsa, {}, (jwt) => jwt.setAudience('another-app')))).toBe(0);
    expect(await visibleNotes(await sign(rsa, {}, (jwt) => jwt.setIssuer('https://evil.test/')))).toBe(0);
    const noSubject = await new SignJWT({}).setProtectedHeader({ alg: 'RS256', kid: 'rsa-1' }).setIssuer(ISSUER).setAudience(AUDIENCE).setExpirationTime('5m').sign(rsa.privateKey);
    expect(await visibleNotes(noSubject)).toBe(0);
  });

  test('alg none, a tampered payload and HS256 signed with the RSA public key are refused', async () => {
    const claims = { sub: 'attacker', iss: ISSUER, aud: AUDIENCE, exp: now() + 300 };
    expect(await visibleNotes(`${base64url({ alg: 'none', typ: 'JWT' })}.${base64url(claims)}.`)).toBe(0);

    const [header, , signature] = (await sign(rsa)).split('.');
    expect(await visibleNotes(`${header}.${base64url(claims)}.${signature}`)).toBe(0);

    // The classic confusion: the verifier's public key, as a verifier that trusts the header would use it as an HMAC secret.
    for (const secret of [await exportSPKI(rsa.publicKey), JSON.stringify(rsa.jwk)]) {
      const forged = await new SignJWT({}).setProtectedHeader({ alg: 'HS256', kid: 'rsa-1' }).setSubject('attacker').setIssuer(ISSUER).setAudience(AUDIENCE).setExpirationTime('5m').sign(new TextEncoder().encode(secret));
      expect(await visibleNotes(forged)).toBe(0);
      expect(await auth(forged, undefined as never)).toBeNull();
    }
    expect(await visibleNotes('not-a-jwt')).toBe(0);
  });

  test("the SDK's authStore takes the JWT: valid before expiry, the requests signed in; invalid once expired", async () => {
    const pb = new PocketBase(`${app.baseUrl}/backend`);
    pb.authStore.save(await sign(ec));
    expect(pb.authStore.isValid).toBe(true);
    expect((await pb.collection('notes').getList(1, 10)).totalItems).toBe(1);
    pb.authStore.save(await sign(ec, {}, (jwt) => jwt.setExpirationTime(now() - 60)));
    expect(pb.authStore.isValid).toBe(false);
  });

  test('a key set that cannot be fetched answers 401 and is logged, not a silent guest', async () => {
    const down = await startJwksServer();
    await down.close();
    const logger = createMemoryLogger();
    const offline = await startTestApp(engine, { collections: notes, logger, auth: jwtAuth({ jwksUrl: down.url, issuer: ISSUER, audience: AUDIENCE }) });
    try {
      const res = await offline.http.get('/backend/api/collections/notes/records').set('Authorization', `Bearer ${await sign(rsa)}`);
      expect(res.status).toBe(401);
      expect(JSON.stringify(res.body)).not.toMatch(/127\.0\.0\.1/);
      expect(logger.lines.join('\n')).toMatch(/auth\(\) failed/);
    } finally {
      await offline.close();
    }
  }, 30_000);
});

describe('jwtAuth with a secret, claims and options', () => {
  const identify = jwtAuth({ secret: SECRET, issuer: ISSUER, audience: AUDIENCE, superuserClaim: 'role', superuserValue: 'admin' });
  const hs = (claims: JWTPayload, secret = SECRET) =>
    new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setSubject('user1234567890a').setIssuer(ISSUER).setAudience(AUDIENCE).setExpirationTime('5m').sign(new TextEncoder().encode(secret));
  const req = undefined as never;

  test('HS256 with the secret is accepted, with sub as id and the claims readable; another secret is not', async () => {
    expect(await identify(await hs({ email: 'a@b.test' }), req)).toMatchObject({ id: 'user1234567890a', email: 'a@b.test', superuser: false });
    expect(await identify(await hs({}, 'another-secret-of-at-least-32-bytes!!'), req)).toBeNull();
  });

  test('superuser comes from the configured claim only (a value, or an array holding it), never from a claim named superuser or id', async () => {
    expect(await identify(await hs({ role: 'admin' }), req)).toMatchObject({ superuser: true });
    expect(await identify(await hs({ role: ['editor', 'admin'] }), req)).toMatchObject({ superuser: true });
    expect(await identify(await hs({ role: 'editor', superuser: true, id: 'someone-else' }), req)).toMatchObject({ id: 'user1234567890a', superuser: false });
  });

  test('an asymmetric token is refused in secret mode', async () => {
    const key = await makeKey('rsa-x', 'RS256');
    const token = await new SignJWT({}).setProtectedHeader({ alg: 'RS256' }).setSubject('x').setIssuer(ISSUER).setAudience(AUDIENCE).setExpirationTime('5m').sign(key.privateKey);
    expect(await identify(token, req)).toBeNull();
  });

  test('map replaces the default mapping', async () => {
    const mapped = jwtAuth({ secret: SECRET }, (claims) => (claims.org === 'acme' ? { id: String(claims.sub), org: 'acme' } : null));
    expect(await mapped(await hs({ org: 'acme' }), req)).toEqual({ id: 'user1234567890a', org: 'acme' });
    expect(await mapped(await hs({ org: 'other' }), req)).toBeNull();
  });

  test('unsafe or incomplete options are refused when built', () => {
    expect(() => jwtAuth({ secret: 'short' })).toThrow(/at least 32 bytes/);
    expect(() => jwtAuth({ jwksUrl: 'http://keys.example.com/jwks.json', issuer: ISSUER, audience: AUDIENCE })).toThrow(/https:/);
    expect(() => jwtAuth({ jwksUrl: 'not a url', issuer: ISSUER, audience: AUDIENCE })).toThrow(/absolute URL/);
    expect(() => jwtAuth({ jwksUrl: 'https://keys.example.com/jwks.json', audience: AUDIENCE } as never)).toThrow(/issuer is required/);
    expect(() => jwtAuth({ jwksUrl: 'https://keys.example.com/jwks.json', issuer: ISSUER } as never)).toThrow(/audience is required/);
    expect(() => jwtAuth({ secret: SECRET, jwksUrl: 'https://keys.example.com/jwks.json' } as never)).toThrow(/not both/);
    expect(() => jwtAuth({ secret: SECRET, clockTolerance: 3600 })).toThrow(/clockTolerance/);
  });
});

describe.each(testEngines())('the auth example: sign-up and sign-in with hashed passwords (%s)', (engine) => {
  let database: TestDatabase;
  let dataDir: string;
  let server: ReturnType<typeof createAppServer>;
  let close: () => Promise<void>;
  let base: string;

  beforeAll(async () => {
    database = await openTestDatabase(engine);
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'rb-auth-example-'));
    const { app, records } = createAuthExample({ database: database.db, secret: SECRET, dataDir, logger: createMemoryLogger() });
    await records.ready;
    server = createAppServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    close = async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await records.close();
    };
  }, 60_000);

  afterAll(async () => {
    await close?.();
    await database?.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const post = async (route: string, body: unknown) => {
    const res = await fetch(`${base}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const text = await res.text();
    if (!res.headers.get('content-type')?.includes('json')) throw new Error(`${route}: ${res.status} ${text}`);
    return { status: res.status, body: JSON.parse(text) as Record<string, any> };
  };

  test('sign up, sign in, and use the token through the SDK; the hash is never shown', async () => {
    const signup = await post('/signup', { email: 'Ada@Example.test', password: 'correct horse', name: 'Ada' });
    expect(signup.status).toBe(201);
    expect(signup.body.record).toMatchObject({ email: 'ada@example.test', name: 'Ada' });
    expect(signup.body.record).not.toHaveProperty('passwordHash');

    const signin = await post('/signin', { email: 'ada@example.test', password: 'correct horse' });
    expect(signin.status).toBe(200);
    expect(JSON.stringify(signin.body)).not.toMatch(/scrypt/);

    const pb = new PocketBase(`${base}${MOUNT}`);
    pb.authStore.save(signin.body.token, signin.body.record);
    expect(pb.authStore.isValid).toBe(true);
    const me = signin.body.record.id as string;
    await pb.collection('notes').create({ text: 'mine', owner: me });
    expect((await pb.collection('notes').getFullList()).map((n) => n.text)).toEqual(['mine']);
    expect(await pb.collection('users').getOne(me)).not.toHaveProperty('passwordHash');
    // Hidden: not filterable by the user either (a probe of the hash would be an oracle).
    await expect(pb.collection('users').getList(1, 1, { filter: 'passwordHash ~ "scrypt"' })).rejects.toMatchObject({ status: 400 });

    // Another user sees none of it; a guest neither.
    const eve = await post('/signup', { email: 'eve@example.test', password: 'eve password' });
    const pbEve = new PocketBase(`${base}${MOUNT}`);
    pbEve.authStore.save(eve.body.token, eve.body.record);
    expect(await pbEve.collection('notes').getFullList()).toEqual([]);
    expect(await pbEve.collection('users').getFullList()).toHaveLength(1);
    await expect(pbEve.collection('notes').create({ text: 'planted', owner: me })).rejects.toMatchObject({ status: 403 });
    expect(await new PocketBase(`${base}${MOUNT}`).collection('notes').getFullList()).toEqual([]);
  });

  test('wrong passwords, unknown e-mails, filter text in the e-mail and a taken e-mail are refused', async () => {
    await post('/signup', { email: 'bob@example.test', password: 'bob password' });
    expect((await post('/signin', { email: 'bob@example.test', password: 'wrong password' })).status).toBe(400);
    expect((await post('/signin', { email: 'nobody@example.test', password: 'bob password' })).status).toBe(400);
    expect((await post('/signin', { email: '" || id != "', password: 'bob password' })).status).toBe(400);
    expect((await post('/signin', { email: 'bob@example.test', password: 'x'.repeat(300) })).status).toBe(400);
    expect((await post('/signin', { email: 'bob@example.test', password: 'x'.repeat(10_000) })).status).toBe(413);
    expect((await post('/signin', { email: ['bob@example.test'], password: 'bob password' })).status).toBe(400);
    const taken = await post('/signup', { email: 'bob@example.test', password: 'another password' });
    expect(taken.status).toBe(422);
    expect(taken.body.data).toHaveProperty('email');
    expect((await post('/signup', { email: 'not an email', password: 'long enough' })).status).toBe(422);
  });
});
