/**
 * Issue 29, findings 2 and 10: no single client can hold the database. A guest (one address)
 * loops the slowest filter it is allowed while another client (another address) does cheap
 * reads: on the embedded engine (on disk, where a statement can be stopped) and on Postgres, the
 * other client's reads all answer 200 with p99 under a second, and the guest's own excess is
 * refused (its statements time out, its queue is bounded by count and answers 503 at once).
 *
 * The two clients are two loopback addresses (127.0.0.1 and 127.0.0.2) against a server on
 * 127.0.0.1: Linux routes all of 127.0.0.0/8 to the loopback interface. Postgres runs as a
 * throwaway server without parallel query workers, so each slow statement costs one core of
 * this shared machine and the shared server at :5432 is not loaded.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import http, { type Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import knexFactory, { type Knex } from 'knex';
import type { CollectionDefinition } from '../../lib/index.js';
import { createRecordsRouter, type RecordsRouter } from '../../lib/index.js';
import { resolveOptions, type RecordsRouterOptions } from '../../lib/options.js';
import { DEFAULT_STATEMENT_TIMEOUT_MS, EMBEDDED_STATEMENT_TIMEOUT_MS, shareConnectionsFairly } from '../../lib/db/statements/statement-bounds.js';
import { StatementInterruptedError } from '../../lib/db/statements/statement-interrupted-error.js';
import type { DatabaseContext } from '../../lib/db/statements/database-context.js';
import { embeddedDatabaseDir, openEmbeddedDatabase, openMemoryDatabase } from '../../lib/db/engine/open-embedded-database.js';
import { runStatement } from '../../lib/db/statements/run-statement.js';
import { ensureBuilt } from '../support/built-package.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { createMemoryLogger } from '../support/test-app.js';
import { openTestDatabase, testEngines, testKnexLog } from '../support/test-database.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/throwaway-postgres.js';

const GUEST = '127.0.0.1';
const OTHER = '127.0.0.2';
const NODE_COUNT = 20_000;
/** Forward links per node: `links.links` reaches 400 nodes per row, 8 million name tests per list. */
const LINKS = 20;
/** The slowest filter a guest may send here: minutes of one core on either engine. */
const SLOW_FILTER = "links.links.name ?~ 'zzzz'";
const SLOW_LIST = `/api/collections/nodes/records?filter=${encodeURIComponent(SLOW_FILTER)}`;
/** A cheap read: one record by id. */
const CHEAP_VIEW = `/api/collections/nodes/records/${nodeId(1)}`;
/** How long the other client reads while the guest attacks. */
const READING_MS = 10_000;

const collections: CollectionDefinition[] = [
  {
    name: 'nodes',
    fields: [
      { name: 'name', type: 'text' },
      { name: 'links', type: 'relation', collection: 'nodes', maxSelect: 100 },
    ],
    rules: OPEN_RULES,
  },
];

function nodeId(i: number): string {
  return `n${String(i).padStart(14, '0')}`;
}

/** NODE_COUNT nodes in one statement, straight into the collection's table, LINKS links each. */
async function seedNodes(db: Knex): Promise<void> {
  const id = (expr: string) => `'n' || lpad((${expr})::text, 14, '0')`;
  const links = `(SELECT jsonb_agg(${id(`(i * 7 + k * 13) % ${NODE_COUNT}`)}) FROM generate_series(1, ${LINKS}) AS k)`;
  await db.raw(`INSERT INTO nodes (id, name, links) SELECT ${id('i')}, 'node ' || i, ${links} FROM generate_series(0, ${NODE_COUNT - 1}) AS i`);
}

interface Answer {
  status: number;
  body: { status?: number; message?: string; data?: object; id?: string };
  ms: number;
}

/** GET `path` from the source address `from`, on a connection of its own. */
function get(base: string, path: string, from: string, headers: Record<string, string> = {}): Promise<Answer> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.get(`${base}${path}`, { localAddress: from, agent: false, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Answer['body'], ms: performance.now() - started }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

/** The nearest-rank percentile `p` (0 to 1) of `values`. */
function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)]!;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The guest runs `loops` loops of the slow list from GUEST; once they are under way, the other
 * client reads one record at a time from OTHER for READING_MS. Then the loops stop.
 */
