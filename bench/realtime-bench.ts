/**
 * `npm run bench -- --scenarios realtime` (issue 13 item 6): realtime on Postgres, on the bench's
 * seeded schema (1,000 users, `--rows` posts).
 *
 * 1. Memory per idle client: the server's RSS (after full collections) with N idle streams, each
 *    subscribed to `users/*` (a collection nothing writes), minus without, divided by N; twice
 *    (none, idle, none, idle), the mean reported, with V8 heap + external beside it.
 * 2. Throughput with N idle clients vs none, same server, same run: list, view and create
 *    (scenarios 1, 4, 5 of the main table) in the order none, with, with, none; each cell is the
 *    mean of its two measurements.
 * 3. Delivery latency: N streams subscribed to `posts/*` while posts are created at a steady rate
 *    (default 50/s, 2 s warm-up + 20 s) through the HTTP API; each message timed against its
 *    create's response in the one load process that both creates and reads (one clock). Once with
 *    the list rule `""` (every create reaches every stream), once with `author = @request.auth.id`
 *    and every stream subscribed as a different user (every create reaches its author's stream).
 *
 * The streams live in a load process of their own (realtime-clients.js: raw HTTP, not the SDK);
 * the throughput load is the main bench's autocannon process. Each part runs on a fresh server
 * process, so BENCH_PROFILE_DIR gets one V8 CPU profile per part.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import pg from 'pg';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { benchSchema } from './bench-data.js';
import { forkBenchScript, measureLoad, stopServer, waitForMessage, type Measurement, type ServerProcess } from './bench-processes.js';
import { describeLoad, readCpuSeconds, readMemory } from './machine.js';
import type { ClientsCommand, LatencyResult } from './realtime-clients.js';
import { buildScenarios, type Scenario } from './scenarios.js';
import { ensureSeeded, removeBenchWrites } from './seed.js';

/** What the realtime bench takes from the main bench's flags. */
export interface RealtimeBenchConfig {
  url: string;
  rows: number;
  reseed: boolean;
  /** Streams held open (`--realtime-clients`, default 1,000). */
  clients: number;
  /** Creates per second during the latency runs (BENCH_REALTIME_RATE, default 50). */
  rate: number;
  /** Seconds of creates measured in each latency run (BENCH_REALTIME_SECONDS, default 20). */
  latencySeconds: number;
  durationSeconds: number;
  warmupSeconds: number;
  connections: number;
}

const OWNER_RULE = 'author = @request.auth.id';
const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : '-');

/** Forks the realtime host app with --expose-gc (and a CPU profile under BENCH_PROFILE_DIR). */
async function startApp(name: string, env: Record<string, string>): Promise<ServerProcess> {
  const profileDir = process.env.BENCH_PROFILE_DIR;
  const execArgv = ['--expose-gc', ...(profileDir ? ['--cpu-prof', '--cpu-prof-dir', profileDir, '--cpu-prof-name', `${name}-${Date.now()}.cpuprofile`] : [])];
  const child = forkBenchScript('realtime-bench-app.js', env, execArgv);
  const { port } = await waitForMessage<{ type: 'ready'; port: number }>(child, 'ready', 120_000);
  return { name, child, pid: child.pid!, base: `http://127.0.0.1:${port}` };
}

/** What the server holds after full collections (and a pause for V8 to give freed pages back), in MiB. */
interface Memory {
  rss: number;
  /** V8 heap in use plus memory outside it (Buffers): what the streams themselves hold. */
  live: number;
}

async function settledMemory(server: ServerProcess): Promise<Memory> {
  type Gced = { type: 'gced'; rss: number; heapUsed: number; external: number };
  const collect = async () => {
    const done = waitForMessage<Gced>(server.child, 'gced', 30_000);
    server.child.send({ type: 'gc' });
    return done;
  };
  await collect();
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const last = await collect();
  return { rss: last.rss / 2 ** 20, live: (last.heapUsed + last.external) / 2 ** 20 };
}

/** A load process holding streams; `ask` sends one command and waits for its answer. */
class ClientsProcess {
  private readonly child: ChildProcess = forkBenchScript('realtime-clients.js', {});

  async ask<T extends { type: string }>(command: ClientsCommand, answer: string, timeoutMs: number): Promise<T> {
    const reply = waitForMessage<T>(this.child, answer, timeoutMs);
    this.child.send(command);
    return reply;
  }

