import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import knexFactory, { type Knex } from 'knex';
import ClientPgLite from 'knex-pglite';

/** Where the embedded database of a `dataDir` lives: one rule for the router and the CLI. */
export function embeddedDatabaseDir(dataDir: string): string {
  return join(dataDir, 'db');
}

/**
 * Opens the embedded Postgres (PGlite) persisted in `directory`, behind a Knex instance so the
 * rest of the library speaks one dialect whatever the engine. PGlite is single-connection: Knex's
 * pool is fixed at one, so statements (and transactions) run one at a time.
 */
export function openEmbeddedDatabase(directory: string): Knex {
  mkdirSync(directory, { recursive: true });
  return knexFactory({
    client: ClientPgLite as unknown as typeof Knex.Client,
    dialect: 'postgres',
    connection: { filename: directory } as Knex.StaticConnectionConfig,
  });
}

/** An in-memory embedded database, for tests and throwaway demos. */
export function openMemoryDatabase(): Knex {
  return knexFactory({
    client: ClientPgLite as unknown as typeof Knex.Client,
    dialect: 'postgres',
    connection: {} as Knex.StaticConnectionConfig,
  });
}
