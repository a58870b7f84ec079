/**
 * `npm run bench`: recordbase against a hand-written Express + pg server that runs the same SQL
 * and returns the same JSON (the stack's own limit), on Postgres, under load.
 *
 * - Data: 1,000 users and 100,000 posts (`--rows 1000000`, or `--rows 100000,1000000` for both in
 *   one run) in the schema `rb_bench_<rows>` of BENCH_DATABASE_URL, seeded once with
 *   generate_series and kept between runs (`--reseed` rebuilds it). Rows a run writes are
 *   deleted afterwards.
 * - Processes: the recordbase host app (bench-app.js), the baseline (baseline-app.js) and the load
 *   generator (load.js, autocannon) each run in a process of their own, forked from this one.
 * - Method: per scenario and server, `--warmup` s (default 3) of load that is thrown away, then
 *   `--duration` s (BENCH_DURATION, default 10) measured, with `--connections` (default 10)
 *   keep-alive connections. The two servers take turns on who goes first. With `--rounds N`
 *   (BENCH_ROUNDS) each cell is measured N times and the median round is reported.
 * - Before measuring, it checks that both servers answer with the same JSON, records the SQL each
 *   recordbase request sends (statements per request) and prints EXPLAIN (ANALYZE, BUFFERS) of
 *   the list and view queries.
 * - Writes: create, upload, update, delete and a batch of 10 creates. The update and delete cells
 *   work on posts prepared before each cell (bench/prepare-writes.ts; BENCH_DELETE_RATE: the
 *   deletes per second a cell prepares for); an update, delete or batch cell with any answer but
 *   2xx fails the run.
 *
 * Flags (and environment): --rows (BENCH_ROWS), --reseed, --duration (BENCH_DURATION), --warmup
 * (BENCH_WARMUP), --connections (BENCH_CONNECTIONS), --rounds (BENCH_ROUNDS), --wait-for-idle
 * (BENCH_WAIT_FOR_IDLE=1: before each cell, wait until no jest process runs on this shared
 * machine), --scenarios list,listTotal,listExpand,view,create,thumb,upload,update,delete,batch,aggregate,search (BENCH_SCENARIOS;
 * search only when named: its posts have a search index, in schemas `rb_bench_search_<rows>`),
 * --no-explain, --node-flags "--a --b" (BENCH_NODE_FLAGS: Node and V8 flags for both servers'
 * processes alike), --express-listen (BENCH_EXPRESS_LISTEN=1: both servers made as `app.listen`
 * makes them, instead of with createAppServer). `--scenarios realtime` runs bench/realtime-bench.ts (`--realtime-clients N`,
 * default 1,000). BENCH_PROFILE_DIR=dir makes both servers write a V8 CPU profile there.
 *
 * `--against <revision>` (BENCH_AGAINST): the baseline is recordbase itself at that git revision
 * (bench/build-revision.ts), so a change's cost is a ratio against the code before it;
 * `--app-env K=V,...` (BENCH_APP_ENV) gives the server under test an environment of its own
 * (`BENCH_RATE_LIMITS=1`: a rate limit that never trips).
 *
 * `--engine embedded` (BENCH_ENGINE=embedded) measures the embedded engine instead: the same
 * app on PGlite in a worker thread (recordbase's engine) against the same app on PGlite on the
 * main thread (knex-pglite, the engine before it), each on its own copy of one seeded folder,
 * scenarios 1-5 and 8-10 (default 10,000 posts).
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import type { CapturedQuery } from './bench-app.js';
import { benchSchema, POSTS_ID, seededPostId, seededUserId, THUMB, WRITE_MARKER } from './bench-data.js';
import { measureLoad, parsePositive, startServer, stopServer, waitForMessage, type Measurement, type ServerProcess } from './bench-processes.js';
import type { LoadSummary } from './load.js';
import { countJestProcesses, describeLoad, describeMachine, readMemory, readThreadCount, resetPeakMemory } from './machine.js';
import { buildMultipart, type MultipartBody } from './multipart.js';
import { buildRevision } from './build-revision.js';
import { makePng } from './png.js';
import { createWritePreparer, type WritePreparer } from './prepare-writes.js';
import { runRealtimeBench } from './realtime-bench.js';
import { buildBatchBody, buildCreateBody, buildScenarios, buildUpdateBody, LIST_FILTER, LIST_SORT, type LoadSpec, type Scenario, type ScenarioKey } from './scenarios.js';
import { ensureEmbeddedSeeded, ensureSeeded, removeBenchWrites } from './seed.js';

interface BenchConfig {
  url: string;
  rows: number[];
  reseed: boolean;
  durationSeconds: number;
  warmupSeconds: number;
  connections: number;
  rounds: number;
  /** Before each measured cell, wait until no jest process runs (the machine is shared). */
  waitForIdle: boolean;
  scenarios: Set<ScenarioKey> | undefined;
  explain: boolean;
  /** `postgres`: recordbase against the hand-written baseline; `embedded`: the worker engine against in-thread PGlite. */
  engine: 'postgres' | 'embedded';
  /**
   * `--fixed-rate F` (0 < F ≤ 1): after the table, each scenario again with both servers loaded at
   * once, each at F times the slower one's rate in the table; CPU per request compared.
   */
  fixedRate: number | undefined;
  /** `--node-flags`: Node and V8 flags given to both servers' processes alike (`--no-memory-reducer`, `--max-semi-space-size=16`). */
  nodeFlags: string[];
  /** `--against <revision>`: the baseline is recordbase at that git revision (bench/build-revision.ts), not the hand-written server. */
  against: string | undefined;
  /** `--app-env K=V,K=V`: environment given to the server under test only (`BENCH_RATE_LIMITS=1`). */
  appEnv: Record<string, string>;
}

