/**
 * The host app of the storage benchmark (bench/storage-bench.ts): recordbase under /backend on
 * Postgres (schema BENCH_SCHEMA) with one collection, `uploads`, whose `cover` takes files up to
 * 6 MiB, on the storage BENCH_STORAGE names: `disk` (under BENCH_DATA_DIR) or `s3` (the settings
 * in BENCH_S3, JSON `{ bucket, prefix, client }`). Forked by the runner, so its RSS and CPU are its
 * own; sends `{ type: 'ready', port }` once listening.
 */
import path from 'node:path';
import express from 'express';
import knexFactory from 'knex';
import { createRecordsRouter, diskStorage, type CollectionDefinition, type Storage } from '../lib/index.js';
import { s3Storage } from '../lib/files/s3-storage.js';
import { FILE_TOKEN_SECRET } from './bench-data.js';
import { serveBenchApp } from './bench-processes.js';

/** The one collection: the fields the load generator's upload body sends (`title`, `author`, `cover`). */
export const STORAGE_BENCH_COLLECTIONS: CollectionDefinition[] = [
  {
    name: 'uploads',
    id: 'pbc_bench_uploads',
    fields: [
      { name: 'title', type: 'text' },
      { name: 'author', type: 'text' },
      { name: 'cover', type: 'file', maxSelect: 1, maxSize: 6 * 1024 * 1024 },
    ],
    rules: { list: '', view: '', create: '', update: null, delete: null },
  },
];

const dataDir = process.env.BENCH_DATA_DIR!;
const database = knexFactory({ client: 'pg', connection: process.env.BENCH_DATABASE_URL!, searchPath: [process.env.BENCH_SCHEMA!], pool: { min: 2, max: 10 } });
const storage: Storage =
  process.env.BENCH_STORAGE === 's3' ? s3Storage(JSON.parse(process.env.BENCH_S3!)) : diskStorage({ root: path.join(dataDir, 'storage') });
const records = createRecordsRouter({
  collections: STORAGE_BENCH_COLLECTIONS,
  database,
  dataDir,
  storage,
  fileTokenSecret: FILE_TOKEN_SECRET,
  fileSweep: false,
  // One load process, one address: the per-client shares of the pool lifted (docs/limits.md).
  limits: { maxFileSize: 6 * 1024 * 1024, maxBodySize: 8 * 1024 * 1024, maxConnectionsPerClient: 1_000, maxWaitingPerClient: 100_000 },
});
const app = express();
app.use('/backend', records);
await records.ready;
serveBenchApp({
  app,
  async close() {
    await records.close();
    await database.destroy();
  },
});
