import { randomBytes } from 'node:crypto';
import knexFactory, { type Knex } from 'knex';
import { openMemoryDatabase } from '../../lib/db/engine/open-embedded-database.js';

/**
 * Knex's own log for test databases: Knex prints pool and connection errors to the console,
 * which the outage tests cause on purpose; routed here they stay out of the run's output, so a
 * real warning stands out. `lines` keeps them for a test that wants to look.
 */
export const testKnexLog = {
  lines: [] as string[],
  warn(message: unknown) {
    testKnexLog.lines.push(String(message));
  },
  error(message: unknown) {
    testKnexLog.lines.push(String(message));
  },
  deprecate(message: unknown) {
    testKnexLog.lines.push(String(message));
  },
  debug() {},
};

/** The two engines every integration suite runs against. */
export type Engine = 'pglite' | 'postgres';

/**
 * Those two, and `pgbouncer` for the suites that ask for it (`testEngines({ pooler: true })`):
 * the shared Postgres reached through the run's PgBouncer in transaction mode (global-setup.ts).
 */
export type TestEngine = Engine | 'pgbouncer';

/**
 * The engines available in this run: PGlite always, Postgres when global setup reached it, and
 * with `pooler: true` PgBouncer when global setup started it (it is opt-in per suite: each suite
 * on it costs CI a third run).
 */
export function testEngines(): Engine[];
export function testEngines(options: { pooler: true }): TestEngine[];
export function testEngines(options: { pooler?: boolean } = {}): TestEngine[] {
  if (!process.env.RB_TEST_POSTGRES) {
    console.warn('Postgres is not reachable: running this suite on PGlite only (see the warning at the start of the run).');
    return ['pglite'];
  }
  if (!options.pooler) return ['pglite', 'postgres'];
  if (process.env.RB_TEST_PGBOUNCER) return ['pglite', 'postgres', 'pgbouncer'];
  console.warn('PgBouncer is not running: this suite skips its pgbouncer engine (see the warning at the start of the run).');
  return ['pglite', 'postgres'];
}

/** A database for one test file, isolated from every other: its own schema, database, or PGlite. */
export interface TestDatabase {
  readonly engine: TestEngine;
  readonly db: Knex;
  /**
   * On `pgbouncer`: the direct URL (the server at :5432, no pooler) of the same database, for what
   * needs a session of its own (realtime's LISTEN: `realtime.listen`). Unset on the other engines.
   */
  readonly directUrl?: string;
  /** On `postgres` and `pgbouncer`: the URL `db` connects to, for routers in other processes. */
  readonly url?: string;
  /** On `postgres`: the schema `db` works in (Knex's searchPath); the others use their database's default. */
  readonly schema?: string;
  /** Drops what the test made and closes connections. */
  destroy(): Promise<void>;
}

/**
 * Opens an isolated database on `engine`: a fresh in-memory PGlite, a fresh schema on the shared
 * server, or (pgbouncer) a fresh database on the shared server reached through the run's PgBouncer.
 */
export async function openTestDatabase(engine: TestEngine): Promise<TestDatabase> {
  if (engine === 'pglite') {
    const db = openMemoryDatabase({ log: testKnexLog });
    return { engine, db, destroy: () => db.destroy() };
  }
  if (engine === 'pgbouncer') return openPooledDatabase();
  const url = process.env.RB_TEST_POSTGRES!;
  const schema = `rbtest_${randomBytes(6).toString('hex')}`;
  const admin = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: 1 }, log: testKnexLog });
  await admin.raw(`CREATE SCHEMA "${schema}"`);
  await admin.destroy();
  const db = knexFactory({ client: 'pg', connection: url, searchPath: [schema], pool: { min: 0, max: 5 }, log: testKnexLog });
  return {
    engine,
    db,
    url,
    schema,
    async destroy() {
      await db.raw(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
      await db.destroy();
    },
  };
}

/**
 * The `pgbouncer` engine: a database of its own, not a schema, since in transaction mode a
 * session's `search_path` does not follow the client from one server connection to the next. It
 * is created and dropped on the server directly, and used through the run's PgBouncer (its
 * wildcard `[databases]` entry forwards every name), with a Knex that speaks no session state.
 */
async function openPooledDatabase(): Promise<TestDatabase> {
  const pooler = process.env.RB_TEST_PGBOUNCER;
  if (!pooler) throw new Error('openTestDatabase("pgbouncer"): global setup started no PgBouncer (RB_TEST_PGBOUNCER is empty)');
  const name = `rbtest_${randomBytes(6).toString('hex')}`;
  const direct = new URL(process.env.RB_TEST_POSTGRES!);
  const admin = knexFactory({ client: 'pg', connection: direct.toString(), pool: { min: 0, max: 1 }, log: testKnexLog });
  try {
    await admin.raw(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.destroy();
  }
  direct.pathname = `/${name}`;
  const pooled = new URL(direct.toString());
  pooled.host = pooler;
  const db = knexFactory({ client: 'pg', connection: pooled.toString(), pool: { min: 0, max: 5 }, log: testKnexLog });
  return {
    engine: 'pgbouncer',
    db,
    directUrl: direct.toString(),
    url: pooled.toString(),
    async destroy() {
      await db.destroy();
      // FORCE: PgBouncer keeps idle server connections to the database; they go with it.
      const dropper = knexFactory({ client: 'pg', connection: process.env.RB_TEST_POSTGRES!, pool: { min: 0, max: 1 }, log: testKnexLog });
      try {
        await dropper.raw(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`).catch(() => undefined);
      } finally {
        await dropper.destroy();
      }
    },
  };
}