async function readUnderAttack(base: string, loops: number): Promise<{ reads: Answer[]; attacks: Answer[] }> {
  let attacking = true;
  const attacks: Answer[] = [];
  const running = Array.from({ length: loops }, async () => {
    while (attacking) attacks.push(await get(base, SLOW_LIST, GUEST));
  });
  await sleep(1_000);
  const reads: Answer[] = [];
  const until = Date.now() + READING_MS;
  while (Date.now() < until) {
    reads.push(await get(base, CHEAP_VIEW, OTHER));
    await sleep(20);
  }
  attacking = false;
  await Promise.all(running);
  return { reads, attacks };
}

/** What the other client must see, and what the guest may: its slow lists refused, never a 500 or a hang. */
function expectFair(result: { reads: Answer[]; attacks: Answer[] }, limits: { attackMs: number }): void {
  const { reads, attacks } = result;
  const summary = {
    reads: reads.length,
    readStatuses: [...new Set(reads.map((r) => r.status))],
    p50: Math.round(percentile(reads.map((r) => r.ms), 0.5)),
    p99: Math.round(percentile(reads.map((r) => r.ms), 0.99)),
    max: Math.round(Math.max(...reads.map((r) => r.ms))),
    attacks: attacks.length,
    attackCodes: Object.fromEntries([...new Set(attacks.map((a) => `${a.status} ${a.body.message?.slice(0, 60)}`))].map((k) => [k, attacks.filter((a) => `${a.status} ${a.body.message?.slice(0, 60)}` === k).length])),
  };
  // Printed so that a run shows what was measured, not only whether it passed.
  console.log(JSON.stringify(summary, null, 1));
  expect(reads.filter((r) => r.status !== 200)).toEqual([]);
  expect(reads.every((r) => r.body.id === nodeId(1))).toBe(true);
  // A read starved of the engine would wait out the pool's 3 s and be a 503; the latency itself
  // (p50, p99, printed above) is the bench's business, not a pass/fail line on a shared machine.
  expect(summary.max).toBeLessThan(3_000);
  expect(reads.length).toBeGreaterThan(10);
  // The attack ran: the guest's lists were cancelled at the statement timeout.
  expect(attacks.some((a) => a.status === 400 && /statement timeout/.test(a.body.message ?? ''))).toBe(true);
  for (const attack of attacks) {
    expect([400, 503]).toContain(attack.status);
    expect(attack.body.message).toMatch(/statement timeout|The database is busy/);
    expect(attack.ms).toBeLessThan(limits.attackMs);
  }
}

/** A host app on 127.0.0.1 with the router under /backend (and Express's `trust proxy` if given). */
async function serve(options: RecordsRouterOptions, trustProxy?: string): Promise<{ router: RecordsRouter; base: string; close(): Promise<void> }> {
  const router = createRecordsRouter({ fileSweep: false, logger: createMemoryLogger(), ...options });
  await router.ready;
  const app = express();
  if (trustProxy !== undefined) app.set('trust proxy', trustProxy);
  app.use('/backend', router);
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  return {
    router,
    base: `http://127.0.0.1:${(server.address() as { port: number }).port}/backend`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await router.close();
    },
  };
}

