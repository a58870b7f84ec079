import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import knexFactory, { type Knex } from 'knex';
import { acquireDataDirLock } from './data-dir-lock.js';
import { EmbeddedKnexClient } from './embedded-knex-client.js';

/** Where the embedded database of a `dataDir` lives: one rule for the router and the CLI. */
export function embeddedDatabaseDir(dataDir: string): string {
  return join(dataDir, 'db');
}

/**
 * Where Knex's own messages about an embedded database go (`log` of Knex's config: pool and
 * connection warnings, such as a connection request that waited past its timeout). Knex prints
 * them to the console when none is given.
 */
export interface EmbeddedDatabaseOptions {
  log?: Knex.Config['log'];
  /**
   * Told once, before the start, when the folder holds no database yet: the first start creates
   * one, which takes seconds, so that the wait is not silent. The message says what takes long.
   */
  onCreate?: (message: string) => void;
}

/**
 * Opens the embedded Postgres (PGlite) persisted in `directory`, behind a Knex instance so the
 * rest of the library speaks one dialect whatever the engine. PGlite runs in a worker thread
 * (embedded-knex-client.ts), so its statements never run on the event loop.
 *
 * Takes the folder's lock first: throws, naming the folder and the holder (pid, host), when
 * another process or router has it open. `destroy()` on the returned Knex releases it.
 */
export function openEmbeddedDatabase(directory: string, options: EmbeddedDatabaseOptions = {}): Knex {
  const lock = acquireDataDirLock(directory);
  try {
    if (!existsSync(join(directory, 'PG_VERSION'))) options.onCreate?.(describeFirstStart(directory));
    mkdirSync(directory, { recursive: true });
    return knexFactory({ client: EmbeddedKnexClient as unknown as typeof Knex.Client, embedded: { directory, lock }, log: options.log } as Knex.Config);
  } catch (error) {
    lock.release();
    throw error;
  }
}

/** The progress line of a first start: where, and what takes the time. */
function describeFirstStart(directory: string): string {
  return `creating the embedded database in ${resolve(directory)}: the first start initialises a new Postgres data directory (PGlite's initdb), which takes several seconds (10.9 s measured on a small machine); later starts only open it`;
}

/**
 * An in-memory embedded database, for tests and throwaway demos, also in a worker thread. Its
 * statements cannot be cut short (that would lose the database): a timeout answers the caller
 * while the statement runs on to its end in the worker.
 */
export function openMemoryDatabase(options: EmbeddedDatabaseOptions = {}): Knex {
  return knexFactory({ client: EmbeddedKnexClient as unknown as typeof Knex.Client, embedded: {}, log: options.log } as Knex.Config);
}