/** `--realtime-clients`: streams the `realtime` scenario holds (bench/realtime-bench.ts). */
let realtimeClients = 1000;

/** Data dirs of the size being measured; removed on exit too, in case the run is interrupted. */
const dataDirs = new Set<string>();

function readConfig(): BenchConfig {
  const { values } = parseArgs({
    options: {
      rows: { type: 'string' },
      reseed: { type: 'boolean', default: false },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      rounds: { type: 'string' },
      'wait-for-idle': { type: 'boolean', default: false },
      scenarios: { type: 'string' },
      'no-explain': { type: 'boolean', default: false },
      engine: { type: 'string' },
      'realtime-clients': { type: 'string' },
      'fixed-rate': { type: 'string' },
      'node-flags': { type: 'string' },
      'express-listen': { type: 'boolean', default: false },
      against: { type: 'string' },
      'app-env': { type: 'string' },
    },
  });
  // Read by serveBenchApp in every server the run forks (they inherit the environment).
  if (values['express-listen']) process.env.BENCH_EXPRESS_LISTEN = '1';
  realtimeClients = Math.floor(parsePositive('--realtime-clients', values['realtime-clients'], 1000));
  const engine = values.engine ?? process.env.BENCH_ENGINE ?? 'postgres';
  if (engine !== 'postgres' && engine !== 'embedded') throw new Error(`--engine must be postgres or embedded, got "${engine}"`);
  const rows = (values.rows ?? process.env.BENCH_ROWS ?? (engine === 'embedded' ? '10000' : '100000')).split(',').map((r) => parsePositive('--rows', r.trim().replace(/_/g, ''), 100000));
  const scenarios = values.scenarios ?? process.env.BENCH_SCENARIOS;
  // The search cell needs posts with a search index, in schemas of their own (bench-data.ts searchIndexed).
  if (scenarios?.split(',').some((s) => s.trim() === 'search')) process.env.BENCH_SEARCH_INDEX = '1';
  return {
    url: process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    rows: rows.map(Math.floor),
    reseed: values.reseed ?? false,
    durationSeconds: parsePositive('--duration', values.duration ?? process.env.BENCH_DURATION, 10),
    warmupSeconds: parsePositive('--warmup', values.warmup ?? process.env.BENCH_WARMUP, 3),
    connections: Math.floor(parsePositive('--connections', values.connections ?? process.env.BENCH_CONNECTIONS, 10)),
    rounds: Math.floor(parsePositive('--rounds', values.rounds ?? process.env.BENCH_ROUNDS, 1)),
    waitForIdle: values['wait-for-idle'] === true || process.env.BENCH_WAIT_FOR_IDLE === '1',
    scenarios: scenarios ? new Set(scenarios.split(',').map((s) => s.trim() as ScenarioKey)) : undefined,
    explain: !values['no-explain'],
    engine,
    fixedRate: values['fixed-rate'] === undefined ? undefined : parseFraction('--fixed-rate', values['fixed-rate']),
    nodeFlags: parseNodeFlags(values['node-flags'] ?? process.env.BENCH_NODE_FLAGS ?? ''),
    against: values.against ?? process.env.BENCH_AGAINST,
    appEnv: parseAppEnv(values['app-env'] ?? process.env.BENCH_APP_ENV ?? ''),
  };
}

/** `K=V,K=V` → an environment object; an entry without `=` is an error before any server starts. */
function parseAppEnv(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of text.split(',').map((e) => e.trim()).filter(Boolean)) {
    const at = entry.indexOf('=');
    if (at <= 0) throw new Error(`--app-env takes K=V entries separated by commas, got "${entry}"`);
    env[entry.slice(0, at)] = entry.slice(at + 1);
  }
  return env;
}

/**
 * Runs one scenario against one server in a fresh load-generator process, with `spec` (the
 * scenario's, on the posts prepared for the cell), and fails on an update, delete or batch cell
 * that answered anything but 2xx.
 */
async function measure(options: { config: BenchConfig; server: ServerProcess; scenario: Scenario; spec: LoadSpec; writes: WritePreparer }): Promise<Measurement> {
  const { config, server, scenario, spec, writes } = options;
  const measured = await measureLoad({ server, spec, load: config });
  writes.checkCell(scenario, server, measured);
  return measured;
}

/** The deletes per second a delete cell prepares posts for (BENCH_DELETE_RATE; more once a server has been faster). */
function readDeleteRate(engine: BenchConfig['engine']): number {
  return parsePositive('BENCH_DELETE_RATE', process.env.BENCH_DELETE_RATE, engine === 'embedded' ? 5000 : 15000);
}

/** `RunSql` through a bench-app process (its `sql` message): the statement runs on that app's own database. */
async function runSqlThrough(app: ServerProcess, sql: string, bindings: unknown[]): Promise<Record<string, unknown>[]> {
  const reply = waitForMessage<{ type: 'sql-result'; rows?: Record<string, unknown>[]; error?: string }>(app.child, 'sql-result', 300_000);
  app.child.send({ type: 'sql', sql, bindings });
  const { rows, error } = await reply;
  if (error !== undefined) throw new Error(`${app.name}: ${error}\n  in ${sql}`);
  return rows ?? [];
}

