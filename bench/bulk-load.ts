/**
 * `npm run bench:bulk`: loading many records, one create per request against batches of 50
 * (`POST /api/batch`), on the same app in the same run. Each round writes `--records` posts
 * (10,000) with `--connections` (10) requests in flight; single-create and batch rounds alternate
 * (`--rounds`, 3), the writes of each round are removed before the next, and the median of each
 * kind is reported with the ratio. Postgres: BENCH_DATABASE_URL, the bench's seeded schema
 * (bench/seed.ts) for the users the posts point at.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { benchSchema, seededUserId, USER_COUNT, WRITE_MARKER } from './bench-data.js';
import { parsePositive, startServer, stopServer, type ServerProcess } from './bench-processes.js';
import { describeLoad, describeMachine } from './machine.js';
import { buildCreateBody } from './scenarios.js';
import { ensureSeeded, removeBenchWrites } from './seed.js';

const RECORDS = '/backend/api/collections/posts/records';
const BATCH_SIZE = 50;

interface Config {
  url: string;
  records: number;
  connections: number;
  rounds: number;
}

function readConfig(): Config {
  const { values } = parseArgs({ options: { records: { type: 'string' }, connections: { type: 'string' }, rounds: { type: 'string' } } });
  return {
    url: process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    records: Math.floor(parsePositive('--records', values.records, 10_000)),
    connections: Math.floor(parsePositive('--connections', values.connections, 10)),
    rounds: Math.floor(parsePositive('--rounds', values.rounds, 3)),
  };
}

/** Runs `count` jobs with `connections` in flight; resolves with the seconds it took. */
async function runJobs(count: number, connections: number, job: (index: number) => Promise<void>): Promise<number> {
  let next = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (next < count) await job(next++);
    }),
  );
  return Number(process.hrtime.bigint() - started) / 1e9;
}

async function expectOk(response: Response, what: string): Promise<void> {
  if (response.status !== 200) throw new Error(`${what} answered ${response.status}: ${await response.text()}`);
  await response.arrayBuffer();
}

/** One post create per request. */
function loadSingly(app: ServerProcess, config: Config): Promise<number> {
  return runJobs(config.records, config.connections, async (i) => {
    const response = await fetch(app.base + RECORDS, { method: 'POST', headers: { 'content-type': 'application/json' }, body: buildCreateBody(seededUserId((i % USER_COUNT) + 1)) });
    await expectOk(response, 'a create');
  });
}

/** The same posts through batches of BATCH_SIZE creates, as plain JSON. */
function loadInBatches(app: ServerProcess, config: Config): Promise<number> {
  const batches = Math.ceil(config.records / BATCH_SIZE);
  return runJobs(batches, config.connections, async (b) => {
    const requests = Array.from({ length: Math.min(BATCH_SIZE, config.records - b * BATCH_SIZE) }, (_, k) => ({
      method: 'POST',
      url: '/api/collections/posts/records',
      body: JSON.parse(buildCreateBody(seededUserId(((b * BATCH_SIZE + k) % USER_COUNT) + 1))) as unknown,
    }));
    const response = await fetch(app.base + '/backend/api/batch', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ requests }) });
    await expectOk(response, 'a batch');
  });
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function main(): Promise<void> {
  const config = readConfig();
  const rows = 100_000;
  const schema = benchSchema(rows);
  const dataDir = await mkdtemp(path.join(tmpdir(), 'rb-bench-bulk-'));
  console.log(`recordbase bulk load: ${config.records} posts, single creates vs batches of ${BATCH_SIZE}, ${config.connections} in flight, ${config.rounds} rounds`);
  console.log(`machine: ${describeMachine()}; load ${describeLoad()}; marker ${WRITE_MARKER}`);
  await ensureSeeded({ url: config.url, rows, reseed: false, dataDir });
  const app = await startServer('recordbase', 'bench-app.js', { BENCH_DATABASE_URL: config.url, BENCH_SCHEMA: schema, BENCH_DATA_DIR: dataDir });
  const single: number[] = [];
  const batched: number[] = [];
  try {
    // A short pass of each first: the app's first batches pay for compiling code paths and warming pools.
    const warmup = { ...config, records: Math.min(1000, config.records) };
    await loadSingly(app, warmup);
    await loadInBatches(app, warmup);
    for (let round = 1; round <= config.rounds; round++) {
      for (const [kind, load, results] of [
        ['single', loadSingly, single],
        ['batch', loadInBatches, batched],
      ] as const) {
        await removeBenchWrites(config.url, schema);
        const seconds = await load(app, config);
        const perSecond = config.records / seconds;
        results.push(perSecond);
        console.log(`  round ${round} ${kind.padEnd(6)} ${seconds.toFixed(2)} s  ${perSecond.toFixed(0)} records/s`);
      }
    }
  } finally {
    await removeBenchWrites(config.url, schema);
    await stopServer(app);
    await rm(dataDir, { recursive: true, force: true });
  }
  const s = median(single);
  const b = median(batched);
  console.log(`\n| load | records/s (median of ${config.rounds}) |\n|---|---|\n| one create per request | ${s.toFixed(0)} |\n| batches of ${BATCH_SIZE} | ${b.toFixed(0)} |\n| ratio | ${(b / s).toFixed(2)} |`);
}

await main();
