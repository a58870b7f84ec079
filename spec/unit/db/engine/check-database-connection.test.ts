import { refusalOfServer } from '../../../../lib/db/engine/check-database-connection.js';

/**
 * The start-up decision on the server behind `database` (issue 43, part A, step 5). The standby
 * case also runs against a real hot standby (spec/integration/database-server-check.test.ts);
 * Citus cannot be installed here, so its case is decided on the facts alone.
 */
describe('refusalOfServer', () => {
  test('a primary without Citus is accepted', () => {
    expect(refusalOfServer({ standby: false, citus: false })).toBeUndefined();
  });

  test('a standby is refused, saying what it is and that `database` must reach the primary', () => {
    const refusal = refusalOfServer({ standby: true, citus: false });
    expect(refusal).toMatch(/^The database given is a read-only standby \(pg_is_in_recovery\(\) is true\)/);
    expect(refusal).toContain('`database` must reach the primary');
  });

  test('Citus is refused as unsupported', () => {
    const refusal = refusalOfServer({ standby: false, citus: true });
    expect(refusal).toMatch(/^The database given has the Citus extension, which recordbase does not support/);
    expect(refusal).toContain('without the citus extension');
  });

  test('a standby with Citus is refused as a standby first (the fix that applies to any server)', () => {
    expect(refusalOfServer({ standby: true, citus: true })).toMatch(/read-only standby/);
  });
});
