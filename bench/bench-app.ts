/**
 * The host app under test: a plain Express app with recordbase mounted under /backend, on
 * Postgres (the schema named by BENCH_SCHEMA) and disk storage under BENCH_DATA_DIR. The runner
 * forks it, so it has a process (and a heap, and an event loop) of its own.
 *
 * BENCH_ENGINE picks the database: `postgres` (the default), `embedded` (recordbase's own
 * embedded engine, PGlite in a worker thread, on the folder BENCH_DB_DIR) or `embedded-in-thread`
 * (PGlite on the main thread through knex-pglite, as the embedded engine was before: the
 * baseline of the embedded scenarios).
 *
 * BENCH_RATE_LIMITS=1 turns on a rate limit that never trips (every request pays its check).
 * BENCH_FIELD_RULES=1 (or `relation`) gives posts two field view rules and users one (withFieldRules, bench-data.ts).
 *
 * IPC: it sends `{ type: 'ready', port }` once listening. The runner may send
 * `{ type: 'capture' }` (start recording every SQL statement; answers `{ type: 'capturing' }`) and `{ type: 'captured' }`
 * (answers `{ type: 'captured', queries }` and stops recording): that is how the runner learns
 * the SQL the router generates, to EXPLAIN it and to count the statements per request. And
 * `{ type: 'sql', sql, bindings }` (knex `?` placeholders; answers `{ type: 'sql-result', rows }`
 * or `{ type: 'sql-result', error }`): how the runner prepares the posts the update and delete
 * scenarios write, on this app's own database (the embedded engine's folder has one process).
 */
import http from 'node:http';
import path from 'node:path';
import express from 'express';
import knexFactory, { type Knex } from 'knex';
import { createRecordsRouter, diskStorage } from '../lib/index.js';
import { openEmbeddedDatabase } from '../lib/db/engine/open-embedded-database.js';
import { benchCollectionsOfRun, FILE_TOKEN_SECRET, withFieldRules } from './bench-data.js';
import { serveBenchApp } from './bench-processes.js';

/** A statement as Knex sent it: native `$n` SQL and its bindings. */
export interface CapturedQuery {
  sql: string;
  bindings: unknown[];
}

const url = process.env.BENCH_DATABASE_URL!;
const schema = process.env.BENCH_SCHEMA!;
const dataDir = process.env.BENCH_DATA_DIR!;

async function openDatabase(engine: string | undefined): Promise<Knex> {
  const directory = process.env.BENCH_DB_DIR!;
  switch (engine ?? 'postgres') {
    case 'postgres':
      return knexFactory({ client: 'pg', connection: url, searchPath: [schema], pool: { min: 2, max: 10 } });
    case 'embedded':
      return openEmbeddedDatabase(directory);
    case 'embedded-in-thread': {
      // Imported only here: PGlite on the main thread is half a megabyte of code a Postgres host never loads.
      const { default: ClientPgLite } = await import('knex-pglite');
      return knexFactory({ client: ClientPgLite as unknown as typeof Knex.Client, dialect: 'postgres', connection: { filename: directory } as Knex.StaticConnectionConfig });
    }
    default:
      throw new Error(`BENCH_ENGINE must be postgres, embedded or embedded-in-thread, got ${engine}`);
  }
}

const database = await openDatabase(process.env.BENCH_ENGINE);
let captured: CapturedQuery[] | undefined;
database.on('query', (query: { sql: string; bindings?: unknown[] }) => {
  captured?.push({ sql: query.sql, bindings: query.bindings ?? [] });
});

const records = createRecordsRouter({
  collections: process.env.BENCH_FIELD_RULES ? withFieldRules(benchCollectionsOfRun(), process.env.BENCH_FIELD_RULES) : benchCollectionsOfRun(),
  database,
  dataDir,
  storage: diskStorage({ root: path.join(dataDir, 'storage') }),
  fileTokenSecret: FILE_TOKEN_SECRET,
  fileSweep: false,
  // The load comes from one process, one address: lift the per-client shares of the pool that
  // keep one client from holding it (docs/limits.md), or the bench measures one client's share.
  // The embedded engine's short default timeout (250 ms, there for fairness) would fail the
  // bench's heavier cells, such as a total over 100,000 rows: the earlier passes' 5 s.
  limits: { maxConnectionsPerClient: 1_000, maxWaitingPerClient: 100_000, statementTimeoutMs: 5_000 },
  // knex-pglite's connections cannot LISTEN (realtime needs node-postgres): the in-thread
  // baseline runs without realtime, so it also skips the capture triggers the worker's creates run.
  ...(process.env.BENCH_ENGINE === 'embedded-in-thread' ? { realtime: false as const } : {}),
  // BENCH_RATE_LIMITS=1 (given with --app-env): every request checked against a rule that never
  // trips, so the bench prices the check itself (docs/limits.md, "Rate limits").
  ...(process.env.BENCH_RATE_LIMITS === '1' ? { rateLimits: { rules: [{ label: '/api/', maxRequests: 1_000_000_000, duration: 60, audience: '' as const }] } } : {}),
});
const app = express();
app.use('/backend', records);
await records.ready;

/** A statement the runner asks this process to run on its database (bench/prepare-writes.ts). */
interface SqlMessage {
  type: 'sql';
  sql: string;
  bindings: Knex.RawBinding[];
}

async function runSql(message: SqlMessage): Promise<void> {
  try {
    const result: { rows?: Record<string, unknown>[] } = await database.raw(message.sql, message.bindings);
    process.send!({ type: 'sql-result', rows: result.rows ?? [] });
  } catch (error) {
    process.send!({ type: 'sql-result', error: String(error) });
  }
}

process.on('message', (message: { type: string }) => {
  if (message.type === 'sql') void runSql(message as SqlMessage);
  if (message.type === 'capture') {
    captured = [];
    process.send!({ type: 'capturing' });
  }
  if (message.type === 'captured') {
    process.send!({ type: 'captured', queries: captured ?? [] });
    captured = undefined;
  }
});

/**
 * BENCH_REALTIME_SUBSCRIBER=1: this process holds one event stream subscribed to `posts/*`, so
 * every write of posts is captured into the outbox and delivered to it (its messages read and
 * dropped), as when one dashboard or client watches the collection. Without it nobody
 * subscribes, and the capture trigger copies nothing (docs/realtime.md).
 */
async function subscribeToPosts(port: number): Promise<void> {
  const clientId = await new Promise<string>((resolve, reject) => {
    const req = http.get(`http://127.0.0.1:${port}/backend/api/realtime`, { headers: { Accept: 'text/event-stream' } }, (res) => {
      let text = '';
      const onData = (chunk: Buffer) => {
        text += chunk.toString('utf8');
        const match = /"clientId":"(\w+)"/.exec(text);
        if (match) {
          res.off('data', onData);
          res.resume();
          resolve(match[1]!);
        }
      };
      res.on('data', onData);
    });
    req.on('error', reject);
  });
  const answer = await fetch(`http://127.0.0.1:${port}/backend/api/realtime`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ clientId, subscriptions: ['posts/*'] }),
  });
  if (answer.status !== 204) throw new Error(`BENCH_REALTIME_SUBSCRIBER: the subscription answered ${answer.status}`);
}

serveBenchApp({
  app,
  async close() {
    await records.close();
    await database.destroy();
  },
  ...(process.env.BENCH_REALTIME_SUBSCRIBER === '1' ? { listening: subscribeToPosts } : {}),
});