async function request(url: string, init?: RequestInit): Promise<{ status: number; headers: Headers; text: string }> {
  const res = await fetch(url, init);
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** Sends one request; throws unless it answered `status` (200, or 204 for a delete). */
async function expectOk(what: string, url: string, init?: RequestInit, status = init?.method === 'DELETE' ? 204 : 200): Promise<{ headers: Headers; text: string }> {
  const res = await request(url, init);
  if (res.status !== status) throw new Error(`${what}: ${url} answered ${res.status} (not ${status}): ${res.text.slice(0, 300)}`);
  return res;
}

/** Sends one request to the recordbase app while it records SQL; returns the statements it sent. */
async function captureQueries(app: ServerProcess, send: () => Promise<unknown>): Promise<CapturedQuery[]> {
  const capturing = waitForMessage(app.child, 'capturing', 10_000);
  app.child.send({ type: 'capture' });
  await capturing;
  await send();
  const reply = waitForMessage<{ type: 'captured'; queries: CapturedQuery[] }>(app.child, 'captured', 10_000);
  app.child.send({ type: 'captured' });
  return (await reply).queries;
}

/** The request each scenario sends, as fetch arguments (for the checks and the SQL capture), on a post prepared for it (update, delete). */
async function sampleRequest(scenario: Scenario, server: ServerProcess, uploadBody: MultipartBody, writes: WritePreparer): Promise<[string, RequestInit | undefined]> {
  const spec = scenario.spec;
  const base = server.base;
  switch (spec.kind) {
    case 'get':
      return [base + spec.path, undefined];
    case 'view':
      return [base + spec.pathPrefix + seededPostId(Math.max(1, Math.floor(spec.rows / 2))), undefined];
    case 'create':
      return [base + spec.path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: buildCreateBody(seededUserId(7)) }];
    case 'upload':
      return [base + spec.path, { method: 'POST', headers: { 'content-type': uploadBody.contentType }, body: uploadBody.body }];
    case 'update':
      return [base + spec.pathPrefix + (await writes.prepareSample('update', server)), { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: buildUpdateBody(7) }];
    case 'delete':
      return [base + spec.pathPrefix + (await writes.prepareSample('delete', server)), { method: 'DELETE' }];
    case 'batch': {
      const authors = Array.from({ length: spec.size }, (_, k) => seededUserId(k + 1));
      return [base + spec.path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: buildBatchBody(authors) }];
    }
  }
}

/** A record's keys, in order: what two answers to the same write must share. */
const recordKeys = (record: unknown) => Object.keys(record as object).join(',');

/** The shape of a batch's answer: each request's keys, status and record's keys. */
function batchShape(text: string): string {
  const answers = JSON.parse(text) as { status: number; body: unknown }[];
  if (!Array.isArray(answers)) throw new Error(`batch: the answer is not an array: ${text.slice(0, 300)}`);
  return answers.map((a) => `${recordKeys(a)} ${a.status}: ${a.body === null ? 'null' : recordKeys(a.body)}`).join('; ');
}

const IGNORED_HEADERS = new Set(['date', 'connection', 'keep-alive', 'etag']);

/**
 * Both servers must answer alike, or the comparison means nothing: the same JSON for reads, the
 * same keys for writes, the same headers for the download.
 */
async function checkEquivalence(scenarios: Scenario[], app: ServerProcess, baseline: ServerProcess, uploadBody: MultipartBody, writes: WritePreparer): Promise<string[]> {
  const notes: string[] = [];
  for (const scenario of scenarios) {
    const [rbUrl, rbInit] = await sampleRequest(scenario, app, uploadBody, writes);
    const [blUrl, blInit] = await sampleRequest(scenario, baseline, uploadBody, writes);
    const a = await expectOk(`recordbase ${scenario.key}`, rbUrl, rbInit);
    const b = await expectOk(`baseline ${scenario.key}`, blUrl, blInit);
    if (scenario.key === 'thumb') {
      if (a.text !== b.text) throw new Error('thumbnail: the two servers sent different bytes');
      const names = (h: Headers) => [...h.keys()].filter((k) => !IGNORED_HEADERS.has(k));
      for (const name of new Set([...names(a.headers), ...names(b.headers)])) {
        if (a.headers.get(name) !== b.headers.get(name)) notes.push(`thumbnail header ${name}: recordbase "${a.headers.get(name)}", baseline "${b.headers.get(name)}"`);
      }
    } else if (scenario.key === 'create' || scenario.key === 'upload' || scenario.key === 'update') {
      const keys = (text: string) => recordKeys(JSON.parse(text));
      if (keys(a.text) !== keys(b.text)) throw new Error(`${scenario.key}: different record shapes:\n  ${keys(a.text)}\n  ${keys(b.text)}`);
      if (scenario.key === 'update') {
        const changed = (text: string) => JSON.stringify((({ title, views }) => ({ title, views }))(JSON.parse(text) as Record<string, unknown>));
        if (changed(a.text) !== changed(b.text)) throw new Error(`update: different values: ${changed(a.text)} against ${changed(b.text)}`);
      }
    } else if (scenario.key === 'batch') {
      if (batchShape(a.text) !== batchShape(b.text)) throw new Error(`batch: different answers:\n  ${batchShape(a.text)}\n  ${batchShape(b.text)}`);
    } else if (a.text !== b.text) {
      throw new Error(`${scenario.key}: the two servers answered differently:\n  recordbase ${a.text.slice(0, 400)}\n  baseline   ${b.text.slice(0, 400)}`);
    }
  }
  return notes;
}

