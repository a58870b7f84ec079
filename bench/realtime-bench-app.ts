/**
 * The host app of the realtime benchmark (bench/realtime-bench.ts): recordbase on the bench's
 * Postgres schema, as bench-app.ts, plus what realtime needs to be measured.
 *
 * - Auth: the token `user:<id>` is the identity `{ id }` (the bench's users subscribe as themselves).
 * - BENCH_POSTS_LIST_RULE: the posts list rule (default `""`); the owner run sets
 *   `author = @request.auth.id`. View stays `""`.
 * - BENCH_REALTIME=off: `realtime: false` (no routes; capture runs only while a realtime instance does).
 * - Every stream comes from the load process's one address: the per-address bound is lifted.
 * - IPC `{ type: 'gc' }` (the process runs with --expose-gc): a full collection, answered with
 *   `{ type: 'gced', ...process.memoryUsage() }`, so two RSS readings compare live memory rather than garbage.
 */
import path from 'node:path';
import express from 'express';
import knexFactory from 'knex';
import { createRecordsRouter, diskStorage, type CollectionDefinition } from '../lib/index.js';
import { benchCollections, FILE_TOKEN_SECRET, POSTS_ID } from './bench-data.js';
import { serveBenchApp } from './bench-processes.js';

const listRule = process.env.BENCH_POSTS_LIST_RULE ?? '';
const collections: CollectionDefinition[] = benchCollections.map((c) => (c.id === POSTS_ID ? { ...c, rules: { ...c.rules, list: listRule } } : c));
const dataDir = process.env.BENCH_DATA_DIR!;
const database = knexFactory({ client: 'pg', connection: process.env.BENCH_DATABASE_URL!, searchPath: [process.env.BENCH_SCHEMA!], pool: { min: 2, max: 10 } });
const records = createRecordsRouter({
  collections,
  database,
  dataDir,
  storage: diskStorage({ root: path.join(dataDir, 'storage') }),
  fileTokenSecret: FILE_TOKEN_SECRET,
  fileSweep: false,
  // The load comes from one process, one address: lift the per-client shares of the pool that
  // keep one client from holding it (docs/limits.md), or the bench measures one client's share.
  limits: { maxConnectionsPerClient: 1_000, maxWaitingPerClient: 100_000 },
  auth: (token) => (token.startsWith('user:') ? { id: token.slice(5) } : null),
  realtime: process.env.BENCH_REALTIME === 'off' ? false : { maxClientsPerAddress: 1_000_000 },
});
const app = express();
app.use('/backend', records);
await records.ready;

process.on('message', (message: { type: string }) => {
  if (message.type === 'gc') {
    const gc = (globalThis as { gc?: () => void }).gc;
    gc?.();
    gc?.();
    const { rss, heapUsed, external, arrayBuffers } = process.memoryUsage();
    process.send!({ type: 'gced', rss, heapUsed, external, arrayBuffers });
  }
});

serveBenchApp({
  app,
  async close() {
    await records.close();
    await database.destroy();
  },
});
