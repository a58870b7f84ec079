/**
 * A rolling restart loses no request (issue 44, part 2; docs/deployment.md, "Rolling restarts:
 * readiness and drain"): two instances, separate processes on the shared Postgres, behind a load
 * balancer that probes `GET /api/health` every 100 ms and sends a request the drain refused to
 * the other instance. Under steady reads and writes from several clients, instance 0 is stopped
 * as a host stops it at SIGTERM (records.close(), then server.close()) and a new one started in
 * its place, then instance 1 the same way: no client request fails, and every write the clients
 * sent is in the database exactly once.
 */
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureBuilt } from '../support/built-package.js';
import { startHealthCheckedBalancer, type HealthCheckedBalancer } from '../support/health-checked-balancer.js';
import { startInstances, type Instance, type StartInstancesOptions } from '../support/multi-instance.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { requestOnce } from '../support/request-once.js';
import { TEST_IDENTITIES } from '../support/test-app.js';
import { openTestDatabase, type TestDatabase } from '../support/test-database.js';

const CLIENTS = 4;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const postgresOnly = process.env.RB_TEST_POSTGRES ? test : test.skip;
if (!process.env.RB_TEST_POSTGRES) console.warn('Postgres is not reachable: the rolling-restart suite does not run (several processes need one Postgres).');

let database: TestDatabase;
let diskRoot: string;
const stops: Array<() => Promise<void>> = [];
let balancer: HealthCheckedBalancer | undefined;

beforeAll(async () => {
  if (!process.env.RB_TEST_POSTGRES) return;
  await ensureBuilt();
  database = await openTestDatabase('postgres');
  diskRoot = await fs.mkdtemp(path.join(os.tmpdir(), 'rb-rolling-'));
}, 180_000);

afterAll(async () => {
  await balancer?.close();
  for (const stop of stops) await stop();
  await database?.destroy();
  if (diskRoot) await fs.rm(diskRoot, { recursive: true, force: true });
});

/** Starts `count` instances on the test's schema, each able to be closed as a host closes it. */
async function start(count: number): Promise<Instance[]> {
  const options: StartInstancesOptions = {
    count,
    databaseUrl: database.url!,
    schema: database.schema,
    storage: { kind: 'disk', root: diskRoot },
    collections: [{ name: 'entries', fields: [{ name: 'marker', type: 'text' }], rules: OPEN_RULES }],
    identities: TEST_IDENTITIES,
    drainMs: 5_000,
  };
  const { instances, stopAll } = await startInstances(options);
  stops.push(stopAll);
  return instances;
}

postgresOnly(
  'two instances restarted one after the other under load: no client request fails, every write lands exactly once',
  async () => {
    const instances = await start(2);
    balancer = await startHealthCheckedBalancer(
      instances.map((instance) => instance.url),
      { healthPath: '/backend/api/health', probeMs: 100 },
    );
    const lb = balancer;
    const api = `${lb.url}/backend/api/collections/entries/records`;
    // Both in before the load starts.
    for (let i = 0; i < 50 && (await requestOnce(`${lb.url}/backend/api/health`)).status !== 200; i++) await sleep(100);

    const failures: string[] = [];
    const written: string[] = [];
    let reads = 0;
    let running = true;
    const clients = Array.from({ length: CLIENTS }, async (_, client) => {
      for (let n = 0; running; n++) {
        const marker = `c${client}-${n}`;
        try {
          const created = await requestOnce(api, { method: 'POST', json: { marker } });
          if (created.status === 200) written.push(marker);
          else failures.push(`POST ${marker}: ${created.status} ${created.text.slice(0, 200)}`);
          const listed = await requestOnce(`${api}?perPage=5&sort=-created`);
          if (listed.status === 200) reads++;
          else failures.push(`GET list: ${listed.status} ${listed.text.slice(0, 200)}`);
        } catch (error) {
          failures.push(`${marker}: ${(error as Error).message}`);
        }
      }
    });

    await sleep(1_000);
    for (const index of [0, 1]) {
      const servedBefore = lb.served[index]!;
      await instances[index]!.shutdown();
      const [replacement] = await start(1);
      lb.replace(index, replacement!.url);
      // The new instance takes traffic before the next one stops.
      for (let i = 0; i < 100 && lb.served[index]! <= servedBefore + 5; i++) await sleep(100);
      expect(lb.served[index]!).toBeGreaterThan(servedBefore + 5);
    }
    await sleep(1_000);
    running = false;
    await Promise.all(clients);

    expect(failures).toEqual([]);
    expect(written.length).toBeGreaterThan(50);
    expect(reads).toBeGreaterThan(50);
    const rows = (await database.db('entries').select('marker').count('* as copies').groupBy('marker')) as Array<{ marker: string; copies: string | number }>;
    expect(rows.filter((row) => Number(row.copies) !== 1)).toEqual([]);
    expect(rows.map((row) => row.marker).sort()).toEqual([...written].sort());
    // What the balancer did for it (informational: how many refusals it sent elsewhere).
    console.info(`rolling restart: ${written.length} writes, ${reads} reads, retried after a drain refusal ${lb.retried.drain}, after a refused connection ${lb.retried.refused}`);
  },
  180_000,
);