/** EXPLAIN (ANALYZE, BUFFERS) of each captured SELECT, run twice so the printed one has warm caches. */
async function explainQueries(url: string, schema: string, queries: { scenario: string; query: CapturedQuery }[]): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`SET search_path TO "${schema}"`);
    for (const { scenario, query } of queries) {
      if (!/^\s*select/i.test(query.sql)) continue;
      const sql = `EXPLAIN (ANALYZE, BUFFERS) ${query.sql}`;
      await client.query(sql, query.bindings);
      const plan = await client.query(sql, query.bindings);
      console.log(`\n-- ${scenario}: ${query.sql}\n-- bindings: ${JSON.stringify(query.bindings)}`);
      for (const row of plan.rows) console.log(`   ${row['QUERY PLAN']}`);
    }
  } finally {
    await client.end();
  }
}

/** Waits (checking every 30 s) until no jest process runs: another engineer's test suite would pollute the numbers. */
async function waitUntilNoJest(): Promise<void> {
  let announced = false;
  while (countJestProcesses() > 0) {
    if (!announced) console.log(`  waiting for the jest run(s) to finish (${new Date().toISOString()})`);
    announced = true;
    await new Promise((resolve) => setTimeout(resolve, 30_000));
  }
  if (announced) await new Promise((resolve) => setTimeout(resolve, 10_000)); // let the machine settle
}

const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : '-');

interface Row {
  scenario: Scenario;
  recordbase: Measurement;
  baseline: Measurement;
}

function flag(summary: LoadSummary): string {
  const bad = summary.non2xx + summary.errors + summary.timeouts;
  return bad > 0 ? ` (!${summary.non2xx} non-2xx, ${summary.errors} errors, ${summary.timeouts} timeouts)` : '';
}

function printTable(rows: Row[], statements: Map<ScenarioKey, string[]>, names: [string, string]): void {
  console.log(`\n| # | scenario | SQL per request (${names[0]}) | ${names[0]} req/s | p50 ms | p99 ms | CPU ms/req | ${names[1]} req/s | p50 ms | p99 ms | CPU ms/req | ratio | Postgres CPU ms/req, ${names[0]} / ${names[1]} |`);
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const { scenario, recordbase: a, baseline: b } of rows) {
    const sql = statements.get(scenario.key);
    console.log(
      `| ${scenario.number} | ${scenario.label} | ${sql ? `${sql.length}: ${sql.join(', ')}` : '-'} | ${fmt(a.requestsPerSecond)}${flag(a)} | ${fmt(a.p50)} | ${fmt(a.p99)} | ${fmt(a.cpuMsPerRequest, 2)} | ` +
        `${fmt(b.requestsPerSecond)}${flag(b)} | ${fmt(b.p50)} | ${fmt(b.p99)} | ${fmt(b.cpuMsPerRequest, 2)} | ${fmt(a.requestsPerSecond / b.requestsPerSecond, 2)} | ${fmt(a.databaseMsPerRequest, 2)} / ${fmt(b.databaseMsPerRequest, 2)} |`,
    );
  }
}

/** Peak RSS of each scenario's cells (the highest of its rounds), side by side. */
function printCellPeaks(scenarios: Scenario[], peaks: Map<ScenarioKey, Map<ServerProcess, number>>, [app, baseline]: [ServerProcess, ServerProcess]): void {
  console.log(`\n| # | scenario | ${app.name} peak RSS MiB | ${baseline.name} peak RSS MiB | ratio |`);
  console.log('|---|---|---|---|---|');
  for (const scenario of scenarios) {
    const a = peaks.get(scenario.key)?.get(app) ?? NaN;
    const b = peaks.get(scenario.key)?.get(baseline) ?? NaN;
    console.log(`| ${scenario.number} | ${scenario.label} | ${fmt(a)} | ${fmt(b)} | ${fmt(a / b, 2)} |`);
  }
}

/** A statement's kind, for the "SQL per request" column: `BEGIN`, `select posts`, `insert posts`... */
function describeStatement(sql: string): string {
  const s = sql.trim();
  if (/^(BEGIN|COMMIT|ROLLBACK)/i.test(s)) return s.replace(/;$/, '').toUpperCase();
  const verb = s.split(/\s+/)[0]!.toLowerCase();
  const table = /(?:from|into|update)\s+"?([a-z_]+)"?/i.exec(s)?.[1] ?? '?';
  const what = /count\(\*\)/i.test(s) ? 'count' : verb;
  return `${what} ${table}`;
}

interface SizeResult {
  rows: number;
  table: Row[];
}

/**
 * Waits (up to 45 s) for the thumbnail worker that the preparation started in recordbase's
 * process to stop (it does 30 s after its last job), so that its memory counts in no scenario's
 * peak: none of the scenarios renders (the thumbnail one downloads the cached file). The
 * start-up and preparation peak still shows it.
 */
async function waitForPreparationWorker(app: ServerProcess): Promise<void> {
  const withWorker = readThreadCount(app.pid);
  const started = Date.now();
  while (readThreadCount(app.pid) >= withWorker && Date.now() - started < 45_000) await new Promise((resolve) => setTimeout(resolve, 500));
  const left = readThreadCount(app.pid) >= withWorker;
  console.log(`${left ? 'still running after' : 'waited'} ${((Date.now() - started) / 1000).toFixed(0)} s for the thumbnail worker the preparation started to stop`);
}

/**
 * What scenarios 6 and 7 need: an image uploaded through recordbase with its thumbnail made once
 * (where the baseline will look for it), and the 1 MiB upload, on disk and as a multipart body.
 */
