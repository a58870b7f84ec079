/**
 * `npm run bench:storage`: what S3 storage costs compared with disk storage, through the router,
 * in one run. An S3-protocol server (s3rver, as in the tests) runs on loopback in its own process,
 * so this measures recordbase's overhead of talking S3 (the SDK, HTTP, multipart), not a cloud.
 *
 * For each storage, one recordbase host app (storage-bench-app.js) is forked, and:
 * - upload: `POST` a record with a 1 MiB file (multipart), `--connections` (10) connections;
 * - download: `GET` that 1 MiB file, same connections;
 * - memory: 20 connections each uploading a 5 MiB file without pause, the app's RSS sampled
 *   every 250 ms: before, the highest during, after, and VmHWM.
 * Each cell: `--warmup` s (3) thrown away, then `--duration` s (10) measured, from a fresh
 * autocannon process (load.js). Postgres: BENCH_DATABASE_URL, schema `rb_bench_storage` (dropped
 * at the end). Flags as in bench/run.ts: --duration, --warmup, --connections, --wait-for-idle.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { startS3TestServer, type S3TestServer } from '../spec/support/s3-test-server.js';
import { benchSchemaPrefix } from './bench-data.js';
import { measureLoad, parsePositive, startServer, stopServer, type LoadSettings, type Measurement, type ServerProcess } from './bench-processes.js';
import { countJestProcesses, describeLoad, describeMachine, readMemory } from './machine.js';
import { buildMultipart } from './multipart.js';

const SCHEMA = `${benchSchemaPrefix()}storage`;
const RECORDS = '/backend/api/collections/uploads/records';
const MIB = 1024 * 1024;
const MEMORY_CONNECTIONS = 20;
type StorageKind = 'disk' | 's3';

interface Config extends LoadSettings {
  url: string;
  waitForIdle: boolean;
}

function readConfig(): Config {
  const { values } = parseArgs({
    options: {
      duration: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      'wait-for-idle': { type: 'boolean', default: false },
    },
  });
  return {
    url: process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    durationSeconds: parsePositive('--duration', values.duration ?? process.env.BENCH_DURATION, 10),
    warmupSeconds: parsePositive('--warmup', values.warmup ?? process.env.BENCH_WARMUP, 3),
    connections: Math.floor(parsePositive('--connections', values.connections ?? process.env.BENCH_CONNECTIONS, 10)),
    waitForIdle: values['wait-for-idle'] === true || process.env.BENCH_WAIT_FOR_IDLE === '1',
  };
}

async function resetSchema(url: string, create: boolean): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${SCHEMA}" CASCADE`);
    if (create) await client.query(`CREATE SCHEMA "${SCHEMA}"`);
  } finally {
    await client.end();
  }
}

async function waitUntilIdle(config: Config): Promise<void> {
  if (!config.waitForIdle) return;
  while (countJestProcesses() > 0) await new Promise((resolve) => setTimeout(resolve, 30_000));
}

/** Uploads one file through the app and returns the path of its download. */
async function uploadOnce(app: ServerProcess, data: Buffer): Promise<string> {
  const { body, contentType } = buildMultipart([
    { name: 'title', value: 'download source' },
    { name: 'cover', fileName: 'file.bin', contentType: 'application/octet-stream', data },
  ]);
  const response = await fetch(app.base + RECORDS, { method: 'POST', headers: { 'content-type': contentType }, body });
  const record = (await response.json()) as { id: string; cover: string };
  if (response.status !== 200) throw new Error(`upload answered ${response.status}: ${JSON.stringify(record)}`);
  const filePath = `/backend/api/files/uploads/${record.id}/${record.cover}`;
  const back = Buffer.from(await (await fetch(app.base + filePath)).arrayBuffer());
  if (!back.equals(data)) throw new Error(`${app.name}: the downloaded bytes differ from the uploaded ones`);
  return filePath;
}

interface MemoryReport {
  before: number;
  highest: number;
  after: number;
  peak: number;
  uploads: number;
  measurement: Measurement;
}

/** 20 connections uploading 5 MiB files for the whole window, RSS sampled every 250 ms. */
async function measureMemory(config: Config, app: ServerProcess, file: string): Promise<MemoryReport> {
  const before = readMemory(app.pid).rss;
  const samples: number[] = [];
  const sampler = setInterval(() => samples.push(readMemory(app.pid).rss), 250);
  let measurement: Measurement;
  try {
    measurement = await measureLoad({ server: app, spec: { kind: 'upload', path: RECORDS, file }, load: { ...config, connections: MEMORY_CONNECTIONS } });
  } finally {
    clearInterval(sampler);
  }
  const memory = readMemory(app.pid);
  return { before, highest: Math.max(...samples), after: memory.rss, peak: memory.peak, uploads: measurement.total, measurement };
}

const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : '-');
const flag = (m: Measurement) => (m.non2xx + m.errors + m.timeouts > 0 ? ` (!${m.non2xx} non-2xx, ${m.errors} errors, ${m.timeouts} timeouts)` : '');

