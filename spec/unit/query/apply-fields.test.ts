import { describe, expect, test } from '@jest/globals';
import { excerpt, MAX_EXCERPT_STEPS } from '../../../lib/query/apply-fields.js';

/** The definition the scanner must keep: what `:excerpt` did with regular expressions (quadratic on `"<" x n`). */
function excerptByRegex(text: string, option: { max: number; ellipsis: boolean }): string {
  const plain = text.replace(/<[^>]*>/g, ' ').replace(/\s+/g, ' ').trim();
  const chars = Array.from(plain);
  if (chars.length <= option.max) return plain;
  const cut = chars.slice(0, option.max).join('').trimEnd();
  return option.ellipsis ? cut + '...' : cut;
}

describe('excerpt', () => {
  test('matches the tag-stripping definition on 20,000 random short values', () => {
    const alphabet = ['<', '>', ' ', '\n', '\t', 'a', 'b', '\u00a0', '\u3000', '\u2028', '\ufeff', '\u180e', '\u0085', '😀', '\ud800', 'é'];
    let seed = 7;
    const next = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    for (let round = 0; round < 20_000; round++) {
      let text = '';
      for (let i = next(24); i > 0; i--) text += alphabet[next(alphabet.length)];
      const option = { max: 1 + next(8), ellipsis: next(2) === 1 };
      expect([text, option, excerpt(text, option)]).toEqual([text, option, excerptByRegex(text, option)]);
    }
  });

  test.each([
    ['<p>Hello <b>world</b>, this is a long body</p>', 11, true, 'Hello world...'],
    ['a < b and c > d', 20, false, 'a d'],
    ['x < y', 20, false, 'x < y'],
    ['  lead and trail  ', 50, false, 'lead and trail'],
  ])('%j cut to %i', (text, max, ellipsis, expected) => {
    expect(excerpt(text, { max, ellipsis })).toBe(expected);
  });

  test('a tag counts as one step however long, so what follows a huge tag is still read', () => {
    expect(excerpt(`<img src="data:${'A'.repeat(2 * MAX_EXCERPT_STEPS)}">caption`, { max: 20, ellipsis: false })).toBe('caption');
  });

  test('text past MAX_EXCERPT_STEPS steps is not read', () => {
    expect(excerpt(`${' '.repeat(MAX_EXCERPT_STEPS)}late`, { max: 20, ellipsis: false })).toBe('');
    expect(excerpt(`${'<>'.repeat(MAX_EXCERPT_STEPS)}late`, { max: 20, ellipsis: false })).toBe('');
    expect(excerpt(`${' '.repeat(MAX_EXCERPT_STEPS - 1)}late`, { max: 20, ellipsis: false })).toBe('l');
  });
});
