import type { Knex } from 'knex';
import { runStatement } from '../statements/run-statement.js';

/**
 * Throws, saying so, when the Knex instance given as `database` has no connection settings:
 * `knex({ client: 'pg', connection: process.env.DATABASE_URL })` with the variable unset builds a
 * Knex without a pool, whose every query fails with Knex's "Unable to acquire a connection".
 */
export function checkDatabaseConnection(db: Knex): void {
  const config = (db.client as { config?: { connection?: unknown; connectionPool?: unknown } }).config ?? {};
  if (config.connection || config.connectionPool) return;
  const given = config.connection === '' ? 'an empty string' : String(config.connection);
  throw new Error(
    `The Knex instance given as \`database\` has no connection settings (its \`connection\` is ${given}; is DATABASE_URL set?). ` +
      "Give it a connection string or object, e.g. knex({ client: 'pg', connection: 'postgres://user@host/db' }), or leave out `database` to use the embedded engine.",
  );
}

/**
 * Checks, at start and with one statement, that the server behind `database` is one recordbase
 * can write to (refusalOfServer): throws, saying why and naming the fix, otherwise; `ready`
 * rejects with it, before the schema sync would fail with a driver message that names neither.
 */
export async function checkPrimaryServer(db: Knex): Promise<void> {
  const { rows } = await runStatement(db, { sql: SERVER_FACTS_SQL, bindings: [] });
  const refusal = refusalOfServer({ standby: rows[0]?.standby === true, citus: rows[0]?.citus === true });
  if (refusal !== undefined) throw new Error(refusal);
}

/** What the start-up check asks the server, in one round trip. */
const SERVER_FACTS_SQL = "SELECT pg_is_in_recovery() AS standby, EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS citus";

/** What the start-up check learns of the server behind `database`. */
export interface ServerFacts {
  /** `pg_is_in_recovery()`: a hot standby (a read replica, or a primary still recovering), which refuses every write. */
  readonly standby: boolean;
  /** The `citus` extension is created in the database. */
  readonly citus: boolean;
}

/**
 * Why recordbase cannot run on a server with these facts, or undefined when it can. A standby
 * refuses the schema sync's and every record's writes, and would otherwise fail later with a
 * driver message that names neither the cause nor the fix. Citus is refused as unsupported:
 * realtime's statement-level triggers with transition tables, and the schema sync's DDL, are not
 * supported on its distributed tables, and nothing here has been tested on it.
 */
export function refusalOfServer(facts: ServerFacts): string | undefined {
  if (facts.standby) {
    return (
      'The database given is a read-only standby (pg_is_in_recovery() is true): recordbase writes its schema, records and realtime changes, ' +
      'so `database` must reach the primary. Give it the primary\'s address (a hot standby cannot be the primary; docs/deployment.md, "Behind a pooler").'
    );
  }
  if (facts.citus) {
    return (
      'The database given has the Citus extension, which recordbase does not support (its realtime triggers and schema changes are not supported on distributed tables). ' +
      'Use a database without the citus extension.'
    );
  }
  return undefined;
}