async function prepareFiles(app: ServerProcess, dataDir: string): Promise<{ thumbRecordId: string; thumbPath: string; uploadFile: string; uploadBody: MultipartBody }> {
  const image = buildMultipart([
    { name: 'title', value: `${WRITE_MARKER} image` },
    { name: 'author', value: seededUserId(1) },
    { name: 'cover', fileName: 'cover.png', contentType: 'image/png', data: makePng(800, 600) },
  ]);
  const created = JSON.parse(
    (await expectOk('image upload', `${app.base}/backend/api/collections/posts/records`, { method: 'POST', headers: { 'content-type': image.contentType }, body: image.body })).text,
  ) as { id: string; cover: string };
  const thumbPath = `/backend/api/files/posts/${created.id}/${created.cover}?thumb=${THUMB}`;
  await expectOk('thumbnail', app.base + thumbPath);
  const thumbFile = path.join(dataDir, 'storage', POSTS_ID, created.id, `thumbs_${created.cover}`, `${THUMB}_${created.cover}`);
  if (!existsSync(thumbFile)) throw new Error(`the thumbnail is not where the baseline looks for it: ${thumbFile}`);

  const uploadFile = path.join(dataDir, 'upload.png');
  writeFileSync(uploadFile, makePng(591, 591, { noise: true }));
  const uploadBody = buildMultipart([
    { name: 'title', value: `${WRITE_MARKER} upload` },
    { name: 'author', value: seededUserId(1) },
    { name: 'cover', fileName: 'upload.png', contentType: 'image/png', data: readFileSync(uploadFile) },
  ]);
  return { thumbRecordId: created.id, thumbPath, uploadFile, uploadBody };
}

/**
 * Measures every scenario on both servers (alternating who goes first), prints the per-cell lines
 * and the result table, and returns the table. `app` is the server under test, `baseline` the one
 * it is compared with (the ratio is app / baseline).
 */
async function measureScenarios(options: {
  config: BenchConfig;
  rows: number;
  app: ServerProcess;
  baseline: ServerProcess;
  scenarios: Scenario[];
  statements: Map<ScenarioKey, string[]>;
  /** Prepares the update and delete cells' posts; fails an update, delete or batch cell that answered anything but 2xx. */
  writes: WritePreparer;
  /** Removes the rows the cells wrote (and re-analyses), so that `--fixed-rate` lists read the seeded table as the cells did; the thumbnail scenario's image stays. */
  removeWrites?: () => Promise<unknown>;
}): Promise<Row[]> {
  const { config, rows, app, baseline, scenarios, statements, writes } = options;
  console.log(`\nmeasuring: ${config.connections} connections, ${config.warmupSeconds} s warm-up + ${config.durationSeconds} s per scenario and server; jest processes running: ${countJestProcesses()}, load ${describeLoad()}`);
  const table: Row[] = [];
  const memoryNotes: string[] = [];
  // Peak RSS: each cell's own (VmHWM reset before it), and the whole run's, kept here because the
  // resets clear the kernel's; it starts with the peak of start-up and preparation.
  const startPeak = new Map([app, baseline].map((server) => [server, readMemory(server.pid).peak]));
  const runPeak = new Map(startPeak);
  const raiseRunPeak = (server: ServerProcess, mib: number) => runPeak.set(server, Math.max(runPeak.get(server)!, mib));
  const cellPeaks = new Map<ScenarioKey, Map<ServerProcess, number>>();
  let peaksPerCell = true;
  let busyCells = 0;
  for (const [i, scenario] of scenarios.entries()) {
    const results = new Map<ServerProcess, Measurement[]>([
      [app, []],
      [baseline, []],
    ]);
    for (let round = 0; round < config.rounds; round++) {
      // Who goes first alternates by scenario and by round, so neither server always follows the other.
      const order = (i + round) % 2 === 0 ? [app, baseline] : [baseline, app];
      for (const server of order) {
        if (config.waitForIdle) await waitUntilNoJest();
        // Uploads leave gigabytes of dirty pages, and an fsync (recordbase flushes every file) may have
        // to wait for the other server's unflushed writes: each upload cell starts with none.
        if (scenario.key === 'upload') execFileSync('sync');
        // Before the peak's reset: the preparation runs through recordbase's process on Postgres.
        const spec = await writes.prepareCell(scenario, server, config);
        const jestAtStart = countJestProcesses();
        const before = readMemory(server.pid);
        raiseRunPeak(server, before.peak);
        peaksPerCell = resetPeakMemory(server.pid) && peaksPerCell;
        // RSS once a second while under load: flat for a streaming upload, growing if bodies were buffered.
        const samples: number[] = [];
        const sampler = setInterval(() => samples.push(readMemory(server.pid).rss), 1000);
        let r: Measurement;
        try {
          r = await measure({ config, server, scenario, spec, writes });
        } finally {
          clearInterval(sampler);
        }
        results.get(server)!.push(r);
        const jest = Math.max(jestAtStart, countJestProcesses());
        if (jest > 0) busyCells++;
        const after = readMemory(server.pid);
        raiseRunPeak(server, after.peak);
        if (!cellPeaks.has(scenario.key)) cellPeaks.set(scenario.key, new Map());
        const peaks = cellPeaks.get(scenario.key)!;
        peaks.set(server, Math.max(peaks.get(server) ?? 0, after.peak));
        if (scenario.key === 'upload') {
          const during = samples.slice(Math.ceil(config.warmupSeconds));
          memoryNotes.push(
            `${server.name}, upload scenario${config.rounds > 1 ? ` round ${round + 1}` : ''}: RSS ${fmt(before.rss)} MiB before; ` +
              `during the measured window (1/s) ${during.map((n) => fmt(n)).join(' ')} MiB; ${fmt(after.rss)} MiB after; peak in this cell ${fmt(after.peak)} MiB`,
          );
        }
        console.log(
          `  ${scenario.number} ${scenario.key.padEnd(10)} ${server.name.padEnd(10)} ${fmt(r.requestsPerSecond).padStart(6)} req/s  p50 ${fmt(r.p50)} ms  p99 ${fmt(r.p99)} ms  ` +
            `server CPU ${fmt(r.cpuMsPerRequest, 2)} ms/req (sys ${fmt(r.systemMsPerRequest, 2)})  Postgres CPU ${fmt(r.databaseMsPerRequest, 2)} ms/req  (${r.total} requests${flag(r)})${jest > 0 ? `  [jest running: ${jest}]` : ''}  load ${describeLoad()}`,
        );
      }
    }
    // The median round of each: on this shared VM a round can be far off in either direction, and
    // the best round would reward whichever side got lucky.
    const byRate = (m: Measurement) => m.requestsPerSecond;
    table.push({ scenario, recordbase: median(results.get(app)!, byRate), baseline: median(results.get(baseline)!, byRate) });
  }

  console.log(
    `\n### Results: ${rows.toLocaleString('en')} posts, ${config.connections} connections, ${config.warmupSeconds} s warm-up + ${config.durationSeconds} s per cell` +
      (config.rounds > 1 ? `, median of ${config.rounds} rounds` : ''),
  );
  printTable(table, statements, [app.name, baseline.name]);
  console.log('');
  for (const server of [app, baseline]) {
    raiseRunPeak(server, readMemory(server.pid).peak);
    console.log(`peak RSS (VmHWM) of the ${server.name} process: ${fmt(runPeak.get(server)!)} MiB (start-up and preparation: ${fmt(startPeak.get(server)!)} MiB)`);
  }
  if (peaksPerCell) printCellPeaks(scenarios, cellPeaks, [app, baseline]);
  else console.log('(peak RSS per cell unavailable: /proc/<pid>/clear_refs refused)');
  for (const note of memoryNotes) console.log(note);
  console.log(`cells measured while a jest process ran (at their start or end): ${busyCells} of ${scenarios.length * 2 * config.rounds}`);
  if (config.fixedRate !== undefined) {
    await options.removeWrites?.();
    await measureAtFixedRate({ config, app, baseline, table, fraction: config.fixedRate, writes });
  }
  return table;
}

