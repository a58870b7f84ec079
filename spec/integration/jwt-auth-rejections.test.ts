import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import PocketBase from 'pocketbase';
import type { CollectionDefinition } from '../../lib/index.js';
import { jwtAuth, type JwtRejectReason } from '../../lib/auth/jwt-auth.js';
import type { Logger } from '../../lib/logger.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

const ISSUER = 'https://issuer.test/';
const AUDIENCE = 'recordbase-tests';
/** In every token (a claim, the subject, a chosen audience or issuer, a key id): it must never reach a log line. */
const MARKER = 'zq7MARKERxv3';

const notes: CollectionDefinition[] = [
  { name: 'notes', fields: [{ name: 'text', type: 'text' }], rules: { list: '@request.auth.id != ""', view: null, create: null, update: null, delete: null } },
];

/** A logger keeping everything it is given, details included, as text. */
function createCapturingLogger(): Logger & { lines: string[] } {
  const lines: string[] = [];
  const log = (message: string, ...details: unknown[]) => void lines.push([message, ...details.map((d) => (d instanceof Error ? `${d.message} ${d.stack}` : JSON.stringify(d)))].join(' '));
  return { lines, error: log, warn: log, info: log };
}

const now = () => Math.floor(Date.now() / 1000);

describe.each(testEngines())('jwtAuth says why it refused a token, once per reason, never what the token holds (%s)', (engine) => {
  let privateKey: CryptoKey;
  let otherKey: CryptoKey;
  let jwksServer: Server;
  let app: TestApp;
  const logger = createCapturingLogger();

  beforeAll(async () => {
    const pair = await generateKeyPair('RS256', { extractable: true });
    privateKey = pair.privateKey;
    otherKey = (await generateKeyPair('RS256')).privateKey;
    const jwk: JWK = { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
    jwksServer = createServer((_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((resolve) => jwksServer.listen(0, '127.0.0.1', resolve));
    const jwksUrl = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}/jwks.json`;
    app = await startTestApp(engine, { collections: notes, logger, auth: jwtAuth({ jwksUrl, issuer: ISSUER, audience: AUDIENCE, jwks: { cooldownMs: 0 } }) });
  }, 60_000);

  afterAll(async () => {
    await app?.close();
    await new Promise<void>((resolve) => (jwksServer ? jwksServer.close(() => resolve()) : resolve()));
  });

  /** A token with the marker in a claim and the subject; `edit` breaks it one way. */
  function sign(edit: (jwt: SignJWT) => SignJWT = (jwt) => jwt, options: { key?: CryptoKey; kid?: string } = {}): Promise<string> {
    const jwt = new SignJWT({ note: `${MARKER}-claim` })
      .setProtectedHeader({ alg: 'RS256', kid: options.kid ?? 'k1' })
      .setSubject(`user-${MARKER}`)
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setIssuedAt()
      .setExpirationTime('5m');
    return edit(jwt).sign(options.key ?? privateKey);
  }

  async function visibleNotes(token: string): Promise<number> {
    const res = await app.http.get('/backend/api/collections/notes/records').set('Authorization', `Bearer ${token}`);
    expect(res.status).toBe(200);
    return res.body.totalItems;
  }

  test('each reason is logged once at info, however many tokens fail so; a good token logs nothing', async () => {
    await app.router.api.collection('notes').create({ text: 'members only' }, { as: 'superuser' });
    const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const noExp = new SignJWT({ note: MARKER }).setProtectedHeader({ alg: 'RS256', kid: 'k1' }).setSubject(`user-${MARKER}`).setIssuer(ISSUER).setAudience(AUDIENCE).sign(privateKey);
    const noSub = new SignJWT({ note: MARKER }).setProtectedHeader({ alg: 'RS256', kid: 'k1' }).setIssuer(ISSUER).setAudience(AUDIENCE).setExpirationTime('5m').sign(privateKey);
    const hs256 = new SignJWT({ note: MARKER }).setProtectedHeader({ alg: 'HS256', kid: 'k1' }).setSubject(`user-${MARKER}`).setIssuer(ISSUER).setAudience(AUDIENCE).setExpirationTime('5m').sign(new TextEncoder().encode(`${MARKER}-secret-of-at-least-32-bytes!!`));
    const cases: [JwtRejectReason, () => Promise<string>][] = [
      ['wrong audience', () => sign((jwt) => jwt.setAudience(`aud-${MARKER}`))],
      ['wrong issuer', () => sign((jwt) => jwt.setIssuer(`https://${MARKER}.evil/`))],
      ['expired', () => sign((jwt) => jwt.setIssuedAt(now() - 600).setExpirationTime(now() - 300))],
      ['not yet valid', () => sign((jwt) => jwt.setNotBefore(now() + 600))],
      ['issued in the future', () => sign((jwt) => jwt.setIssuedAt(now() + 600).setExpirationTime(now() + 900))],
      ['bad signature', () => sign(undefined, { key: otherKey })],
      ['unknown key', () => sign(undefined, { kid: `kid-${MARKER}` })],
      ['algorithm not allowed', () => hs256],
      ['no expiry', () => noExp],
      ['no subject', () => noSub],
      ['malformed', async () => `${MARKER}.${b64({ sub: MARKER })}.${MARKER}`],
    ];
    const tokens: string[] = [];
    for (const [, make] of cases) {
      for (let i = 0; i < 3; i++) {
        const token = await make();
        tokens.push(token);
        expect(await visibleNotes(token)).toBe(0);
      }
    }
    expect(await visibleNotes(`not-a-jwt-${MARKER}`)).toBe(0);
    expect(await visibleNotes(await sign())).toBe(1);

    const refusals = logger.lines.filter((line) => line.startsWith('jwtAuth refused a token'));
    for (const [reason] of cases) {
      const lines = refusals.filter((line) => line.includes(`guest: ${reason};`) || line.includes(`guest: ${reason} (`));
      expect({ reason, lines: lines.length }).toEqual({ reason, lines: 1 });
    }
    expect(refusals).toHaveLength(cases.length);
    expect(refusals.find((line) => line.includes('wrong audience'))).toContain(JSON.stringify(AUDIENCE));
    expect(refusals.find((line) => line.includes('wrong issuer'))).toContain(JSON.stringify(ISSUER));
    const everything = logger.lines.join('\n');
    expect(everything).not.toContain(MARKER);
    for (const token of tokens) {
      for (const part of token.split('.').filter((p) => p.length > 8)) expect(everything).not.toContain(part);
    }
  }, 60_000);

  test('through the SDK: a refused token is a guest, and a flood of them adds no line', async () => {
    const before = logger.lines.length;
    const pb = new PocketBase(`${app.baseUrl}/backend`);
    for (let i = 0; i < 20; i++) {
      pb.authStore.save(await sign((jwt) => jwt.setAudience(`aud-${MARKER}-${i}`)));
      expect((await pb.collection('notes').getList(1, 10)).totalItems).toBe(0);
    }
    expect(logger.lines.slice(before).filter((line) => line.includes('jwtAuth'))).toEqual([]);
  }, 30_000);
});

describe('jwtAuth called outside a router', () => {
  test('logs nothing and answers null, as before', async () => {
    const auth = jwtAuth({ secret: 'a-shared-secret-of-at-least-32-bytes!', audience: AUDIENCE });
    const token = await new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject('x').setAudience('other').setExpirationTime('5m').sign(new TextEncoder().encode('a-shared-secret-of-at-least-32-bytes!'));
    expect(await auth(token, undefined as never)).toBeNull();
  });
});
