import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import knexFactory, { type Knex } from 'knex';
import { createAppServer, createRecordsRouter, type RecordsRouter } from '../../lib/index.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { startPrimaryWithReplica, type PrimaryWithReplica } from '../support/replica.js';
import { testKnexLog } from '../support/test-database.js';
import { pointsOf, registerTestTelemetry, type TestTelemetry } from '../support/telemetry-sdk.js';

/*
 * Issue 44, part 1: the replica's lag is the gauge recordbase.db.replica.lag (seconds), the same
 * upper bound replicaStatus() shows, against a real primary and its streaming standby
 * (spec/support/replica.ts). With replay paused the gauge grows past a second. Postgres only by
 * nature (two clusters of its own).
 */

const TIMEOUT_MS = 120_000;

describe('the replica lag gauge', () => {
  let pair: PrimaryWithReplica;
  let primary: Knex;
  let replica: Knex;
  let router: RecordsRouter;
  let server: Server;
  let baseUrl: string;
  let dataDir: string;
  let telemetry: TestTelemetry;

  beforeAll(async () => {
    telemetry = registerTestTelemetry();
    pair = await startPrimaryWithReplica();
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'rb-telemetry-replica-'));
    primary = knexFactory({ client: 'pg', connection: pair.primary.url, pool: { min: 0, max: 4 }, log: testKnexLog });
    replica = knexFactory({ client: 'pg', connection: pair.replica.url, pool: { min: 0, max: 4 }, log: testKnexLog });
    router = createRecordsRouter({
      collections: [{ name: 'notes', fields: [{ name: 'title', type: 'text' }], rules: OPEN_RULES }],
      database: primary,
      readReplica: { database: replica, maxLagMs: 1000 },
      dataDir,
      realtime: false,
      fileSweep: false,
      logger: { error: () => undefined, warn: () => undefined, info: () => undefined },
    });
    await router.ready;
    const app = express();
    app.use('/backend', router);
    server = createAppServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/backend`;
  }, TIMEOUT_MS);

  afterAll(async () => {
    await new Promise<void>((resolve) => server?.close(() => resolve()));
    await router?.close();
    await primary?.destroy();
    await replica?.destroy();
    await pair?.destroy();
    await fs.rm(dataDir, { recursive: true, force: true });
    await telemetry?.stop();
  }, TIMEOUT_MS);

  /** The gauge's one value now (seconds), or undefined when it reports none. */
  async function lagGauge(): Promise<number | undefined> {
    const points = pointsOf(await telemetry.collectMetrics(), 'recordbase.db.replica.lag');
    expect(points.length).toBeLessThanOrEqual(1);
    return points[0]?.value as number | undefined;
  }

  /** Lists (reads flow, so the lag is sampled) until `done` holds. */
  async function readUntil(done: () => Promise<boolean>): Promise<void> {
    const deadline = Date.now() + 30_000;
    while (!(await done())) {
      if (Date.now() > deadline) throw new Error('timed out');
      expect((await fetch(`${baseUrl}/api/collections/notes/records`)).status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  it('reports the lag replicaStatus() shows, and a growing one while replay is paused', async () => {
    await readUntil(async () => router.replicaStatus()?.lagMs != null);
    const gauge = await lagGauge();
    const status = router.replicaStatus()!.lagMs!;
    expect(gauge).toEqual(expect.any(Number));
    // The same bound, read a moment apart (it moves with time between samples).
    expect(Math.abs(gauge! - status / 1000)).toBeLessThan(1);
    await pair.pauseReplay();
    try {
      // A write the replica cannot replay now: its lag's bound grows from here.
      const response = await fetch(`${baseUrl}/api/collections/notes/records`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"title":"x"}' });
      expect(response.status).toBe(200);
      await readUntil(async () => ((await lagGauge()) ?? 0) > 1.5);
      expect(router.replicaStatus()!.lagMs!).toBeGreaterThan(1500);
    } finally {
      await pair.resumeReplay();
    }
  }, TIMEOUT_MS);
});
