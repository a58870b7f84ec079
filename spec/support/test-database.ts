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

/** The engines available in this run: PGlite always, Postgres when global setup reached it. */
export function testEngines(): Engine[] {
  if (process.env.RB_TEST_POSTGRES) return ['pglite', 'postgres'];
  console.warn('Postgres is not reachable: running this suite on PGlite only (see the warning at the start of the run).');
  return ['pglite'];
}

/** A database for one test file, isolated from every other: its own schema, or its own PGlite. */
export interface TestDatabase {
  readonly engine: Engine;
  readonly db: Knex;
  /** Drops what the test made and closes connections. */
  destroy(): Promise<void>;
}

/** Opens an isolated database on `engine`: a fresh in-memory PGlite, or a fresh schema on the shared server. */
export async function openTestDatabase(engine: Engine): Promise<TestDatabase> {
  if (engine === 'pglite') {
    const db = openMemoryDatabase({ log: testKnexLog });
    return { engine, db, destroy: () => db.destroy() };
  }
  const url = process.env.RB_TEST_POSTGRES!;
  const schema = `rbtest_${randomBytes(6).toString('hex')}`;
  const admin = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: 1 }, log: testKnexLog });
  await admin.raw(`CREATE SCHEMA "${schema}"`);
  await admin.destroy();
  const db = knexFactory({ client: 'pg', connection: url, searchPath: [schema], pool: { min: 0, max: 5 }, log: testKnexLog });
  return {
    engine,
    db,
    async destroy() {
      await db.raw(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
      await db.destroy();
    },
  };
}
