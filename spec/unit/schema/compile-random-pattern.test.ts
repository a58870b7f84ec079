import { describe, expect, test } from '@jest/globals';
import { compileRandomPattern, MAX_GENERATED_LENGTH, MAX_PATTERN_LENGTH, RandomPatternError } from '../../../lib/schema/compile-random-pattern.js';

/** Generates `n` values of `pattern`. */
function sample(pattern: string, n = 200): string[] {
  const compiled = compileRandomPattern(pattern);
  return Array.from({ length: n }, () => compiled.generate());
}

describe('random strings from an autogeneratePattern', () => {
  test.each<[string, RegExp, number]>([
    ['[a-z0-9]{15}', /^[a-z0-9]{15}$/, 15],
    ['post-[0-9]{4}', /^post-[0-9]{4}$/, 9],
    ['(ab|cd)+', /^(ab|cd){1,6}$/, 12],
    ['^[A-Z][a-z]{2,5}$', /^[A-Z][a-z]{2,5}$/, 6],
    ['\\d{3}-\\w{2}', /^[0-9]{3}-[0-9A-Za-z_]{2}$/, 6],
    ['[[:alpha:]]{4}', /^[A-Za-z]{4}$/, 4],
    ['a?b*c+', /^a?b{0,6}c{1,6}$/, 13],
    ['(?P<x>x|y){3}(?:z)', /^[xy]{3}z$/, 4],
    ['.{8}', /^[A-Za-z0-9]{8}$/, 8],
    ['\\x41\\x{42}\\.', /^AB\.$/, 3],
    ['[^a-z]{5}', /^[ -`{-~]{5}$/, 5],
    ['[a-c-]{9}', /^[a-c-]{9}$/, 9],
    ['x{2,}', /^x{2,6}$/, 6],
    ['x{9,}', /^x{9}$/, 9],
    ['a*?b+?', /^a{0,6}b{1,6}$/, 12],
    ['{x', /^\{x$/, 2],
  ])('%s: every value matches, within the bound it states', (pattern, expected, maxLength) => {
    expect(compileRandomPattern(pattern).maxLength).toBe(maxLength);
    for (const value of sample(pattern)) expect(value).toMatch(expected);
  });

  test('values vary: each character of a class and each alternative is drawn', () => {
    const seen = new Set(sample('[a-e]', 400));
    expect([...seen].sort()).toEqual(['a', 'b', 'c', 'd', 'e']);
    const lengths = new Set(sample('x{1,4}', 400).map((v) => v.length));
    expect([...lengths].sort()).toEqual([1, 2, 3, 4]);
    expect(new Set(sample('[a-z0-9]{15}', 50)).size).toBe(50);
  });

  test.each(([
    ['(', /missing \)/],
    ['(a', /missing \)/],
    ['a)', /unexpected "\)" at position 1/],
    ['[a-', /missing \]/],
    ['a**', /quantifier cannot follow another/],
    ['*a', /nothing to repeat at position 0/],
    ['^*', /nothing to repeat/],
    ['(?i)a', /flags and look-around/],
    ['(?=a)', /flags and look-around/],
    ['\\p{L}', /unsupported escape \\p/],
    ['\\', /cannot end with/],
    ['[z-a]', /runs backwards/],
    ['a{5,2}', /runs backwards/],
    ['a{1001}', /count over 1000/],
    ['[[:nope:]]', /unknown class/],
    ['\\x{110000}', /invalid \\x escape/],
    ['(a{1000}){1000}', /up to 1000000 characters, more than 5000/],
    ['a{10}{10}{10}{10}', /more than 5000/],
    ['('.repeat(51) + 'a' + ')'.repeat(51), /nested more than 50 deep/],
    ['a'.repeat(MAX_PATTERN_LENGTH + 1), /longer than 1000 characters/],
  ] as [string, RegExp][]).map(([pattern, message]) => [pattern.length > 40 ? `${pattern.slice(0, 20)}... (${pattern.length} characters)` : pattern, pattern, message] as const))('%s is refused, saying why and where', (_label, pattern, message) => {
    let error: unknown;
    try {
      compileRandomPattern(pattern);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(RandomPatternError);
    expect((error as Error).message).toMatch(message);
  });

  test('what a pattern may produce is bounded when it is compiled, so a write never builds more', () => {
    const largest = '[a-z]{1000}'.repeat(MAX_GENERATED_LENGTH / 1000);
    expect(compileRandomPattern(largest).generate()).toHaveLength(MAX_GENERATED_LENGTH);
    expect(() => compileRandomPattern(`${largest}x`)).toThrow(RandomPatternError);
  });
});
