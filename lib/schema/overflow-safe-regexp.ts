/**
 * A RegExp whose `test` answers false instead of throwing when the engine runs out of stack: a
 * backtracking pattern on a multi-megabyte value can exhaust it inside RegExp.test, and a value
 * no regex can check does not match it, which is a 422, not a 500. Used for field patterns and
 * for the email format (lib/records/validate-record.ts, lib/schema/fields/email.ts).
 */
export class OverflowSafeRegExp extends RegExp {
  override test(value: string): boolean {
    try {
      return super.test(value);
    } catch (err) {
      if (err instanceof RangeError) return false;
      throw err;
    }
  }
}
