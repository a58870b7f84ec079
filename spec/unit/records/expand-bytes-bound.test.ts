import { jsonBytesAtMost } from '../../../lib/records/expand-records.js';

const exact = (value: unknown) => Buffer.byteLength(JSON.stringify(value), 'utf8');

/** Characters whose JSON is longest per UTF-16 unit: escapes, controls, lone surrogates, 3-byte and 4-byte UTF-8. */
const CHARS = ['a', '"', '\\', '\n', '\u0001', '\u001f', '\u00e9', '\u20ac', '\ud83d\ude00', '\ud800', '\udfff', '\u2028'];

function randomString(): string {
  let text = '';
  for (let i = Math.floor(Math.random() * 12); i > 0; i--) text += CHARS[Math.floor(Math.random() * CHARS.length)];
  return text;
}

function randomValue(depth: number): unknown {
  const pick = Math.floor(Math.random() * (depth > 3 ? 5 : 8));
  switch (pick) {
    case 0:
      return randomString();
    case 1:
      return [0, -0.0000012345678901234567, -1.7976931348623157e308, 5e-324, NaN, Infinity, 123456789012345680000][Math.floor(Math.random() * 7)];
    case 2:
      return Math.random() < 0.5;
    case 3:
      return null;
    case 4:
      return undefined;
    case 5:
      return Array.from({ length: Math.floor(Math.random() * 4) }, () => randomValue(depth + 1));
    case 6:
      return new Date(Math.floor(Math.random() * 2 ** 40));
    default:
      return Object.fromEntries(Array.from({ length: Math.floor(Math.random() * 5) }, () => [randomString(), randomValue(depth + 1)]));
  }
}

describe('jsonBytesAtMost (the expansion budget counts by it until it may be over the limit)', () => {
  test('is never below the exact size of the compact JSON, on the worst characters and 20,000 random records', () => {
    for (const char of CHARS) expect(jsonBytesAtMost(char.repeat(7))).toBeGreaterThanOrEqual(exact(char.repeat(7)));
    for (let i = 0; i < 20_000; i++) {
      const record = { id: randomString(), value: randomValue(0), list: [randomValue(0), undefined, () => 1], nested: { deep: randomValue(0) } };
      const bound = jsonBytesAtMost(record);
      if (bound < exact(record)) expect({ record, bound }).toEqual({ record, bound: exact(record) });
    }
  });

  test('is exact for values it cannot bound: a toJSON, and values deeper than 32 levels', () => {
    const date = new Date(0);
    expect(jsonBytesAtMost(date)).toBe(exact(date));
    let deep: unknown = 'x';
    for (let i = 0; i < 40; i++) deep = [deep];
    expect(jsonBytesAtMost(deep)).toBeGreaterThanOrEqual(exact(deep));
  });
});
