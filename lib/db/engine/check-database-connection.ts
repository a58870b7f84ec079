import type { Knex } from 'knex';

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
