/**
 * `npm run bench`: recordbase against a hand-written Express + Knex server doing the same SQL and
 * returning the same JSON (the stack's own limit), measured in one run, reported as ratios.
 *
 * Database: BENCH_DATABASE_URL (a Postgres server; a fresh schema is made and dropped), else the
 * embedded engine in a temp dir. Requests are sequential over keep-alive HTTP (fetch) from this
 * process, after a warm-up; it measures per-request cost, not concurrency. The two servers are
 * measured in alternating rounds and each keeps its best round, so neither gains from running
 * second on a warmer JIT.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import knexFactory, { type Knex } from 'knex';
import { createRecordsRouter } from '../lib/index.js';
import { openEmbeddedDatabase } from '../lib/db/open-embedded-database.js';
import { formatRecordDate } from '../lib/schema/record-date.js';

const ROWS = Number(process.env.BENCH_ROWS ?? 5000);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 400);

async function openDatabase(): Promise<{ db: Knex; cleanup(): Promise<void>; label: string }> {
  const url = process.env.BENCH_DATABASE_URL;
  if (url) {
    const schema = `rbbench_${process.pid}`;
    const admin = knexFactory({ client: 'pg', connection: url });
    await admin.raw(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    const db = knexFactory({ client: 'pg', connection: url, searchPath: [schema], pool: { min: 1, max: 4 } });
    return {
      db,
      label: 'Postgres',
      async cleanup() {
        await db.destroy();
        await admin.raw(`DROP SCHEMA "${schema}" CASCADE`);
        await admin.destroy();
      },
    };
  }
  const dir = await mkdtemp(join(tmpdir(), 'rb-bench-'));
  const db = openEmbeddedDatabase(dir);
  return { db, label: 'embedded PGlite', cleanup: async () => (await db.destroy(), rm(dir, { recursive: true, force: true })) };
}

function listen(app: express.Express): Promise<{ server: Server; base: string }> {
  return new Promise((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => resolve({ server, base: `http://127.0.0.1:${(server.address() as { port: number }).port}` }));
  });
}

async function get(url: string): Promise<void> {
  const res = await fetch(url);
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}`);
  await res.arrayBuffer();
}

/** Requests per second over REQUESTS sequential requests, after a warm-up of a tenth of them. */
async function measure(urls: () => string): Promise<number> {
  for (let i = 0; i < REQUESTS / 10; i++) await get(urls());
  const start = process.hrtime.bigint();
  for (let i = 0; i < REQUESTS; i++) await get(urls());
  return REQUESTS / (Number(process.hrtime.bigint() - start) / 1e9);
}

async function main(): Promise<void> {
  const { db, cleanup, label } = await openDatabase();
  const router = createRecordsRouter({
    collections: [{ name: 'posts', fields: [{ name: 'title', type: 'text' }, { name: 'views', type: 'number' }], rules: { list: '', view: '' } }],
    database: db,
  });
  await router.ready;
  const ids: string[] = [];
  for (let start = 0; start < ROWS; start += 1000) {
    const rows = Array.from({ length: Math.min(1000, ROWS - start) }, (_, i) => {
      const id = `bench${String(start + i).padStart(10, '0')}`;
      ids.push(id);
      return { id, title: `post ${start + i}`, views: (start + i) % 100 };
    });
    await db('posts').insert(rows);
  }

  const ours = express();
  ours.use('/', router);
  const baseline = express();
  const shape = (r: Record<string, unknown>) => ({
    collectionId: 'x',
    collectionName: 'posts',
    id: r.id,
    title: r.title,
    views: r.views,
    created: formatRecordDate(r.created as Date),
    updated: formatRecordDate(r.updated as Date),
  });
  baseline.get('/api/collections/posts/records', async (req, res) => {
    const rows = await db('posts').where('views', '>', 50).orderBy([{ column: 'created', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(30);
    res.json({ page: 1, perPage: 30, totalItems: -1, totalPages: -1, items: rows.map(shape) });
  });
  baseline.get('/api/collections/posts/records/:id', async (req, res) => {
    res.json(shape(await db('posts').where('id', req.params.id).first()));
  });
  const a = await listen(ours);
  const b = await listen(baseline);
  let n = 0;
  const scenarios: [string, (base: string) => string][] = [
    ['list: filter + sort + skipTotal', (base) => `${base}/api/collections/posts/records?filter=views%3E50&sort=-created&skipTotal=1`],
    ['view by id', (base) => `${base}/api/collections/posts/records/${ids[n++ % ids.length]}`],
  ];
  console.log(`recordbase bench: ${label}, ${ROWS} rows, best of 3 rounds of ${REQUESTS} sequential requests per scenario, node ${process.version}`);
  console.log('| scenario | recordbase req/s | baseline req/s | ratio |');
  console.log('|---|---|---|---|');
  for (const [name, url] of scenarios) {
    let base = 0;
    let rb = 0;
    for (let round = 0; round < 3; round++) {
      base = Math.max(base, await measure(() => url(b.base)));
      rb = Math.max(rb, await measure(() => url(a.base)));
    }
    console.log(`| ${name} | ${rb.toFixed(0)} | ${base.toFixed(0)} | ${(rb / base).toFixed(2)} |`);
  }
  console.log(`peak RSS: ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MiB`);
  a.server.close();
  b.server.close();
  await router.close();
  await cleanup();
}

await main();
