import { IdentityHandoffs, splitIdentity } from '../../../lib/realtime/identity-handoffs.js';

/** Identities forwarded between instances in notification-sized parts (issue 29 finding 12). */
describe('identity hand-offs', () => {
  const big = { id: 'bigbbbbbbbbbbbb', notes: `${'ü'.repeat(7_000)}${'"\\'.repeat(2_000)}${'😀'.repeat(3_000)}`, last: 'Z9' };

  test('every part, wrapped in its message, stays far under the 8,000 bytes of a NOTIFY payload', () => {
    const parts = splitIdentity(big);
    expect(parts.length).toBeGreaterThan(4);
    for (const [i, d] of parts.entries()) {
      const message = JSON.stringify({ t: 'sync', c: 'x'.repeat(255), a: 'a'.repeat(24), r: 'r'.repeat(16), i, n: parts.length, d });
      expect(Buffer.byteLength(message)).toBeLessThan(7_000);
    }
  });

  test('parts in any order give the identity back exactly; a guest is one part', () => {
    const handoffs = new IdentityHandoffs(3_000);
    const parts = splitIdentity(big);
    const order = parts.map((_, i) => i).reverse();
    const results = order.map((i) => handoffs.add('k', i, parts.length, parts[i]));
    expect(results.slice(0, -1).every((r) => r === undefined)).toBe(true);
    expect(results.at(-1)).toEqual({ identity: big });
    expect(handoffs.add('g', 0, 1, splitIdentity(null)[0])).toEqual({ identity: null });
    handoffs.clear();
  });

  test('a repeated part counts once; malformed parts and counts are dropped, never thrown', () => {
    const handoffs = new IdentityHandoffs(3_000);
    const parts = splitIdentity(big);
    expect(handoffs.add('k', 0, parts.length, parts[0])).toBeUndefined();
    expect(handoffs.add('k', 0, parts.length, parts[0])).toBeUndefined();
    // Another count for the same hand-off: dropped.
    expect(handoffs.add('k', 1, parts.length + 1, parts[1])).toBeUndefined();
    for (const [index, count, part] of [
      [-1, 2, 'x'],
      [2, 2, 'x'],
      [0, 0, 'x'],
      [0, 1_000_000, 'x'],
      [0.5, 2, 'x'],
      [0, 1, 42],
      ['0', 1, 'x'],
    ] as const) {
      expect(handoffs.add('m', index, count, part)).toBeUndefined();
    }
    // Parts that decode to something other than an identity.
    expect(handoffs.add('n', 0, 1, Buffer.from('[1,2]').toString('base64'))).toBeUndefined();
    expect(handoffs.add('o', 0, 1, Buffer.from('{"id":5}').toString('base64'))).toBeUndefined();
    expect(handoffs.add('p', 0, 1, '!!not base64 json')).toBeUndefined();
    handoffs.clear();
  });

  test('an incomplete hand-off is dropped after the timeout: its late parts start a new one that never completes', async () => {
    const handoffs = new IdentityHandoffs(50);
    const parts = splitIdentity(big);
    for (let i = 0; i < parts.length - 1; i++) expect(handoffs.add('k', i, parts.length, parts[i])).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(handoffs.add('k', parts.length - 1, parts.length, parts.at(-1))).toBeUndefined();
    handoffs.clear();
  });
});
