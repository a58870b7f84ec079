import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import express from 'express';
import knexFactory, { type Knex } from 'knex';
import { mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { BackendWatcher } from '../../lib/db/statements/backend-watcher.js';
import { createRecordsRouter, type RecordsRouter } from '../../lib/index.js';
import { startFreezingProxy, type FreezingProxy } from '../support/freezing-proxy.js';
import { createMemoryLogger } from '../support/test-app.js';
import { startMonitoredPostgres, type MonitoredPostgres, type ThrowawayPostgres } from '../support/throwaway-postgres.js';

/**
 * The backstop that needs no cancel (issue 41, finding 1), on a Postgres of the test's own: when
 * the network between recordbase and the server goes silent mid-transaction, recordbase's cancel
 * cannot arrive and it drops the connection; the server still ends the statement at the
 * transaction's own statement_timeout (SET LOCAL with its BEGIN), instead of running it to its
 * end. And the watcher that keeps a dropped connection's client in its share of the pool tells
 * when a backend has really ended its statement.
 */

let postgres: MonitoredPostgres;
let server: ThrowawayPostgres;
let monitor: pg.Client;

beforeAll(async () => {
  postgres = await startMonitoredPostgres();
  ({ server, monitor } = postgres);
}, 60_000);

afterAll(async () => {
  await postgres?.destroy();
}, 60_000);

/** Statements of `applicationName` running now, with how long each has run. */
async function runningStatements(applicationName: string): Promise<{ pid: number; ms: number }[]> {
  const { rows } = await monitor.query(
    `SELECT pid, CAST(extract(epoch FROM clock_timestamp() - query_start) * 1000 AS integer) AS ms FROM pg_stat_activity WHERE application_name = $1 AND state = 'active'`,
    [applicationName],
  );
  return rows as { pid: number; ms: number }[];
}

async function waitFor(what: string, condition: () => Promise<boolean>, withinMs: number): Promise<number> {
  const started = Date.now();
  while (!(await condition())) {
    if (Date.now() - started > withinMs) throw new Error(`${what}: still not so after ${withinMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return Date.now() - started;
}

describe('a transaction whose network goes silent mid-statement', () => {
  let proxy: FreezingProxy;
  let db: Knex;
  let router: RecordsRouter;
  let base: string;
  let close: () => Promise<void>;
  const applicationName = `rb-backstop-${process.pid}`;

  beforeAll(async () => {
    proxy = await startFreezingProxy({ host: '127.0.0.1', port: server.port });
    db = knexFactory({
      client: 'pg',
      connection: { connectionString: server.url.replace(`:${server.port}/`, `:${proxy.port}/`), application_name: applicationName },
      pool: { min: 0, max: 3 },
      log: { warn: () => undefined },
    });
    router = createRecordsRouter({
      database: db,
      dataDir: mkdtempSync(path.join(os.tmpdir(), 'rb-backstop-')),
      fileSweep: false,
      realtime: false,
      logger: createMemoryLogger(),
      limits: { statementTimeoutMs: 1_000, acquireTimeoutMs: 1_000 },
      collections: [
        { name: 'sleepy', type: 'view', viewQuery: 'SELECT n.id, n.title FROM notes AS n CROSS JOIN LATERAL (SELECT pg_sleep(20)) AS s', rules: { list: '', view: '' } },
        // Creating a note asks the sleepy view: a statement of 20 s inside the batch's transaction.
        { name: 'notes', fields: [{ name: 'title', type: 'text' }], rules: { list: '', view: '', create: "@collection.sleepy.title != 'never'" } },
      ],
    });
    await router.ready;
    await db('notes').insert({ id: 'aaaaaaaaaaaaaaa', title: 'seed' });
    const app = express();
    app.use('/backend', router);
    const listening = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => listening.once('listening', resolve));
    base = `http://127.0.0.1:${(listening.address() as AddressInfo).port}/backend`;
    close = async () => {
      listening.close();
      await router.close();
      await db.destroy();
    };
  }, 60_000);

  afterAll(async () => {
    proxy?.thaw();
    await close?.();
    await proxy?.close();
  }, 60_000);

  test('the server ends the statement at the transaction statement_timeout, although the cancel never arrives', async () => {
    const batch = fetch(`${base}/api/batch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ requests: [{ method: 'POST', url: '/api/collections/notes/records', body: { title: 'x' } }] }),
    });
    // Silence the network once the slow statement runs on the server: the cancel cannot pass.
    await waitFor('the slow statement runs', async () => (await runningStatements(applicationName)).some((s) => s.ms > 100), 5_000);
    const [{ pid }] = await runningStatements(applicationName);
    proxy.freeze();
    const answer = await batch;
    expect(answer.status).toBeGreaterThanOrEqual(400);
    expect(answer.status).not.toBe(500);
    // The statement may run 1 s, plus the cancel's grace (2 s): the server's backstop is 3 s; without it, 20 s.
    const ranFor = await waitFor(
      'the statement ends on the server',
      async () => !(await runningStatements(applicationName)).some((s) => s.pid === pid),
      10_000,
    );
    expect(ranFor).toBeLessThan(10_000);
    proxy.thaw();
  }, 60_000);
});

describe('BackendWatcher', () => {
  const make = (connect: () => Promise<pg.Client>) =>
    new BackendWatcher({
      connect,
      disconnect: (connection) => (connection as pg.Client).end(),
      intervalMs: 50,
      maxWaitMs: 30_000,
      lookTimeoutMs: 1_000,
    });
  const connectTo = (url: string) => async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    return client;
  };

  test('tells when a backend has ended its statement, not before; a backend that is gone is told at once', async () => {
    const sleeper = new pg.Client({ connectionString: server.url });
    await sleeper.connect();
    const sleeping = sleeper.query('SELECT pg_sleep(1.5)');
    const pid = (sleeper as unknown as { processID: number }).processID;
    await sleeping.then(() => undefined, () => undefined);
    const gone = Date.now();
    await make(connectTo(server.url)).waitUntilGone(pid + 100_000);
    expect(Date.now() - gone).toBeLessThan(1_000);

    // Its statement still runs when the watch begins: the watcher waits for the backend to go.
    const busy = new pg.Client({ connectionString: server.url });
    await busy.connect();
    const busyPid = (busy as unknown as { processID: number }).processID;
    const running = busy.query('SELECT pg_sleep(1.5)');
    const watcher = make(connectTo(server.url));
    const started = Date.now();
    const told = watcher.waitUntilGone(busyPid).then(() => Date.now() - started);
    await running;
    await busy.end();
    const waited = await told;
    expect(waited).toBeGreaterThanOrEqual(1_000);
    expect(waited).toBeLessThan(5_000);
    await sleeper.end();
  }, 30_000);

  test('a server that cannot be asked (silent) holds nobody for longer than a look', async () => {
    const proxy = await startFreezingProxy({ host: '127.0.0.1', port: server.port });
    try {
      proxy.freeze();
      const watcher = make(connectTo(server.url.replace(`:${server.port}/`, `:${proxy.port}/`)));
      const started = Date.now();
      await watcher.waitUntilGone(12345);
      expect(Date.now() - started).toBeLessThan(3_000);
    } finally {
      proxy.thaw();
      await proxy.close();
    }
  }, 30_000);
});
