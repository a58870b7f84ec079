/**
 * Issue 42, step 3: recordbase bounds its own statements (timeout, cancel, fair gate) in its own
 * send path and leaves the host's Knex exactly as the host made it. A host passes its Knex as
 * `database`, recordbase serves requests on it with a short statement timeout and one connection
 * per client, and then the host's own queries: same client object, same class and prototype, no
 * key added; a query longer than recordbase's timeout runs to its end; a transaction of the
 * host's runs with the server's own statement_timeout; the host's concurrent queries are not held
 * to recordbase's per-client share of the pool. Before this step, recordbase swapped the
 * prototype of the host's client, and the first assertion failed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Knex } from 'knex';
import { createRecordsRouter } from '../../lib/index.js';
import { serveRouter, type ServedRouter } from '../support/served-router.js';
import { openTestDatabase, testEngines, type TestDatabase } from '../support/test-database.js';

const collections = [{ name: 'notes', fields: [{ name: 'text', type: 'text' as const }], rules: { list: '', view: '', create: '', update: '', delete: '' } }];
const RECORDBASE_TIMEOUT_MS = 300;

const engines = testEngines().filter((engine) => engine === 'postgres');
const describeOnPostgres = engines.length > 0 ? describe : describe.skip;

describeOnPostgres("the host's Knex is left as the host made it (Postgres)", () => {
  let database: TestDatabase;
  let db: Knex;
  let served: ServedRouter;
  let dataDir: string;
  let before: { prototype: object | null; constructor: unknown; keys: (string | symbol)[]; serverTimeout: string };
  const hostLog: string[] = [];

  beforeAll(async () => {
    database = await openTestDatabase('postgres');
    db = database.db;
    // Knex's own setup of the client and its first connection happen before the snapshot.
    const shown = await db.raw('SHOW statement_timeout');
    before = {
      prototype: Object.getPrototypeOf(db.client),
      constructor: db.client.constructor,
      keys: Reflect.ownKeys(db.client),
      serverTimeout: shown.rows[0].statement_timeout,
    };
    db.on('query', (query: { sql: string }) => hostLog.push(query.sql));
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'rb-host-knex-'));
    served = await serveRouter(
      createRecordsRouter({ database: db, collections, dataDir, realtime: false, limits: { statementTimeoutMs: RECORDBASE_TIMEOUT_MS, maxConnectionsPerClient: 1 } }),
    );
    const created = await fetch(`${served.baseUrl}/api/collections/notes/records`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: 'hello' }) });
    expect(created.status).toBe(200);
    const id = ((await created.json()) as { id: string }).id;
    const updated = await fetch(`${served.baseUrl}/api/collections/notes/records/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: 'again' }) });
    expect(updated.status).toBe(200);
    const listed = await fetch(`${served.baseUrl}/api/collections/notes/records`);
    expect(listed.status).toBe(200);
    expect(((await listed.json()) as { totalItems: number }).totalItems).toBe(1);
  }, 60_000);

  afterAll(async () => {
    await served?.close();
    await database?.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('the client keeps its object, class and prototype, and gains no key', () => {
    expect(Object.getPrototypeOf(db.client)).toBe(before.prototype);
    expect(db.client.constructor).toBe(before.constructor);
    expect(Reflect.ownKeys(db.client).filter((key) => !before.keys.includes(key))).toEqual([]);
  });

  test("the host's query log still shows recordbase's statements (Knex's public query event)", () => {
    expect(hostLog.some((sql) => /select .* from "notes"/i.test(sql))).toBe(true);
  });

  test("a host query longer than recordbase's statement timeout runs to its end", async () => {
    const result = await db.raw(`SELECT true AS "slept" FROM pg_sleep(${(RECORDBASE_TIMEOUT_MS * 3) / 1000})`);
    expect(result.rows).toEqual([{ slept: true }]);
  });

  test("a host transaction runs with the server's own statement_timeout, not recordbase's", async () => {
    const shown = await db.transaction((trx) => trx.raw('SHOW statement_timeout'));
    expect(shown.rows[0].statement_timeout).toBe(before.serverTimeout);
  });

  test("the host's concurrent queries take the whole pool, not recordbase's per-client share", async () => {
    const pool = db.client.pool as { max: number };
    const marker = `host_${process.pid}_${Date.now()}`;
    // `.then` sends each (a Knex query runs once it is awaited).
    const sleeping = Array.from({ length: pool.max }, () => db.raw(`SELECT pg_sleep(1.5), ? AS marker`, [marker]).then((result) => result));
    // Counted from a connection of its own, while the host's statements run.
    const monitor = await openTestDatabase('postgres');
    try {
      let seen = 0;
      for (let attempt = 0; attempt < 50 && seen < pool.max; attempt++) {
        const active = await monitor.db.raw(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'SELECT pg_sleep(1.5), $1 AS marker' AND pid <> pg_backend_pid()`);
        seen = Math.max(seen, active.rows[0].n);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(seen).toBe(pool.max);
    } finally {
      await Promise.all(sleeping);
      await monitor.destroy();
    }
  }, 30_000);
});
