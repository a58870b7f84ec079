import pg from 'pg';

/**
 * Runs once before all test files: finds out whether the Postgres server answers, and tells the
 * workers through the environment. Without CI a missing server skips the Postgres suites with a
 * visible message; with CI=true it fails the run, because CI must prove both engines.
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
}
