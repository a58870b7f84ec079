import { describe, expect, test } from '@jest/globals';
import { createHmac } from 'node:crypto';
import { createFileTokens, FILE_TOKEN_CLOCK_SKEW_MS } from '../../../lib/auth/file-token.js';
import type { Identity } from '../../../lib/auth/identity.js';

const SECRET = 'a-test-secret-that-is-long-enough-0123456789';
/** A whole second, so that "exactly ttl later" is exact. */
const NOW = 1_700_000_000_000;
const ALICE: Identity = { id: 'aliceaaaaaaaaaa', name: 'Alice', role: 'editor', teams: ['a', 'b'], profile: { age: 41 } };

function decodePayload(token: string): unknown {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8'));
}

describe('createFileTokens', () => {
  const tokens = createFileTokens({ secret: SECRET });
  /** What a file token stands for: the id (and superuser flag) only, never the rest of the identity. */
  const ALICE_REF: Identity = { id: ALICE.id };

  test('a token carries only the id, the expiry and the scope: nothing else of the identity reaches the URL', () => {
    const token = tokens.sign(ALICE, { now: NOW });
    expect(token).toMatch(/^rbft\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    expect(tokens.verify(token, NOW)).toEqual({ identity: ALICE_REF, scope: 'files' });
    expect(decodePayload(token)).toEqual({ v: 3, exp: NOW / 1000 + 180, sub: ALICE.id, scope: 'files' });
    const text = Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8');
    for (const leaked of ['Alice', 'editor', 'teams', 'profile']) expect(text).not.toContain(leaked);
  });

  test('superuser survives the round trip (rules rely on it), and only when true', () => {
    const root: Identity = { id: 'rootrrrrrrrrrrr', superuser: true, email: 'root@example.com' };
    expect(tokens.verify(tokens.sign(root, { now: NOW }), NOW)?.identity).toEqual({ id: 'rootrrrrrrrrrrr', superuser: true });
    expect(decodePayload(tokens.sign({ id: 'x', superuser: false }, { now: NOW }))).toEqual({ v: 3, exp: NOW / 1000 + 180, sub: 'x', scope: 'files' });
  });

  test('a big identity makes a small token', () => {
    const big: Identity = { id: 'bigbigbigbigbig', bio: 'x'.repeat(100_000) };
    const token = tokens.sign(big, { now: NOW });
    expect(token.length).toBeLessThan(200);
    expect(tokens.verify(token, NOW)?.identity).toEqual({ id: 'bigbigbigbigbig' });
  });

  test('an identity that cannot be serialised still gets a token', () => {
    const cyclic: Identity = { id: 'cyclecyclecycle', superuser: true };
    cyclic.self = cyclic;
    expect(tokens.verify(tokens.sign(cyclic, { now: NOW }), NOW)?.identity).toEqual({ id: 'cyclecyclecycle', superuser: true });
    expect(tokens.verify(tokens.sign({ id: 'bigintbigintbig', n: 1n }, { now: NOW }), NOW)?.identity).toEqual({ id: 'bigintbigintbig' });
  });

  test('a token expires exactly ttl seconds after it was signed', () => {
    const token = tokens.sign(ALICE, { now: NOW });
    expect(tokens.verify(token, NOW + 180_000 - 1)?.identity).toEqual(ALICE_REF);
    expect(tokens.verify(token, NOW + 180_000)).toBeNull();
    expect(tokens.verify(token, NOW + 10 * 365 * 86_400_000)).toBeNull();
  });

  test('a token whose exp lies further ahead than the lifetime (and the clock skew) is refused, whatever its signature', () => {
    // Signed by an instance whose clock runs ahead of ours, within the skew: accepted.
    const ahead = tokens.sign(ALICE, { now: NOW + FILE_TOKEN_CLOCK_SKEW_MS });
    expect(tokens.verify(ahead, NOW)?.identity).toEqual(ALICE_REF);
    // One second more than that: not a token any instance signed for this lifetime.
    expect(tokens.verify(tokens.sign(ALICE, { now: NOW + FILE_TOKEN_CLOCK_SKEW_MS + 1_000 }), NOW)).toBeNull();
    for (const seconds of [180 + 60, 86_400, 10 * 365 * 86_400, 2 ** 40]) {
      expect(tokens.verify(signRaw(JSON.stringify({ v: 3, exp: NOW / 1000 + seconds, sub: ALICE.id, scope: 'all' })), NOW)).toBeNull();
    }
    // The lifetime is this instance's: a longer-lived signer's tokens are refused by a shorter one.
    const long = createFileTokens({ secret: SECRET, ttlSeconds: 3600 });
    expect(tokens.verify(long.sign(ALICE, { now: NOW }), NOW)).toBeNull();
    expect(long.verify(long.sign(ALICE, { now: NOW }), NOW)?.identity).toEqual(ALICE_REF);
  });

  test('the scope: "files" unless asked, "all" when asked, anything else refused when signing', () => {
    expect(tokens.verify(tokens.sign(ALICE, { now: NOW }), NOW)?.scope).toBe('files');
    expect(tokens.verify(tokens.sign(ALICE, { now: NOW, scope: 'all' }), NOW)).toEqual({ identity: ALICE_REF, scope: 'all' });
    expect(tokens.verify(tokens.sign(ALICE, { now: NOW, scope: 'files' }), NOW)?.scope).toBe('files');
    expect(() => tokens.sign(ALICE, { now: NOW, scope: 'backups' as never })).toThrow(TypeError);
  });

  test('a version-2 token (releases before scopes) reads as what it was signed for, "all", and within the lifetime only', () => {
    const legacy = (claims: object) => {
      const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
      return `rbft.${payload}.${createHmac('sha256', SECRET).update('recordbase-file-token:v2:' + payload).digest('base64url')}`;
    };
    expect(tokens.verify(legacy({ v: 2, exp: NOW / 1000 + 180, sub: 'rootrrrrrrrrrrr', su: true }), NOW)).toEqual({ identity: { id: 'rootrrrrrrrrrrr', superuser: true }, scope: 'all' });
    expect(tokens.verify(legacy({ v: 2, exp: NOW / 1000 + 10 * 365 * 86_400, sub: 'rootrrrrrrrrrrr', su: true }), NOW)).toBeNull();
    // Each format's payload under its own MAC context only: a version-3 payload signed as version 2, or the reverse, is nothing.
    expect(tokens.verify(legacy({ v: 3, exp: NOW / 1000 + 180, sub: ALICE.id, scope: 'all' }), NOW)).toBeNull();
    expect(tokens.verify(signRaw(JSON.stringify({ v: 2, exp: NOW / 1000 + 180, sub: ALICE.id })), NOW)).toBeNull();
  });

  test('a token signed mid-second never lives longer than ttl', () => {
    const token = tokens.sign(ALICE, { now: NOW + 999 });
    expect(tokens.verify(token, NOW + 999 + 180_000)).toBeNull();
  });

  test('ttlSeconds is configurable and checked', () => {
    const short = createFileTokens({ secret: SECRET, ttlSeconds: 5 });
    const token = short.sign(ALICE, { now: NOW });
    expect(short.verify(token, NOW + 4_999)?.identity).toEqual(ALICE_REF);
    expect(short.verify(token, NOW + 5_000)).toBeNull();
    for (const ttlSeconds of [0, -1, 1.5, Number.NaN, Infinity]) {
      expect(() => createFileTokens({ secret: SECRET, ttlSeconds })).toThrow(TypeError);
    }
  });

  test('the default clock is used when now is not given', () => {
    const token = tokens.sign(ALICE);
    expect(tokens.verify(token)?.identity).toEqual(ALICE_REF);
  });

  test('a token signed with another secret is refused; a Uint8Array secret equals its string', () => {
    const other = createFileTokens({ secret: 'another-secret-that-is-long-enough-0123456' });
    expect(other.verify(tokens.sign(ALICE, { now: NOW }), NOW)).toBeNull();
    const bytes = createFileTokens({ secret: new TextEncoder().encode(SECRET) });
    expect(bytes.verify(tokens.sign(ALICE, { now: NOW }), NOW)?.identity).toEqual(ALICE_REF);
  });

  test('an empty or missing secret is refused', () => {
    expect(() => createFileTokens({ secret: '' })).toThrow(TypeError);
    expect(() => createFileTokens({ secret: new Uint8Array(0) })).toThrow(TypeError);
    expect(() => createFileTokens({} as never)).toThrow(TypeError);
  });

  test('a tampered payload is refused, even with a valid-looking identity', () => {
    const token = tokens.sign(ALICE, { now: NOW });
    const [, , signature] = token.split('.');
    const forged = Buffer.from(JSON.stringify({ v: 3, exp: NOW / 1000 + 180, sub: 'rootrrrrrrrrrrr', su: true, scope: 'all' })).toString('base64url');
    expect(tokens.verify(`rbft.${forged}.${signature}`, NOW)).toBeNull();
    const wider = Buffer.from(JSON.stringify({ v: 3, exp: NOW / 1000 + 180, sub: ALICE.id, scope: 'all' })).toString('base64url');
    expect(tokens.verify(`rbft.${wider}.${signature}`, NOW)).toBeNull();
  });

  test('a tampered signature is refused, character by character', () => {
    const token = tokens.sign(ALICE, { now: NOW });
    const signatureStart = token.lastIndexOf('.') + 1;
    for (let i = signatureStart; i < token.length; i++) {
      const flipped = token[i] === 'A' ? 'B' : 'A';
      expect(tokens.verify(token.slice(0, i) + flipped + token.slice(i + 1), NOW)).toBeNull();
    }
    expect(tokens.verify(token.slice(0, -1), NOW)).toBeNull();
    expect(tokens.verify(token + 'A', NOW)).toBeNull();
  });

  test('a payload signed with the right secret but without our context string is refused', () => {
    // A MAC over the bare payload (what a naive implementation or another feature would sign).
    const payload = Buffer.from(JSON.stringify({ v: 3, exp: NOW / 1000 + 180, sub: ALICE.id, scope: 'all' })).toString('base64url');
    const bare = createHmac('sha256', SECRET).update(payload).digest('base64url');
    expect(tokens.verify(`rbft.${payload}.${bare}`, NOW)).toBeNull();
  });

  test('a first-version token (identity embedded) signed with the same secret is refused', () => {
    const payload = Buffer.from(JSON.stringify({ v: 1, exp: NOW / 1000 + 180, identity: ALICE })).toString('base64url');
    const old = createHmac('sha256', SECRET).update('recordbase-file-token:v1:' + payload).digest('base64url');
    expect(tokens.verify(`rbft.${payload}.${old}`, NOW)).toBeNull();
  });

  /** Signs an arbitrary payload string the way `sign` does, to reach the checks after the MAC. */
  function signRaw(json: string): string {
    const payload = Buffer.from(json, 'utf8').toString('base64url');
    // Recover the MAC scheme from a real token: same secret, same context, different payload.
    const reference = tokens.sign(ALICE, { now: NOW });
    const referencePayload = reference.split('.')[1]!;
    const context = 'recordbase-file-token:v3:';
    expect(createHmac('sha256', SECRET).update(context + referencePayload).digest('base64url')).toBe(reference.split('.')[2]);
    return `rbft.${payload}.${createHmac('sha256', SECRET).update(context + payload).digest('base64url')}`;
  }

  const exp = NOW / 1000 + 180;
  test.each([
    ['empty', ''],
    ['prefix only', 'rbft.'],
    ['two short parts', 'rbft.a.b'],
    ['too many parts', 'rbft.a.b.c'],
    ['no prefix', 'eyJ2IjoxfQ.abc'],
    ['another prefix', 'rbxx.abc.def'],
    ['100 KB string', 'rbft.' + 'A'.repeat(100_000) + '.B'],
    ['non-base64 payload', 'rbft.@@@@.' + 'A'.repeat(43)],
    ['padding', 'rbft.eyJ2IjoxfQ==.' + 'A'.repeat(43)],
    ['whitespace', 'rbft. eyJ2IjoxfQ.' + 'A'.repeat(43)],
    ['a JWT', 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl'],
  ])('malformed token (%s) is null', (_label, token) => {
    expect(tokens.verify(token, NOW)).toBeNull();
    expect(tokens.isFileToken(token)).toBe(token.startsWith('rbft.'));
  });

  test.each([
    ['not JSON', 'not json'],
    ['JSON array payload', '[1,2]'],
    ['JSON null payload', 'null'],
    ['wrong version', JSON.stringify({ v: 1, exp, sub: ALICE.id, scope: 'all' })],
    ['missing exp', JSON.stringify({ v: 3, sub: ALICE.id, scope: 'all' })],
    ['string exp', JSON.stringify({ v: 3, exp: String(exp), sub: ALICE.id, scope: 'all' })],
    ['fractional exp', JSON.stringify({ v: 3, exp: exp + 0.5, sub: ALICE.id, scope: 'all' })],
    ['missing sub', JSON.stringify({ v: 3, exp, scope: 'all' })],
    ['empty sub', JSON.stringify({ v: 3, exp, sub: '', scope: 'all' })],
    ['numeric sub', JSON.stringify({ v: 3, exp, sub: 42, scope: 'all' })],
    ['object sub', JSON.stringify({ v: 3, exp, sub: { id: ALICE.id }, scope: 'all' })],
    ['missing scope', JSON.stringify({ v: 3, exp, sub: ALICE.id })],
    ['unknown scope', JSON.stringify({ v: 3, exp, sub: ALICE.id, scope: 'backups' })],
    ['scope list', JSON.stringify({ v: 3, exp, sub: ALICE.id, scope: ['files', 'all'] })],
  ])('a correctly signed but invalid payload (%s) is null', (_label, json) => {
    expect(tokens.verify(signRaw(json), NOW)).toBeNull();
  });

  test('a superuser flag other than true is no superuser', () => {
    expect(tokens.verify(signRaw(JSON.stringify({ v: 3, exp, sub: 'x', su: 'true', scope: 'all' })), NOW)?.identity).toEqual({ id: 'x' });
  });

  test('verify never throws, whatever it is given', () => {
    for (const value of [undefined, null, 42, {}, [], Symbol('x'), 'rbft.' + '\u0000'.repeat(10), '\ud800']) {
      expect(tokens.verify(value as never, NOW)).toBeNull();
    }
    expect(tokens.verify(tokens.sign(ALICE, { now: NOW }), Number.NaN)).toBeNull();
  });

  test('isFileToken tells file tokens from other tokens', () => {
    expect(tokens.isFileToken(tokens.sign(ALICE, { now: NOW }))).toBe(true);
    expect(tokens.isFileToken('token-alice')).toBe(false);
    expect(tokens.isFileToken('eyJhbGciOiJIUzI1NiJ9.e30.x')).toBe(false);
    expect(tokens.isFileToken(undefined as never)).toBe(false);
  });

  test('sign refuses an identity without a usable string id', () => {
    expect(() => tokens.sign({ id: '' }, { now: NOW })).toThrow(TypeError);
    expect(() => tokens.sign({ id: 42 } as never, { now: NOW })).toThrow(TypeError);
    expect(() => tokens.sign(null as never, { now: NOW })).toThrow(TypeError);
    expect(() => tokens.sign({ id: 'x'.repeat(1025) }, { now: NOW })).toThrow(TypeError);
  });
});