/** The middle item of `list` by `key` (the lower middle for an even count). */
function median<T>(list: readonly T[], key: (item: T) => number): T {
  return [...list].sort((a, b) => key(a) - key(b))[Math.floor((list.length - 1) / 2)]!;
}

/** `--node-flags "--a --b=1"`: whitespace-separated flags, each starting with `--`; throws on anything else. */
function parseNodeFlags(raw: string): string[] {
  const flags = raw.split(/\s+/).filter((flag) => flag !== '');
  for (const flag of flags) if (!flag.startsWith('--')) throw new Error(`--node-flags takes flags that start with "--", got "${flag}"`);
  return flags;
}

/** A number in (0, 1]; throws on anything else. */
function parseFraction(name: string, raw: string): number {
  const n = Number(raw);
  if (!(n > 0 && n <= 1)) throw new Error(`${name} must be a fraction in (0, 1], got "${raw}"`);
  return n;
}

/**
 * `--fixed-rate F`: each scenario of the table again, with both servers loaded at the same time,
 * each at F times the slower server's rate in the table, `--rounds` times; the median CPU per
 * request of each, and their ratio. Neither server is saturated and both see the same moments of
 * the machine, so on a small shared machine this ratio moves far less between runs than the ratio
 * of saturated rates, which depends on how the cores are split between a server, Postgres and the
 * load generator.
 */
async function measureAtFixedRate(options: { config: BenchConfig; app: ServerProcess; baseline: ServerProcess; table: Row[]; fraction: number; writes: WritePreparer }): Promise<void> {
  const { config, app, baseline, table, fraction, writes } = options;
  const lines: string[] = [];
  for (const { scenario, recordbase, baseline: other } of table) {
    const rate = Math.max(1, Math.round(fraction * Math.min(recordbase.requestsPerSecond, other.requestsPerSecond)));
    const servers = [app, baseline];
    const cpu = servers.map((): number[] => []);
    let short = '';
    for (let round = 0; round < config.rounds; round++) {
      // Each server's posts are prepared before either is loaded.
      const specs: LoadSpec[] = [];
      for (const server of servers) specs.push(await writes.prepareCell(scenario, server, { ...config, rate }));
      const results = await Promise.all(servers.map((server, i) => measureLoad({ server, spec: specs[i]!, load: { ...config, rate } })));
      results.forEach((r, i) => writes.checkCell(scenario, servers[i]!, r));
      results.forEach((r, i) => {
        cpu[i]!.push(r.cpuMsPerRequest);
        // A server that could not keep up makes the comparison unfair: say so.
        if (r.requestsPerSecond < rate * 0.95 || r.non2xx > 0 || r.errors > 0) short = ` (${servers[i]!.name}: ${fmt(r.requestsPerSecond)} req/s${flag(r)})`;
      });
    }
    const [a, b] = cpu.map((list) => median(list, Number)) as [number, number];
    lines.push(`| ${scenario.number} | ${scenario.label} | ${rate} | ${fmt(a, 3)} | ${fmt(b, 3)} | ${fmt(a / b, 2)}${short} |`);
  }
  console.log(`\n### CPU per request at a fixed rate (${fraction} of the slower server's), both servers loaded at once (${config.warmupSeconds} s warm-up + ${config.durationSeconds} s, median of ${config.rounds})`);
  console.log(`\n| # | scenario | req/s each | ${app.name} CPU ms/req | ${baseline.name} CPU ms/req | ratio |`);
  console.log('|---|---|---|---|---|---|');
  for (const line of lines) console.log(line);
}