async function main(): Promise<void> {
  const config = readConfig();
  console.log('recordbase storage bench: disk vs S3 (s3rver on loopback)');
  console.log(`machine: ${describeMachine()}; load ${describeLoad()}; jest processes: ${countJestProcesses()}`);
  const work = await mkdtemp(path.join(tmpdir(), 'rb-bench-storage-'));
  let s3: S3TestServer | undefined;
  const results = new Map<StorageKind, { upload: Measurement; download: Measurement; memory: MemoryReport }>();
  try {
    s3 = await startS3TestServer({ bucket: 'rb-bench' });
    await resetSchema(config.url, true);
    const oneMiB = path.join(work, 'one-mib.bin');
    const fiveMiB = path.join(work, 'five-mib.bin');
    writeFileSync(oneMiB, randomBytes(MIB));
    writeFileSync(fiveMiB, randomBytes(5 * MIB));
    for (const kind of ['disk', 's3'] as const) {
      const dataDir = path.join(work, kind);
      const env = {
        BENCH_DATABASE_URL: config.url,
        BENCH_SCHEMA: SCHEMA,
        BENCH_DATA_DIR: dataDir,
        BENCH_STORAGE: kind,
        BENCH_S3: JSON.stringify({ bucket: s3.bucket, prefix: 'bench', client: s3.clientSettings }),
      };
      const app = await startServer(kind, 'storage-bench-app.js', env);
      try {
        const downloadPath = await uploadOnce(app, randomBytes(MIB));
        await waitUntilIdle(config);
        const upload = await measureLoad({ server: app, spec: { kind: 'upload', path: RECORDS, file: oneMiB }, load: config });
        console.log(`  ${kind.padEnd(4)} upload 1 MiB    ${fmt(upload.requestsPerSecond)} req/s  p50 ${fmt(upload.p50)} ms  p99 ${fmt(upload.p99)} ms  CPU ${fmt(upload.cpuMsPerRequest, 2)} ms/req${flag(upload)}`);
        await waitUntilIdle(config);
        const download = await measureLoad({ server: app, spec: { kind: 'get', path: downloadPath }, load: config });
        console.log(`  ${kind.padEnd(4)} download 1 MiB  ${fmt(download.requestsPerSecond)} req/s  p50 ${fmt(download.p50)} ms  p99 ${fmt(download.p99)} ms  CPU ${fmt(download.cpuMsPerRequest, 2)} ms/req${flag(download)}`);
        await waitUntilIdle(config);
        const memory = await measureMemory(config, app, fiveMiB);
        console.log(`  ${kind.padEnd(4)} 20 x 5 MiB uploads: RSS ${fmt(memory.before)} MiB before, highest ${fmt(memory.highest)} during, ${fmt(memory.after)} after, VmHWM ${fmt(memory.peak)}; ${memory.uploads} uploads${flag(memory.measurement)}`);
        results.set(kind, { upload, download, memory });
      } finally {
        await stopServer(app);
      }
    }
  } finally {
    await s3?.close();
    await resetSchema(config.url, false).catch(() => undefined);
    await rm(work, { recursive: true, force: true });
  }

  const disk = results.get('disk')!;
  const s3Result = results.get('s3')!;
  console.log(`\n### Disk vs S3 (s3rver on loopback), ${config.connections} connections, ${config.warmupSeconds} s warm-up + ${config.durationSeconds} s per cell`);
  console.log('| scenario | disk req/s | p50 ms | p99 ms | CPU ms/req | S3 req/s | p50 ms | p99 ms | CPU ms/req | S3 / disk (req/s) |');
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  for (const [label, key] of [['upload 1 MiB (multipart create)', 'upload'], ['download 1 MiB', 'download']] as const) {
    const a = disk[key];
    const b = s3Result[key];
    console.log(
      `| ${label} | ${fmt(a.requestsPerSecond)} | ${fmt(a.p50)} | ${fmt(a.p99)} | ${fmt(a.cpuMsPerRequest, 2)} | ${fmt(b.requestsPerSecond)} | ${fmt(b.p50)} | ${fmt(b.p99)} | ${fmt(b.cpuMsPerRequest, 2)} | ${fmt(b.requestsPerSecond / a.requestsPerSecond, 2)} |`,
    );
  }
  console.log(`\n### RSS of the app under ${MEMORY_CONNECTIONS} concurrent 5 MiB uploads (MiB)`);
  console.log('| storage | before | highest during | after | VmHWM | uploads in the window | req/s |');
  console.log('|---|---|---|---|---|---|---|');
  for (const [kind, result] of results) {
    const m = result.memory;
    console.log(`| ${kind} | ${fmt(m.before)} | ${fmt(m.highest)} | ${fmt(m.after)} | ${fmt(m.peak)} | ${m.uploads} | ${fmt(m.measurement.requestsPerSecond, 1)} |`);
  }
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));
await main();
