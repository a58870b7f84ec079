import { replacePlaceholders } from '../../../../lib/db/realtime/evaluate-conditions.js';

describe('replacePlaceholders (conditions evaluated over arrays of their bindings)', () => {
  test('the k-th placeholder becomes the k-th column, casts kept', () => {
    expect(replacePlaceholders('"r"."owner" = ?::text AND "r"."n" > ?::double precision', ['b.p0', 'b.p1'])).toBe('"r"."owner" = b.p0::text AND "r"."n" > b.p1::double precision');
  });

  test('an escaped question mark in SQL text (the jsonb ? operator) is not a placeholder', () => {
    expect(replacePlaceholders('"r"."data" \\? \'k\' AND "r"."owner" = ?::text', ['b.p0'])).toBe('"r"."data" \\? \'k\' AND "r"."owner" = b.p0::text');
  });

  test('a count that does not match, or an identifier binding ??, is refused', () => {
    expect(replacePlaceholders('"r"."a" = ? AND "r"."b" = ?', ['b.p0'])).toBeUndefined();
    expect(replacePlaceholders('"r"."a" = ?', ['b.p0', 'b.p1'])).toBeUndefined();
    expect(replacePlaceholders('?? = ?', ['b.p0'])).toBeUndefined();
  });
});