async function benchOneSize(config: BenchConfig, rows: number): Promise<SizeResult> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'rb-bench-'));
  dataDirs.add(dataDir);
  const schema = benchSchema(rows);
  const seedReport = await ensureSeeded({ url: config.url, rows, reseed: config.reseed, dataDir });
  console.log(`\n## ${rows.toLocaleString('en')} posts (schema ${schema}): ${seedReport.seeded ? `seeded in ${seedReport.seconds.toFixed(1)} s` : `seed reused (checked in ${seedReport.seconds.toFixed(1)} s)`}`);
  const env = { BENCH_DATABASE_URL: config.url, BENCH_SCHEMA: schema, BENCH_DATA_DIR: dataDir };
  let app: ServerProcess | undefined;
  let baseline: ServerProcess | undefined;
  try {
    app = await startServer('recordbase', 'bench-app.js', { ...env, ...config.appEnv }, config.nodeFlags);
    if (config.against) {
      const { commit, benchApp } = buildRevision(config.against);
      baseline = await startServer(`recordbase@${commit.slice(0, 7)}`, benchApp, env, config.nodeFlags);
    } else {
      baseline = await startServer('baseline', 'baseline-app.js', env, config.nodeFlags);
    }

    const { thumbRecordId, thumbPath, uploadFile, uploadBody } = await prepareFiles(app, dataDir);
    const all = buildScenarios({ rows, thumbPath, uploadFile });
    const scenarios = all.filter((s) => isSelected(config, s.key));
    // Both servers share the schema: every post is prepared through recordbase's pool.
    const recordbase = app;
    const writes = createWritePreparer({ runSql: (_server, sql, bindings) => runSqlThrough(recordbase, sql, bindings), deleteRate: readDeleteRate(config.engine) });

    for (const note of await checkEquivalence(scenarios, app, baseline, uploadBody, writes)) console.log(`note: ${note}`);
    console.log(`checked: both servers answer the ${scenarios.length} scenarios alike (list filter "${LIST_FILTER}", sort "${LIST_SORT}"; upload ${(uploadBody.body.length / 2 ** 20).toFixed(2)} MiB)`);

    const statements = new Map<ScenarioKey, string[]>();
    const explained: { scenario: string; query: CapturedQuery }[] = [];
    for (const scenario of scenarios) {
      const [url, init] = await sampleRequest(scenario, app, uploadBody, writes);
      const queries = await captureQueries(app, () => expectOk(`capture ${scenario.key}`, url, init));
      statements.set(scenario.key, queries.map((q) => describeStatement(q.sql)));
      if (scenario.number <= 4) for (const query of queries) explained.push({ scenario: `${scenario.number} ${scenario.label}`, query });
    }
    if (config.explain && explained.length > 0) {
      console.log(`\nEXPLAIN (ANALYZE, BUFFERS) of the SQL recordbase sent for scenarios 1-4 (${rows} posts):`);
      await explainQueries(config.url, schema, explained);
    }

    await waitForPreparationWorker(app);
    const table = await measureScenarios({ config, rows, app, baseline, scenarios, statements, writes, removeWrites: () => removeBenchWrites(config.url, schema, [thumbRecordId]) });
    return { rows, table };
  } finally {
    if (app) await stopServer(app);
    if (baseline) await stopServer(baseline);
    const removed = await removeBenchWrites(config.url, schema);
    await rm(dataDir, { recursive: true, force: true });
    dataDirs.delete(dataDir);
    console.log(`cleanup: removed ${removed} rows written by the run and ${dataDir}`);
  }
}

/** The scenarios of the embedded comparison: the database-bound ones (no thumbnail, no upload). */
const EMBEDDED_SCENARIOS = new Set<ScenarioKey>(['list', 'listTotal', 'listExpand', 'view', 'create', 'update', 'delete', 'batch', 'search', 'aggregate']);

/** Whether a cell runs: the ones `--scenarios` names, or without it every cell but search (which needs its own schema: name it). */
function isSelected(config: { scenarios: Set<ScenarioKey> | undefined }, key: ScenarioKey): boolean {
  return config.scenarios ? config.scenarios.has(key) : key !== 'search';
}

/**
 * The embedded engine at one size: the same host app on PGlite in a worker thread (`worker`,
 * recordbase's engine) and on PGlite on the main thread (`in-thread`, through knex-pglite), each
 * on its own copy of one seeded folder, measured in the same run. The ratio is worker / in-thread.
 */
