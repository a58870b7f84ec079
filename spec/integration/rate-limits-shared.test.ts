import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import knexFactory, { type Knex } from 'knex';
import { createAppServer, createRecordsRouter, type RecordsRouter } from '../../lib/index.js';
import type { RateLimitRuleOption } from '../../lib/index.js';
import { countCounterRows, rateLimitsSchema } from '../../lib/db/rate-limits/rate-limit-sql.js';
import { StatementRunner } from '../../lib/db/statements/statement-runner.js';
import { RateLimiter, type CountedRule } from '../../lib/http/rate-limits/rate-limiter.js';
import { rawSql } from '../../lib/sql-fragment.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { createMemoryLogger, startSiblingRouter, startTestApp, TEST_FILE_TOKEN_SECRET } from '../support/test-app.js';
import { openTestDatabase, testEngines, testKnexLog } from '../support/test-database.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/throwaway-postgres.js';
import { ensureBuilt } from '../support/built-package.js';
import { startInstances } from '../support/multi-instance.js';

/**
 * Issue 44, part 3: rate limits held across instances through the database alone, with memory
 * and rows bounded whatever the number of clients, old windows pruned, and each instance
 * limiting alone while the database does not answer.
 */

const collections = [{ name: 'a', fields: [{ name: 'name', type: 'text' as const }], rules: OPEN_RULES }];
/** A window so long (365 days, aligned to the epoch) that no test run crosses into the next. */
const LONG = 365 * 24 * 60 * 60;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Makes the shared counters' table, as the schema sync of a router with rate limits does. */
async function createCounterTable(runner: StatementRunner): Promise<void> {
  for (const statement of await rateLimitsSchema().statements(runner, [])) await runner.query(rawSql(statement));
}

describe.each(testEngines())('the rate limiter\'s shared counters on %s', (engine) => {
  test('a million distinct addresses keep memory and rows bounded; rows of ended windows are pruned', async () => {
    const database = await openTestDatabase(engine);
    try {
      const runner = new StatementRunner(database.db);
      await createCounterTable(runner);
      const rule: CountedRule = { label: '/api/', maxRequests: 10, duration: 60, audience: '', index: 0 };
      let now = 1_800_000_000_000;
      const limiter = new RateLimiter({ rules: [rule], maxTrackedKeys: 1000, runner, logger: createMemoryLogger(), now: () => now });
      let peak = 0;
      for (let i = 0; i < 1_000_000; i++) {
        limiter.take(rule, '', `10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`);
        if (i % 100_000 === 99_999) {
          peak = Math.max(peak, limiter.trackedKeys);
          await limiter.sync();
        }
      }
      await limiter.sync();
      expect(peak).toBe(1000);
      expect(limiter.trackedKeys).toBe(1000);
      const rows = await countCounterRows(runner);
      expect(rows).toBeGreaterThan(0);
      expect(rows).toBeLessThanOrEqual(1000);
      // The next window: the syncs remove the ended window's rows.
      now += 61_000;
      for (let i = 0; i < 10; i++) limiter.take(rule, '', `192.0.2.${i}`);
      await limiter.sync();
      expect(await countCounterRows(runner)).toBe(10);
      await limiter.close();
    } finally {
      await database.destroy();
    }
  });

  test('a failed sync whose bucket was forgotten meanwhile does not send its key twice once the database answers', async () => {
    const database = await openTestDatabase(engine);
    try {
      const runner = new StatementRunner(database.db);
      const rule: CountedRule = { label: '/api/', maxRequests: 10, duration: LONG, audience: '', index: 0 };
      const logger = createMemoryLogger();
      const limiter = new RateLimiter({ rules: [rule], maxTrackedKeys: 2, runner, logger });
      limiter.take(rule, '', 'x');
      // No table yet: this sync fails. While it runs, x is forgotten (two counters at most) and counted again.
      const failing = limiter.sync();
      limiter.take(rule, '', 'y');
      limiter.take(rule, '', 'z');
      limiter.take(rule, '', 'x');
      await failing;
      expect(logger.lines.filter((line) => line.includes('could not be synced'))).toHaveLength(1);
      await createCounterTable(runner);
      await limiter.sync();
      expect(logger.lines.filter((line) => line.includes('answer again'))).toHaveLength(1);
      expect(await countCounterRows(runner)).toBe(1);
      await limiter.close();
    } finally {
      await database.destroy();
    }
  });
});

const postgresOnly = testEngines().includes('postgres') ? describe : describe.skip;