  open(url: string, count: number, subscription: string, asUsers: boolean): Promise<{ type: 'opened'; count: number }> {
    return this.ask<{ type: 'opened'; count: number }>({ type: 'open', url, count, subscription, asUsers }, 'opened', 300_000);
  }

  async close(): Promise<void> {
    await this.ask({ type: 'close' }, 'closed', 30_000).catch(() => this.child.kill('SIGKILL'));
  }
}

interface ThroughputRow {
  scenario: Scenario;
  none: Measurement[];
  idle: Measurement[];
}

interface LatencyRow {
  label: string;
  result: LatencyResult;
  serverCpuMsPerCreate: number;
  serverRssMiB: number;
  holdback: Holdback;
}

/** How long the oldest writing transaction on the whole server had been open, sampled every 50 ms. */
interface Holdback {
  p50: number;
  p99: number;
  max: number;
  /** Share of samples where it exceeded 100 ms. */
  over100: number;
  /** The longest one seen: where it came from. */
  longest: string;
}

/**
 * Realtime delivers a change once every transaction that started before its commit has ended
 * (docs/realtime.md: the read window ends at the snapshot's xmin, which counts every writing
 * transaction of the Postgres server, any database). On a shared server other people's
 * transactions hold delivery back; this sampler measures by how much, beside the latency.
 */