async function benchEmbeddedSize(config: BenchConfig, rows: number): Promise<SizeResult> {
  const seedReport = await ensureEmbeddedSeeded({ rows, reseed: config.reseed });
  console.log(`\n## embedded engine, ${rows.toLocaleString('en')} posts (${seedReport.directory}): ${seedReport.seeded ? `seeded in ${seedReport.seconds.toFixed(1)} s` : `seed reused (checked in ${seedReport.seconds.toFixed(1)} s)`}`);
  const dataDir = await mkdtemp(path.join(tmpdir(), 'rb-bench-'));
  dataDirs.add(dataDir);
  const servers: ServerProcess[] = [];
  try {
    const start = async (name: string, engine: string) => {
      const root = path.join(dataDir, name);
      cpSync(seedReport.directory, path.join(root, 'db'), { recursive: true });
      const server = await startServer(name, 'bench-app.js', { BENCH_ENGINE: engine, BENCH_DB_DIR: path.join(root, 'db'), BENCH_DATA_DIR: root }, config.nodeFlags);
      servers.push(server);
      return server;
    };
    const app = await start('worker', 'embedded');
    const baseline = await start('in-thread', 'embedded-in-thread');
    const scenarios = buildScenarios({ rows, thumbPath: '', uploadFile: '' }).filter((s) => EMBEDDED_SCENARIOS.has(s.key) && isSelected(config, s.key));
    const noUpload = buildMultipart([]);
    // Each server has its own folder, which only its process may open: its posts are prepared through it.
    const writes = createWritePreparer({ runSql: runSqlThrough, deleteRate: readDeleteRate(config.engine) });
    for (const note of await checkEquivalence(scenarios, app, baseline, noUpload, writes)) console.log(`note: ${note}`);
    console.log(`checked: both servers answer the ${scenarios.length} scenarios alike (list filter "${LIST_FILTER}", sort "${LIST_SORT}")`);
    const statements = new Map<ScenarioKey, string[]>();
    for (const scenario of scenarios) {
      const [url, init] = await sampleRequest(scenario, app, noUpload, writes);
      statements.set(scenario.key, (await captureQueries(app, () => expectOk(`capture ${scenario.key}`, url, init))).map((q) => describeStatement(q.sql)));
    }
    return { rows, table: await measureScenarios({ config, rows, app, baseline, scenarios, statements, writes }) };
  } finally {
    for (const server of servers) await stopServer(server);
    await rm(dataDir, { recursive: true, force: true });
    dataDirs.delete(dataDir);
  }
}

function printScaling(results: SizeResult[]): void {
  const [small, large] = [results[0]!, results[results.length - 1]!];
  const n = (rows: number) => rows.toLocaleString('en');
  console.log(`\n### Scaling: ${n(small.rows)} vs ${n(large.rows)} posts (cost ratio = req/s at ${n(small.rows)} / req/s at ${n(large.rows)}; 1.00 = no slower)`);
  console.log(
    `| scenario | recordbase req/s (${n(small.rows)} → ${n(large.rows)}) | p50 ms | cost ratio | baseline req/s (${n(small.rows)} → ${n(large.rows)}) | p50 ms | cost ratio |`,
  );
  console.log('|---|---|---|---|---|---|---|');
  for (const row of small.table) {
    const other = large.table.find((r) => r.scenario.key === row.scenario.key);
    if (!other) continue;
    const side = (a: Measurement, b: Measurement) =>
      `${fmt(a.requestsPerSecond)} → ${fmt(b.requestsPerSecond)} | ${fmt(a.p50)} → ${fmt(b.p50)} | ${fmt(a.requestsPerSecond / b.requestsPerSecond, 2)}`;
    console.log(`| ${row.scenario.label} | ${side(row.recordbase, other.recordbase)} | ${side(row.baseline, other.baseline)} |`);
  }
}

/** What the baseline's INSERT does (BENCH_BASELINE_CREATE: `plain`, the default, or `exists`); throws on anything else before a server starts. */
function describeBaselineCreate(): string {
  const mode = process.env.BENCH_BASELINE_CREATE || 'plain';
  if (mode === 'plain') return 'a plain INSERT ... RETURNING * (BENCH_BASELINE_CREATE=exists: the author checked in the INSERT, as before issue 35)';
  if (mode === 'exists') return 'INSERT ... SELECT ... WHERE EXISTS (the author) RETURNING * (BENCH_BASELINE_CREATE=exists)';
  throw new Error(`BENCH_BASELINE_CREATE must be plain or exists, got "${mode}"`);
}

async function describePostgres(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query(`SELECT version() AS v, current_setting('shared_buffers') AS sb, current_setting('max_parallel_workers_per_gather') AS pw`);
    return `${String(rows[0].v).split(' on ')[0]} (shared_buffers ${rows[0].sb}, max_parallel_workers_per_gather ${rows[0].pw})`;
  } finally {
    await client.end();
  }
}

async function main(): Promise<void> {
  const config = readConfig();
  console.log('recordbase bench');
  console.log(`machine: ${describeMachine()}`);
  console.log(config.engine === 'embedded' ? 'database: the embedded engine (PGlite), worker thread against main thread' : `database: ${await describePostgres(config.url)} at ${config.url.replace(/\/\/[^@/]*@/, '//')}`);
  console.log(`load before starting: ${describeLoad()}; jest processes running: ${countJestProcesses()}`);
  if (config.nodeFlags.length > 0) console.log(`node flags of both servers: ${config.nodeFlags.join(' ')}`);
  console.log(`servers made by: ${process.env.BENCH_EXPRESS_LISTEN === '1' ? 'http.createServer(app), as app.listen makes them (--express-listen)' : 'createAppServer(app)'}`);
  if (config.engine === 'postgres') console.log(`the baseline's create: ${describeBaselineCreate()}`);
  if (config.scenarios?.delete('realtime')) {
    const env = (name: string, fallback: number) => parsePositive(name, process.env[name], fallback);
    await runRealtimeBench({ ...config, rows: config.rows[0]!, clients: realtimeClients, rate: env('BENCH_REALTIME_RATE', 50), latencySeconds: env('BENCH_REALTIME_SECONDS', 20) });
    if (config.scenarios.size === 0) return;
  }
  const results: SizeResult[] = [];
  for (const rows of config.rows) results.push(config.engine === 'embedded' ? await benchEmbeddedSize(config, rows) : await benchOneSize(config, rows));
  if (results.length > 1) printScaling(results);
}

process.on('exit', () => {
  for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));

await main();
