import { checkDatabaseAnswers } from '../../lib/db/statements/check-database-answers.js';
import { openTestDatabase, testEngines } from '../support/test-database.js';

/** What realtime asks when a shared check fails: is it the database, or only that statement? */
describe.each(testEngines())('checkDatabaseAnswers on %s', (engine) => {
  test('resolves while the database answers, and rejects once it cannot be reached', async () => {
    const database = await openTestDatabase(engine);
    try {
      // The engine open first, unbounded: the embedded one starts its worker on the first
      // statement, which on a loaded machine took more than the check's 5 s (a CI run failed so).
      await database.db.raw('SELECT 1');
      await expect(checkDatabaseAnswers(database.db, { statementTimeoutMs: 5_000, acquireTimeoutMs: 5_000 })).resolves.toBeUndefined();
    } finally {
      await database.destroy();
    }
    await expect(checkDatabaseAnswers(database.db, { statementTimeoutMs: 5_000, acquireTimeoutMs: 5_000 })).rejects.toThrow();
  });
});