describe('the embedded engine on disk, with its defaults', () => {
  let dir: string;
  let db: Knex;
  let app: Awaited<ReturnType<typeof serve>>;
  beforeAll(async () => {
    // The worker runs from dist/ under Jest: make sure it is the current build.
    await ensureBuilt();
    dir = mkdtempSync(path.join(os.tmpdir(), 'rb-fairness-'));
    db = openEmbeddedDatabase(embeddedDatabaseDir(dir), { log: testKnexLog });
    app = await serve({ collections, database: db, dataDir: dir });
    await seedNodes(db);
    // A pause, in which the engine checkpoints (as after any burst of writes): the first restart
    // of the attack then does not replay the seed's write-ahead log (a second more, once).
    await sleep(1_500);
  }, 180_000);
  afterAll(async () => {
    await app?.close();
    await db?.destroy();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  test("a guest looping the slowest filter (four at a time) does not fail another client's reads: all 200, none waiting out the pool's 3 s", async () => {
    const result = await readUnderAttack(app.base, 4);
    expectFair(result, { attackMs: 10_000 });
    // the engine's own default: short, since a statement holds every client
    expect(result.attacks.some((a) => a.body.message?.includes(`(${EMBEDDED_STATEMENT_TIMEOUT_MS} ms, limits.statementTimeoutMs)`))).toBe(true);
  }, 120_000);

  test('a statement inside a transaction is stopped like any other: statement_timeout, rolled back, and the engine serves the next read', async () => {
    const started = Date.now();
    const created = app.router.api.transaction(async (tx) => {
      await tx.collection('nodes').create({ id: 'rolledback00001', name: 'written before the slow read' }, { as: 'superuser' });
      return tx.collection('nodes').getList(1, 30, { filter: SLOW_FILTER, skipTotal: true, as: 'superuser' });
    });
    await expect(created).rejects.toMatchObject({ status: 400, code: 'statement_timeout' });
    expect(Date.now() - started).toBeLessThan(3_000);
    const read = await get(app.base, CHEAP_VIEW, OTHER);
    expect(read.status).toBe(200);
    expect((await get(app.base, '/api/collections/nodes/records/rolledback00001', OTHER)).status).toBe(404);
  }, 60_000);
});

test('the embedded engine on disk checkpoints once idle for a second, so that a restart replays little', async () => {
  await ensureBuilt();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rb-fairness-checkpoint-'));
  const db = openEmbeddedDatabase(embeddedDatabaseDir(dir), { log: testKnexLog });
  try {
    const redo = async () => ((await db.raw('SELECT redo_lsn::text AS lsn FROM pg_control_checkpoint()')).rows[0] as { lsn: string }).lsn;
    await db.raw('CREATE TABLE written (n int)');
    await db.raw('INSERT INTO written SELECT generate_series(1, 10000)');
    const before = await redo();
    await sleep(300);
    expect(await redo()).toBe(before);
    await sleep(1_500);
    expect(await redo()).not.toBe(before);
  } finally {
    await db.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);

test("requests through a proxy that Express does not trust are warned about, once (every client would share one client's part); none once it is trusted", async () => {
  for (const trusted of [false, true]) {
    const database = openMemoryDatabase({ log: testKnexLog });
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'rb-fairness-proxy-'));
    const logger = createMemoryLogger();
    const app = await serve({ collections, database, dataDir, logger }, trusted ? 'loopback' : undefined);
    try {
      for (const client of ['203.0.113.7', '203.0.113.8']) {
        expect((await get(app.base, '/api/collections/nodes/records?perPage=1', GUEST, { 'X-Forwarded-For': client })).status).toBe(200);
      }
      const warnings = logger.lines.filter((line) => line.includes('X-Forwarded-For'));
      if (trusted) expect(warnings).toEqual([]);
      else {
        expect(warnings).toHaveLength(1);
        expect(warnings[0]).toContain("set app.set('trust proxy', ...) on the host app");
      }
    } finally {
      await app.close();
      await database.destroy();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }
}, 60_000);

describe('the default statement timeout', () => {
  test(`is ${EMBEDDED_STATEMENT_TIMEOUT_MS} ms on the embedded engine on disk (the router's own, or one passed in), ${DEFAULT_STATEMENT_TIMEOUT_MS} ms on Postgres and in memory; an explicit one wins`, async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'rb-fairness-default-'));
    const onDisk = openEmbeddedDatabase(embeddedDatabaseDir(dir));
    const inMemory = openMemoryDatabase();
    const postgres = knexFactory({ client: 'pg', connection: 'postgres://nobody@127.0.0.1:1/none', pool: { min: 0, max: 1 } });
    try {
      const timeoutOf = (options: Partial<RecordsRouterOptions>) => resolveOptions({ collections: [], ...options }, {}).limits.statementTimeoutMs;
      expect(timeoutOf({})).toBe(EMBEDDED_STATEMENT_TIMEOUT_MS);
      expect(timeoutOf({ database: onDisk })).toBe(EMBEDDED_STATEMENT_TIMEOUT_MS);
      expect(timeoutOf({ database: inMemory })).toBe(DEFAULT_STATEMENT_TIMEOUT_MS);
      expect(timeoutOf({ database: postgres })).toBe(DEFAULT_STATEMENT_TIMEOUT_MS);
      expect(timeoutOf({ database: onDisk, limits: { statementTimeoutMs: 2_000 } })).toBe(2_000);
      const limits = resolveOptions({ collections: [] }, {}).limits;
      expect(limits.maxWaitingPerClient).toBe(32);
      expect(limits.maxConnectionsPerClient).toBeUndefined();
      expect(() => resolveOptions({ collections: [], limits: { maxConnectionsPerClient: 0 } }, {})).toThrow('limits.maxConnectionsPerClient must be a positive integer');
      expect(() => resolveOptions({ collections: [], limits: { maxWaitingPerClient: 1.5 } }, {})).toThrow('limits.maxWaitingPerClient must be a positive integer');
    } finally {
      await Promise.all([onDisk.destroy(), inMemory.destroy(), postgres.destroy()]);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('Postgres, with a pool of 5 and the default limits', () => {
  let server: ThrowawayPostgres;
  let db: Knex;
  let app: Awaited<ReturnType<typeof serve>>;
  beforeAll(async () => {
    server = await startThrowawayPostgres({ settings: { max_parallel_workers_per_gather: 0 } });
    db = knexFactory({ client: 'pg', connection: server.url, pool: { min: 0, max: 5 }, log: testKnexLog });
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'rb-fairness-pg-'));
    app = await serve({ collections, database: db, dataDir });
    await seedNodes(db);
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await db?.destroy();
    await server?.destroy();
  }, 60_000);

  test("ten guest loops of the slowest filter do not drain the pool: another client's reads all 200, none waiting out the pool's 3 s", async () => {
    const result = await readUnderAttack(app.base, 10);
    // a slow list: the statement timeout (5 s); one that waited: at most the acquire timeout (3 s) first
    expectFair(result, { attackMs: 12_000 });
  }, 120_000);

  test("the guest's burst beyond its share and its queue is refused at once with 503 database_busy, the rest answer within the bounds", async () => {
    const burst = await Promise.all(Array.from({ length: 40 }, () => get(app.base, SLOW_LIST, GUEST)));
    const refused = burst.filter((a) => a.status === 503 && /limits\.maxWaitingPerClient/.test(a.body.message ?? ''));
    // 2 of the pool's 5 run, 32 wait: the other 6 are refused without waiting
    expect(refused.length).toBeGreaterThanOrEqual(6);
    for (const answer of refused) {
      expect(answer.body).toEqual({ status: 503, message: expect.stringContaining('The database is busy'), data: {} });
      expect(answer.ms).toBeLessThan(1_000);
    }
    for (const answer of burst) {
      expect([400, 503]).toContain(answer.status);
      expect(answer.ms).toBeLessThan(12_000);
    }
  }, 60_000);
});

describe.each(testEngines())('the fair gate on %s, by itself', (engine) => {
  /** A statement that keeps its connection a moment on either engine (neither has to sleep). */
  const busy = { sql: `SELECT count(*) AS n FROM generate_series(1, 50000) AS i WHERE md5(i::text) = 'x'`, bindings: [] };
  const keyed = (client: string): DatabaseContext => ({ statementTimeoutMs: 30_000, acquireTimeoutMs: 20_000, client });

  test('units without a client key are not gated, and a host query runs as before; a keyed unit over its queue is refused without being sent', async () => {
    const database = await openTestDatabase(engine);
    try {
      shareConnectionsFairly(database.db, { maxConnectionsPerClient: 1, maxWaitingPerClient: 1 });
      const holding = runStatement(database.db, busy, keyed('a'));
      const queued = runStatement(database.db, { sql: 'SELECT 1 AS one', bindings: [] }, keyed('a'));
      const refused = await runStatement(database.db, { sql: 'SELECT 1 AS one', bindings: [] }, keyed('a')).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(StatementInterruptedError);
      expect(refused).toMatchObject({ reason: 'queue_full', sent: false });
      // another client, a unit without a key, and the host's own query all run
      const [other, unkeyed, host] = await Promise.all([
        runStatement(database.db, { sql: 'SELECT 2 AS two', bindings: [] }, keyed('b')),
        runStatement(database.db, { sql: 'SELECT 3 AS three', bindings: [] }, { statementTimeoutMs: 30_000, acquireTimeoutMs: 20_000 }),
        database.db.raw('SELECT 4 AS four'),
      ]);
      expect(other.rows).toEqual([{ two: 2 }]);
      expect(unkeyed.rows).toEqual([{ three: 3 }]);
      expect((host as { rows: unknown[] }).rows).toEqual([{ four: 4 }]);
      await holding;
      expect((await queued).rows).toEqual([{ one: 1 }]);
    } finally {
      await database.destroy();
    }
  }, 60_000);
});
