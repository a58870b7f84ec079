/**
 * The bench's data: 1,000 users and N posts in a schema of their own (`rb_bench_<N>`), made with
 * one `INSERT ... SELECT generate_series` per table and kept between runs. The schema's comment
 * records what was seeded; a run whose comment and row counts match skips the seed.
 */
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import { createRecordsRouter } from '../lib/index.js';
import { openEmbeddedDatabase } from '../lib/db/engine/open-embedded-database.js';
import { OUTBOX_TABLE } from '../lib/db/shared-names.js';
import { benchCollectionsOfRun, benchSchema, benchSchemaPrefix, FILE_TOKEN_SECRET, USER_COUNT, WRITE_MARKER } from './bench-data.js';

/** What the seed needs of a database client: node-postgres's Client and PGlite both have it. */
interface SqlClient {
  query(sql: string, params?: unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
}

/** Bump when the seed's SQL changes, so cached schemas are rebuilt. */
const SEED_VERSION = 1;

/** What `ensureSeeded` did. */
export interface SeedReport {
  schema: string;
  seeded: boolean;
  seconds: number;
}

function signature(rows: number): string {
  return `recordbase bench seed v${SEED_VERSION}: ${USER_COUNT} users, ${rows} posts`;
}

/** Creates the tables and indexes exactly as the router does, by letting a router sync the schema. */
async function syncTables(db: Knex, dataDir: string): Promise<void> {
  const router = createRecordsRouter({ collections: benchCollectionsOfRun(), database: db, dataDir, fileTokenSecret: FILE_TOKEN_SECRET, fileSweep: false });
  try {
    await router.ready;
  } finally {
    await router.close();
    await db.destroy();
  }
}

/**
 * Seeds one data set. Ids are `u`/`p` + 14 hex digits of md5 of the row number (random-looking,
 * like real record ids, and computable by the load generator); `created` advances 10 s per post;
 * views are spread over 0..999, two posts in three are published, authors cycle over the users.
 */
async function seed(client: SqlClient, schema: string, rows: number): Promise<void> {
  const s = `"${schema}"`;
  await client.query('BEGIN');
  await client.query(
    `INSERT INTO ${s}.users (id, name, email, created, updated)
     SELECT 'u' || substr(md5('u' || i), 1, 14), 'user ' || i, 'user' || i || '@example.com', t, t
     FROM generate_series(1, $1::int) AS i, LATERAL (SELECT timestamptz '2024-01-01 00:00:00Z' + i * interval '1 minute' AS t) AS ts`,
    [USER_COUNT],
  );
  await client.query(
    `INSERT INTO ${s}.posts (id, title, body, views, published, author, cover, created, updated)
     SELECT 'p' || substr(md5('p' || i), 1, 14), 'post ' || i, repeat('lorem ipsum dolor sit amet ', 1 + i % 8),
            (i::bigint * 7919) % 1000, i % 3 <> 0, 'u' || substr(md5('u' || (1 + (i::bigint * 31) % $2::int)), 1, 14), '', t, t
     FROM generate_series(1, $1::int) AS i, LATERAL (SELECT timestamptz '2025-01-01 00:00:00Z' + i * interval '10 seconds' AS t) AS ts`,
    [rows, USER_COUNT],
  );
  await client.query(`COMMENT ON SCHEMA ${s} IS '${signature(rows)}'`);
  await client.query('COMMIT');
  await client.query(`VACUUM ANALYZE ${s}.users`);
  await client.query(`VACUUM ANALYZE ${s}.posts`);
}

async function isSeeded(client: SqlClient, schema: string, rows: number): Promise<boolean> {
  const comment = await client.query(`SELECT obj_description(oid, 'pg_namespace') AS c FROM pg_namespace WHERE nspname = $1`, [schema]);
  if (comment.rows[0]?.c !== signature(rows)) return false;
  const counts = await client.query(`SELECT (SELECT count(*) FROM "${schema}".users)::int AS u, (SELECT count(*) FROM "${schema}".posts)::int AS p`);
  return counts.rows[0].u === USER_COUNT && counts.rows[0].p === rows;
}

/** Removes what a run wrote (creates, uploads), so the data set is the seed again; but the posts `keepIds` (the thumbnail scenario's image). */
export async function removeBenchWrites(url: string, schema: string, keepIds: readonly string[] = []): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const exists = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
    if (exists.rowCount === 0) return 0;
    const table = await client.query(`SELECT to_regclass($1) AS t`, [`"${schema}".posts`]);
    if (table.rows[0].t === null) return 0;
    const deleted = await client.query(`DELETE FROM "${schema}".posts WHERE title LIKE $1 AND NOT (id = ANY($2::text[]))`, [`${WRITE_MARKER}%`, keepIds]);
    if ((deleted.rowCount ?? 0) > 0) await client.query(`VACUUM ANALYZE "${schema}".posts`);
    // The realtime outbox logs every write of both servers (and this delete); only a running
    // instance prunes it, 10 minutes later. Nobody subscribes during a run: emptied, so it does
    // not grow by a few hundred MB over a few runs.
    const outbox = await client.query(`SELECT to_regclass($1) AS t`, [`"${schema}"."${OUTBOX_TABLE}"`]);
    if (outbox.rows[0].t !== null) await client.query(`TRUNCATE "${schema}"."${OUTBOX_TABLE}"`);
    return deleted.rowCount ?? 0;
  } finally {
    await client.end();
  }
}