postgresOnly('rate limits across instances on postgres', () => {
  test('two instances share one limit: the second learns the first\'s count within one sync interval', async () => {
    const rules: RateLimitRuleOption[] = [{ label: '/api/', maxRequests: 20, duration: LONG }];
    const app = await startTestApp('postgres', { collections, rateLimits: { rules: rules } });
    const other = await startSiblingRouter(app, { collections, rateLimits: { rules: rules } });
    try {
      const list = async (agent: typeof app.http) => (await agent.get('/backend/api/collections/a/records?perPage=1')).status;
      for (let i = 0; i < 20; i++) expect(await list(app.http)).toBe(200);
      expect(await list(app.http)).toBe(429);
      await sleep(1_500);
      // The other instance has not counted this client yet: the bound allows it one sync interval's requests.
      expect(await list(other.http)).toBe(200);
      await sleep(1_500);
      expect(await list(other.http)).toBe(429);
      expect(await list(app.http)).toBe(429);
      const rows = await app.database.db.raw('SELECT sum("hits")::int AS "n" FROM "_recordbase_rate_limits"');
      expect(rows.rows[0].n).toBe(21);
    } finally {
      await other.close();
      await app.close();
    }
  });

  test('two instances in processes of their own (the built package) share one limit', async () => {
    await ensureBuilt();
    const database = await openTestDatabase('postgres');
    const storageRoot = mkdtempSync(path.join(os.tmpdir(), 'rb-rate-storage-'));
    const { instances, stopAll } = await startInstances({
      count: 2,
      databaseUrl: database.url!,
      schema: database.schema,
      storage: { kind: 'disk', root: storageRoot },
      collections,
      identities: {},
      realtime: false,
      rateLimits: { rules: [{ label: '/api/collections/', maxRequests: 10, duration: LONG }] },
    });
    try {
      const list = async (index: number) => (await fetch(`${instances[index]!.url}/backend/api/collections/a/records?perPage=1`)).status;
      for (let i = 0; i < 10; i++) expect(await list(i % 2)).toBe(200);
      // Each has sent its 5 within one interval and read the total again at the next: 10 on both.
      await sleep(2_500);
      expect([await list(0), await list(1)]).toEqual([429, 429]);
    } finally {
      await stopAll();
      rmSync(storageRoot, { recursive: true, force: true });
      await database.destroy();
    }
  }, 120_000);

  describe('when the database does not answer', () => {
    let server: ThrowawayPostgres;
    let db: Knex;
    let router: RecordsRouter;
    let http: Server;
    let dataDir: string;
    const logger = createMemoryLogger();

    beforeAll(async () => {
      server = await startThrowawayPostgres();
      db = knexFactory({ client: 'pg', connection: server.url, pool: { min: 0, max: 4 }, log: testKnexLog });
      dataDir = mkdtempSync(path.join(os.tmpdir(), 'rb-rate-'));
      router = createRecordsRouter({
        collections,
        database: db,
        dataDir,
        logger,
        fileSweep: false,
        realtime: false,
        fileTokenSecret: TEST_FILE_TOKEN_SECRET,
        thumbnailWorkers: 1,
        limits: { acquireTimeoutMs: 500 },
        rateLimits: { rules: [{ label: '/api/', maxRequests: 5, duration: LONG, audience: '' }] },
      });
      await router.ready;
      const host = express();
      host.use('/backend', router);
      http = createAppServer(host);
      await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    }, 60_000);
    afterAll(async () => {
      await new Promise<void>((resolve) => http?.close(() => resolve()));
      await router?.close();
      await db?.destroy();
      await server?.destroy();
      rmSync(dataDir, { recursive: true, force: true });
    });

    test('the instance limits on its own counts, warns once, and shares them again once the database is back', async () => {
      const base = `http://127.0.0.1:${(http.address() as AddressInfo).port}/backend`;
      const health = async () => (await fetch(`${base}/api/health`)).status;
      const syncWarnings = () => logger.lines.filter((line) => line.includes('rate limits: the shared counters could not be synced'));
      expect(await health()).toBe(200);
      await server.stop();
      const during: number[] = [];
      for (let i = 0; i < 4; i++) during.push(await health());
      expect(during.every((status) => status !== 429)).toBe(true);
      await sleep(2_500);
      expect(await health()).toBe(429);
      expect(await health()).toBe(429);
      await sleep(1_500);
      expect(syncWarnings()).toHaveLength(1);
      expect(syncWarnings()[0]).toContain('each instance limits on its own counts');
      await server.start();
      // The pending counts reach the table at the next sync; the log says so once.
      const deadline = Date.now() + 15_000;
      while (!logger.lines.some((line) => line.includes('the shared counters answer again')) && Date.now() < deadline) {
        await health();
        await sleep(300);
      }
      expect(logger.lines.filter((line) => line.includes('the shared counters answer again'))).toHaveLength(1);
      const rows = await db.raw('SELECT sum("hits")::int AS "n" FROM "_recordbase_rate_limits"');
      expect(rows.rows[0].n).toBe(5);
      expect(syncWarnings()).toHaveLength(1);
    }, 60_000);
  });
});
