/**
 * The host app under test: a plain Express app with recordbase mounted under /backend, on
 * Postgres (the schema named by BENCH_SCHEMA) and disk storage under BENCH_DATA_DIR. The runner
 * forks it, so it has a process (and a heap, and an event loop) of its own.
 *
 * IPC: it sends `{ type: 'ready', port }` once listening. The runner may send
 * `{ type: 'capture' }` (start recording every SQL statement; answers `{ type: 'capturing' }`) and `{ type: 'captured' }`
 * (answers `{ type: 'captured', queries }` and stops recording): that is how the runner learns
 * the SQL the router generates, to EXPLAIN it and to count the statements per request.
 */
import path from 'node:path';
import express from 'express';
import knexFactory from 'knex';
import { createRecordsRouter, diskStorage } from '../lib/index.js';
import { benchCollections, FILE_TOKEN_SECRET } from './bench-data.js';
import { serveBenchApp } from './bench-processes.js';

/** A statement as Knex sent it: native `$n` SQL and its bindings. */
export interface CapturedQuery {
  sql: string;
  bindings: unknown[];
}

const url = process.env.BENCH_DATABASE_URL!;
const schema = process.env.BENCH_SCHEMA!;
const dataDir = process.env.BENCH_DATA_DIR!;

const database = knexFactory({ client: 'pg', connection: url, searchPath: [schema], pool: { min: 2, max: 10 } });
let captured: CapturedQuery[] | undefined;
database.on('query', (query: { sql: string; bindings?: unknown[] }) => {
  captured?.push({ sql: query.sql, bindings: query.bindings ?? [] });
});

const records = createRecordsRouter({
  collections: benchCollections,
  database,
  dataDir,
  storage: diskStorage({ root: path.join(dataDir, 'storage') }),
  fileTokenSecret: FILE_TOKEN_SECRET,
  fileSweep: false,
});
const app = express();
app.use('/backend', records);
await records.ready;

process.on('message', (message: { type: string }) => {
  if (message.type === 'capture') {
    captured = [];
    process.send!({ type: 'capturing' });
  }
  if (message.type === 'captured') {
    process.send!({ type: 'captured', queries: captured ?? [] });
    captured = undefined;
  }
});

serveBenchApp({
  app,
  async close() {
    await records.close();
    await database.destroy();
  },
});