/** The connections holding this process's claims (see `claimSchema`), by schema. */
const claims = new Map<string, pg.Client>();

/**
 * Claims `schema` for this process until it exits: a session advisory lock on a connection of
 * its own, which Postgres releases when the connection closes. A second run on the same schema
 * and database is refused here, instead of deleting the first run's writes or reseeding the
 * schema under its servers. The connection does not keep the process alive.
 */
async function claimSchema(url: string, schema: string): Promise<void> {
  if (claims.has(schema)) return;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const { rows } = await client.query<{ claimed: boolean }>('SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS claimed', [`recordbase-bench:${schema}`]);
  if (!rows[0]!.claimed) {
    await client.end();
    throw new Error(`another bench run is using the schema ${schema} on this database: wait for it to end, or give this run schemas of its own with BENCH_SCHEMA_PREFIX`);
  }
  client.on('error', () => {}); // the claim ends with the connection; the run's own queries report a lost database
  (client as unknown as { connection: { stream: { unref(): void } } }).connection.stream.unref();
  claims.set(schema, client);
}

/**
 * Makes sure `<BENCH_SCHEMA_PREFIX><rows>` (`rb_bench_<rows>`) holds the seed (rebuilding it when
 * asked or when it does not), after claiming the schema for this process (`claimSchema`).
 */
export async function ensureSeeded(options: { url: string; rows: number; reseed: boolean; dataDir: string }): Promise<SeedReport> {
  const schema = benchSchema(options.rows);
  const started = Date.now();
  await claimSchema(options.url, schema);
  await removeBenchWrites(options.url, schema);
  const client = new pg.Client({ connectionString: options.url });
  await client.connect();
  try {
    if (!options.reseed && (await isSeeded(client, schema, options.rows))) {
      return { schema, seeded: false, seconds: (Date.now() - started) / 1000 };
    }
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await client.query(`CREATE SCHEMA "${schema}"`);
    await syncTables(knexFactory({ client: 'pg', connection: options.url, searchPath: [schema], pool: { min: 0, max: 2 } }), path.join(options.dataDir, 'seed'));
    await seed(client, schema, options.rows);
    return { schema, seeded: true, seconds: (Date.now() - started) / 1000 };
  } finally {
    await client.end();
  }
}

/**
 * The embedded engine's data set: the same users and posts in a PGlite folder, seeded once per
 * size and kept in the temp directory between runs (each server of a run works on a copy).
 * Returns the folder.
 */
export async function ensureEmbeddedSeeded(options: { rows: number; reseed: boolean }): Promise<SeedReport & { directory: string }> {
  const started = Date.now();
  const prefix = benchSchemaPrefix();
  const directory = path.join(os.tmpdir(), 'recordbase-bench', `${prefix === 'rb_bench_' ? '' : prefix}embedded-${options.rows}`);
  const report = (seeded: boolean) => ({ schema: 'public', seeded, seconds: (Date.now() - started) / 1000, directory });
  if (!options.reseed && existsSync(directory)) {
    const db = await PGlite.create(directory);
    try {
      if (await isSeeded(db, 'public', options.rows)) return report(false);
    } finally {
      await db.close();
    }
  }
  rmSync(directory, { recursive: true, force: true });
  mkdirSync(directory, { recursive: true });
  const seedDir = path.join(os.tmpdir(), 'recordbase-bench', `seed-${process.pid}`);
  try {
    await syncTables(openEmbeddedDatabase(directory), seedDir);
  } finally {
    rmSync(seedDir, { recursive: true, force: true });
  }
  const db = await PGlite.create(directory);
  try {
    await seed(db, 'public', options.rows);
  } finally {
    await db.close();
  }
  return report(true);
}
