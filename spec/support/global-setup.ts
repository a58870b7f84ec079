import { createJiti } from 'jiti';
import pg from 'pg';
import type { PgBouncer } from './pgbouncer.js';

/**
 * The run's PgBouncer (the `pgbouncer` test engine), kept on globalThis for global teardown: jest
 * runs both hooks in its main process, and globals set here are the only thing teardown can read.
 */
const RUN_PGBOUNCER = Symbol.for('recordbase.test.pgbouncer');

/**
 * Server connections per test database through the run's PgBouncer: fewer than a test app's Knex
 * pool (5), so that clients share them as they do behind a production pooler, and small enough
 * that a run's databases stay within the shared server's max_connections.
 */
const RUN_PGBOUNCER_POOL_SIZE = 3;

/**
 * Runs once before all test files: finds out whether the Postgres server answers, and tells the
 * workers through the environment. Without CI a missing server skips the Postgres suites with a
 * visible message; with CI=true it fails the run, because CI must prove both engines.
 *
 * With Postgres, it also starts one PgBouncer in transaction mode in front of it for the whole run
 * (the `pgbouncer` engine of the suites that ask for it: `testEngines({ pooler: true })`) and puts
 * its `host:port` in RB_TEST_PGBOUNCER; without PgBouncer installed that engine is left out with
 * a warning (with CI=true pgBouncerAvailable fails the run).
 */
export default async function globalSetup(): Promise<void> {
  const url = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    process.env.RB_TEST_POSTGRES = url;
  } catch (err) {
    if (process.env.CI === 'true') {
      throw new Error(`CI=true but Postgres at ${url} does not answer: ${(err as Error).message}`);
    }
    process.env.RB_TEST_POSTGRES = '';
    console.warn(`\n*** Postgres at ${url} does not answer (${(err as Error).message}): the Postgres suites are SKIPPED; only PGlite runs. ***\n`);
  } finally {
    await client.end().catch(() => undefined);
  }
  process.env.RB_TEST_PGBOUNCER = '';
  if (!process.env.RB_TEST_POSTGRES) return;
  // Jest loads this hook with Node's own resolver, which finds no './pgbouncer.js' beside
  // pgbouncer.ts (the suites get that mapping from jest's moduleNameMapper); jiti (the loader of
  // TypeScript migrations) strips the types and maps the imports.
  const { pgBouncerAvailable, startPgBouncer } = await createJiti(import.meta.url).import<typeof import('./pgbouncer.js')>('./pgbouncer.ts');
  if (!pgBouncerAvailable()) return;
  const target = new URL(process.env.RB_TEST_POSTGRES);
  // Transaction mode, a wildcard [databases] entry: every test database is reached under its own name.
  const bouncer = await startPgBouncer({
    target: { host: target.hostname, port: Number(target.port || 5432) },
    poolMode: 'transaction',
    poolSize: RUN_PGBOUNCER_POOL_SIZE,
    maxClientConnections: 1_000,
    users: [decodeURIComponent(target.username || 'postgres')],
  });
  (globalThis as Record<symbol, PgBouncer | undefined>)[RUN_PGBOUNCER] = bouncer;
  process.env.RB_TEST_PGBOUNCER = `127.0.0.1:${bouncer.port}`;
}