function sampleHoldback(url: string): { stop(): Promise<Holdback> } {
  const client = new pg.Client({ connectionString: url });
  const samples: number[] = [];
  let longest = { ms: 0, what: '-' };
  let running = true;
  const loop = (async () => {
    await client.connect();
    while (running) {
      const { rows } = await client.query(
        `SELECT extract(epoch FROM now() - xact_start) * 1000 AS ms, datname, application_name, left(query, 80) AS query
           FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid() ORDER BY xact_start LIMIT 1`,
      );
      const ms = rows[0] ? Number(rows[0].ms) : 0;
      samples.push(ms);
      if (ms > longest.ms) longest = { ms, what: `${fmt(ms)} ms: ${rows[0].datname} / ${rows[0].application_name || '-'} / ${String(rows[0].query).replace(/\s+/g, ' ')}` };
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await client.end();
  })();
  return {
    async stop() {
      running = false;
      await loop;
      const sorted = [...samples].sort((a, b) => a - b);
      const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
      return { p50: at(50), p99: at(99), max: sorted.at(-1) ?? NaN, over100: samples.filter((ms) => ms > 100).length / Math.max(1, samples.length), longest: longest.what };
    },
  };
}

const mean = (list: Measurement[], pick: (m: Measurement) => number) => list.reduce((sum, m) => sum + pick(m), 0) / list.length;

interface MemoryCost {
  none: Memory[];
  idle: Memory[];
  rssPerClientKiB: number;
  livePerClientKiB: number;
}

async function measureIdleCost(config: RealtimeBenchConfig, env: Record<string, string>): Promise<{ memory: MemoryCost; throughput: ThroughputRow[] }> {
  const server = await startApp('realtime-idle', env);
  try {
    const scenarios = buildScenarios({ rows: config.rows, thumbPath: '', uploadFile: '' }).filter((s) => s.key === 'list' || s.key === 'view' || s.key === 'create');
    // One throw-away pass warms the server (JIT, pool, caches) before any reading.
    for (const scenario of scenarios) await measureLoad({ server, spec: scenario.spec, load: { ...config, warmupSeconds: 1, durationSeconds: 2 } });

    // Without and with the streams, twice (none, idle, none, idle): RSS moves with V8's and malloc's own
    // bookkeeping, so one difference alone can be off by megabytes.
    const none: Memory[] = [];
    const idle: Memory[] = [];
    let clients: ClientsProcess | undefined;
    for (let round = 0; round < 2; round++) {
      if (clients) {
        await clients.close();
        await new Promise((resolve) => setTimeout(resolve, 1_000));
      }
      none.push(await settledMemory(server));
      clients = new ClientsProcess();
      await clients.open(server.base, config.clients, 'users/*', false);
      idle.push(await settledMemory(server));
    }
    const perClient = (pick: (m: Memory) => number) => ((idle.reduce((sum, m, i) => sum + pick(m) - pick(none[i]!), 0) / idle.length) * 1024) / config.clients;
    const memory: MemoryCost = { none, idle, rssPerClientKiB: perClient((m) => m.rss), livePerClientKiB: perClient((m) => m.live) };
    console.log(
      `  memory without / with ${config.clients} idle streams: RSS ${none.map((m, i) => `${fmt(m.rss, 1)} / ${fmt(idle[i]!.rss, 1)}`).join(', ')} MiB; ` +
        `heap+external ${none.map((m, i) => `${fmt(m.live, 1)} / ${fmt(idle[i]!.live, 1)}`).join(', ')} MiB: ${fmt(memory.rssPerClientKiB, 1)} KiB RSS, ${fmt(memory.livePerClientKiB, 1)} KiB heap+external per stream`,
    );

    const rows: ThroughputRow[] = scenarios.map((scenario) => ({ scenario, none: [], idle: [] }));
    // Order: with, none, none, with (the streams are open now): each side once early, once late.
    for (const phase of ['idle', 'none', 'none', 'idle'] as const) {
      if (phase === 'idle' && !clients) {
        clients = new ClientsProcess();
        await clients.open(server.base, config.clients, 'users/*', false);
      }
      if (phase === 'none' && clients) {
        await clients.close();
        clients = undefined;
        await new Promise((resolve) => setTimeout(resolve, 1_000));
      }
      for (const row of rows) {
        const m = await measureLoad({ server, spec: row.scenario.spec, load: config });
        row[phase].push(m);
        console.log(`  ${row.scenario.key.padEnd(7)} ${phase === 'idle' ? `${config.clients} idle streams` : 'no streams'}: ${fmt(m.requestsPerSecond)} req/s, p50 ${fmt(m.p50)} ms, p99 ${fmt(m.p99)} ms, CPU ${fmt(m.cpuMsPerRequest, 2)} ms/req (${m.non2xx} non-2xx)  load ${describeLoad()}`);
      }
    }
    await clients?.close();
    return { memory, throughput: rows };
  } finally {
    await stopServer(server);
  }
}

async function measureLatency(config: RealtimeBenchConfig, env: Record<string, string>, label: string, owner: boolean): Promise<LatencyRow> {
  const server = await startApp(owner ? 'realtime-owner' : 'realtime-open', owner ? { ...env, BENCH_POSTS_LIST_RULE: OWNER_RULE } : env);
  const clients = new ClientsProcess();
  try {
    await clients.open(server.base, config.clients, 'posts/*', owner);
    const cpuBefore = readCpuSeconds(server.pid);
    const sampler = sampleHoldback(config.url);
    const result = await clients.ask<LatencyResult>(
      { type: 'latency', url: server.base, rate: config.rate, warmupSeconds: 2, seconds: config.latencySeconds, settleSeconds: 5, expectedPerCreate: owner ? 1 : config.clients },
      'latency',
      (config.latencySeconds + 120) * 1000,
    );
    const cpuAfter = readCpuSeconds(server.pid);
    const holdback = await sampler.stop();
    const serverCpuMsPerCreate = ((cpuAfter.user - cpuBefore.user + cpuAfter.system - cpuBefore.system) * 1000) / result.creates;
    const row = { label, result, serverCpuMsPerCreate, serverRssMiB: readMemory(server.pid).rss, holdback };
    console.log(
      `  ${label}: ${result.received}/${result.expected} messages (${result.perCreateMin}-${result.perCreateMax} per create, ${result.duplicates} duplicates), ` +
        `p50 ${fmt(result.p50, 1)} ms, p90 ${fmt(result.p90, 1)}, p99 ${fmt(result.p99, 1)}, max ${fmt(result.max, 1)}; creates ${fmt(result.achievedRate, 1)}/s, ` +
        `create p50 ${fmt(result.createP50, 1)} ms p99 ${fmt(result.createP99, 1)}, ${result.createErrors} errors${result.createErrors ? ` ${JSON.stringify(result.createErrorKinds)}` : ''}; server CPU ${fmt(serverCpuMsPerCreate, 1)} ms per create; ` +
        `load process loop delay p99 ${fmt(result.loopDelayP99, 1)} ms  load ${describeLoad()}`,
    );
    console.log(
      `    oldest writing transaction on the server (50 ms samples): p50 ${fmt(holdback.p50)} ms, p99 ${fmt(holdback.p99)}, max ${fmt(holdback.max)}; ` +
        `over 100 ms in ${fmt(holdback.over100 * 100, 1)}% of samples; longest ${holdback.longest}`,
    );
    return row;
  } finally {
    await clients.close();
    await stopServer(server);
  }
}

/** Runs the three parts and prints the tables docs/benchmarks.md keeps. */
export async function runRealtimeBench(config: RealtimeBenchConfig): Promise<void> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'rb-bench-realtime-'));
  const schema = benchSchema(config.rows);
  try {
    const seed = await ensureSeeded({ url: config.url, rows: config.rows, reseed: config.reseed, dataDir });
    console.log(`\n## realtime: ${config.rows.toLocaleString('en')} posts (schema ${schema}), ${seed.seeded ? `seeded in ${seed.seconds.toFixed(1)} s` : 'seed reused'}; ${config.clients} streams, ${config.rate} creates/s`);
    const env = { BENCH_DATABASE_URL: config.url, BENCH_SCHEMA: schema, BENCH_DATA_DIR: dataDir };

    console.log(`\nidle streams: RSS and throughput (${config.connections} connections, ${config.warmupSeconds} s warm-up + ${config.durationSeconds} s per cell)`);
    const idle = await measureIdleCost(config, env);
    await removeBenchWrites(config.url, schema);

    console.log(`\ndelivery latency (${config.rate} creates/s, 2 s warm-up + ${config.latencySeconds} s)`);
    const open = await measureLatency(config, env, 'rule ""', false);
    const owner = await measureLatency(config, env, `rule ${OWNER_RULE}`, true);

    console.log(`\n### Realtime: ${config.clients} streams on one instance, ${config.rows.toLocaleString('en')} posts`);
    console.log('\n| list rule | creates/s | messages per create | received / expected | duplicates | p50 ms | p90 ms | p99 ms | max ms | server CPU ms per create | create p99 ms | server RSS MiB | oldest writing tx p50 / p99 ms |');
    console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
    for (const row of [open, owner]) {
      const r = row.result;
      console.log(
        `| \`${row.label.replace(/^rule /, '')}\` | ${fmt(r.achievedRate, 1)} | ${r.perCreateMin === r.perCreateMax ? r.perCreateMax : `${r.perCreateMin}-${r.perCreateMax}`} | ${r.received} / ${r.expected} | ${r.duplicates} | ` +
          `${fmt(r.p50, 1)} | ${fmt(r.p90, 1)} | ${fmt(r.p99, 1)} | ${fmt(r.max, 1)} | ${fmt(row.serverCpuMsPerCreate, 1)} | ${fmt(r.createP99, 1)} | ${fmt(row.serverRssMiB)} | ${fmt(row.holdback.p50)} / ${fmt(row.holdback.p99)} |`,
      );
    }
    const { memory } = idle;
    console.log(
      `\nper idle stream: ${fmt(memory.rssPerClientKiB, 1)} KiB RSS, ${fmt(memory.livePerClientKiB, 1)} KiB V8 heap + external ` +
        `(mean of 2 rounds; RSS without / with: ${memory.none.map((m, i) => `${fmt(m.rss, 1)} / ${fmt(memory.idle[i]!.rss, 1)}`).join(', ')} MiB)`,
    );
    console.log(`\n| scenario | no streams req/s | ${config.clients} idle streams req/s | change | CPU ms/req none | CPU ms/req idle |`);
    console.log('|---|---|---|---|---|---|');
    for (const row of idle.throughput) {
      const none = mean(row.none, (m) => m.requestsPerSecond);
      const withIdle = mean(row.idle, (m) => m.requestsPerSecond);
      console.log(
        `| ${row.scenario.label} | ${fmt(none)} | ${fmt(withIdle)} | ${fmt(((withIdle - none) / none) * 100, 1)}% | ${fmt(mean(row.none, (m) => m.cpuMsPerRequest), 2)} | ${fmt(mean(row.idle, (m) => m.cpuMsPerRequest), 2)} |`,
      );
    }
  } finally {
    // The schema is the main bench's too: leave it without capture triggers, as a router with
    // realtime off leaves it (the main bench's own app installs them again if realtime is on).
    await stopServer(await startApp('realtime-off', { BENCH_DATABASE_URL: config.url, BENCH_SCHEMA: schema, BENCH_DATA_DIR: dataDir, BENCH_REALTIME: 'off' })).catch((error: unknown) => console.error(error));
    const removed = await removeBenchWrites(config.url, schema);
    await rm(dataDir, { recursive: true, force: true });
    console.log(`cleanup: removed ${removed} rows written by the run and ${dataDir}`);
  }
}
