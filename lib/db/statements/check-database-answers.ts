import type { Knex } from 'knex';
import type { DatabaseContext } from './database-context.js';
import { runStatement } from './run-statement.js';

/**
 * Resolves when the database answers a statement that reads nothing, within `context`'s bounds;
 * rejects with the driver's (or the bounds') error otherwise. Tells a failure of the database
 * itself (unreachable, restarting, no connection in time) from a failure of one costly statement,
 * which a caller handles differently: realtime reads a page of changes again later when the
 * database is gone, but when only a shared check failed, checks its subscribers one client at a
 * time.
 */
export async function checkDatabaseAnswers(db: Knex, context?: DatabaseContext): Promise<void> {
  await runStatement(db, { sql: 'SELECT 1', bindings: [] }, context);
}
