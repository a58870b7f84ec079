import { ReadFences } from '../../../../lib/db/replica/read-fences.js';
import { parseWalPosition } from '../../../../lib/db/replica/wal-position.js';

describe('parseWalPosition', () => {
  test.each([
    ['0/0', 0n],
    ['0/16B3748', 0x16b3748n],
    ['16/B374D848', (0x16n << 32n) | 0xb374d848n],
    [null, undefined],
    ['16-B3', undefined],
  ])('%s', (text, expected) => expect(parseWalPosition(text)).toBe(expected));

  test('orders positions across the high word', () => expect(parseWalPosition('1/0')! > parseWalPosition('0/FFFFFFFF')!).toBe(true));
});

describe('ReadFences', () => {
  test("a caller's pending fence becomes the next primary sample after its write, and passes once that is replayed", () => {
    const fences = new ReadFences(10);
    fences.notePending('alice', 100);
    expect(fences.passed(['alice'], 10_000n)).toBe(false); // pending: no position yet
    fences.resolvePending(90, 500n); // a sample sent before the write: not it
    expect(fences.passed(['alice'], 10_000n)).toBe(false);
    fences.resolvePending(110, 700n);
    expect(fences.passed(['alice'], 699n)).toBe(false);
    expect(fences.passed(['alice'], 700n)).toBe(true);
    expect(fences.passed(['bob'], 0n)).toBe(true); // another caller is not pinned
    fences.prune(700n);
    expect(fences.size).toBe(0);
  });

  test('the floor (listening restarted) holds every caller until the position sampled after it is replayed', () => {
    const fences = new ReadFences(10);
    fences.raiseFloorPending(50);
    expect(fences.passed([], 1_000n)).toBe(false);
    fences.resolvePending(60, 300n);
    expect(fences.passed(['anyone'], 299n)).toBe(false);
    expect(fences.passed(['anyone'], 300n)).toBe(true);
  });

  test('past its capacity the oldest fence is dropped into the floor: no caller loses its write, the map stays bounded', () => {
    const fences = new ReadFences(2);
    fences.notePending('a', 1);
    fences.resolvePending(2, 100n);
    fences.notePending('b', 3);
    fences.notePending('c', 4); // drops a (100) into the floor
    expect(fences.size).toBe(2);
    fences.resolvePending(5, 200n);
    expect(fences.passed(['a'], 99n)).toBe(false); // a's write still holds, through the floor
    expect(fences.passed(['d'], 99n)).toBe(false); // everyone waits for the floor
    expect(fences.passed(['d'], 100n)).toBe(true);
    expect(fences.passed(['b'], 150n)).toBe(false);
    expect(fences.passed(['b'], 200n)).toBe(true);
  });

  test('one caller writing again and again keeps one fence', () => {
    const fences = new ReadFences(2);
    for (let at = 0; at < 100; at++) fences.notePending('flood', at);
    expect(fences.size).toBe(1);
    expect(fences.passed(['quiet'], 0n)).toBe(true);
  });
});
