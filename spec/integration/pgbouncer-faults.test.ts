/**
 * Issue 43, part A: faults behind a pooler in transaction mode, on a real PgBouncer (Debian's
 * 1.18) in front of a throwaway Postgres.
 *
 * - A slow filter: the statement timeout's cancel goes to the pooler (its host and port, with the
 *   key the pooler gave), which forwards it to the server connection running the statement: the
 *   client gets the 400 `statement_timeout`, that backend is idle again soon after
 *   (pg_stat_activity), and the next request answers.
 * - The server connection of a batch's transaction is terminated between its BEGIN and COMMIT (a
 *   before-hook of the batch runs pg_terminate_backend on it): nothing of the batch is kept, the
 *   client gets a 503, and the requests after it answer 200.
 *
 * Without parallel query workers, so that the slow statement costs one core of this shared machine.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import { createRecordsRouter, type RecordsRouterOptions } from '../../lib/index.js';
import { pgBouncerAvailable, startPgBouncer, type PgBouncer } from '../support/pgbouncer.js';
import { serveRouter, type ServedRouter } from '../support/served-router.js';
import { startMonitoredPostgres, type MonitoredPostgres } from '../support/throwaway-postgres.js';

const TIMEOUT_MS = 60_000;
const WITH_PGBOUNCER = pgBouncerAvailable();
const ROWS = 4_000;
/** 150 regular-expression tests on 4,000 rows of 1 KB: seconds of one core, far past the 400 ms timeout below. */
const SLOW_FILTER = Array.from({ length: 150 }, (_, i) => `text ~ 'zq${i}'`).join(' || ');
const STATEMENT_TIMEOUT_MS = 400;

const collections: RecordsRouterOptions['collections'] = [{ name: 'notes', fields: [{ name: 'text', type: 'text' }], rules: { list: '', view: '', create: '', update: '', delete: '' } }];

async function call(served: ServedRouter, method: string, route: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${served.baseUrl}${route}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** Polls `probe` until it returns a value; fails naming `what` after `timeoutMs`. */
async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await probe();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

(WITH_PGBOUNCER ? describe : describe.skip)('faults through PgBouncer in transaction mode', () => {
  let postgres: MonitoredPostgres;
  let monitor: pg.Client;
  let bouncer: PgBouncer;
  let db: Knex;
  let served: ServedRouter;
  let dataDir: string;
  /** The pid the next `kill` note's before-hook terminates, once it has seen it (set by the test). */
  let killed: number | undefined;

  beforeAll(async () => {
    postgres = await startMonitoredPostgres({ settings: { max_parallel_workers_per_gather: 0 } });
    monitor = postgres.monitor;
    bouncer = await startPgBouncer({ target: { host: '127.0.0.1', port: postgres.server.port }, poolMode: 'transaction', poolSize: 2 });
    db = knexFactory({ client: 'pg', connection: bouncer.url('postgres'), pool: { min: 0, max: 2 }, log: { warn: () => undefined, error: () => undefined } });
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'rb-pgbouncer-faults-'));
    const router = createRecordsRouter({
      collections,
      database: db,
      dataDir,
      preparedStatements: false,
      realtime: false,
      fileSweep: false,
      thumbnailWorkers: 1,
      logger: { error: () => undefined, warn: () => undefined, info: () => undefined },
      limits: { statementTimeoutMs: STATEMENT_TIMEOUT_MS },
      hooks: {
        notes: {
          // Ends the server connection of the batch's transaction while it is open (idle in
          // transaction between two of its statements), as a pooler or a failover does.
          beforeCreate: async (e) => {
            if (e.data.text !== 'kill') return;
            const { rows } = await monitor.query<{ pid: number }>(
              "SELECT pid FROM pg_stat_activity WHERE datname = 'postgres' AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()",
            );
            expect(rows).toHaveLength(1);
            killed = rows[0]!.pid;
            await monitor.query('SELECT pg_terminate_backend($1)', [killed]);
            await until('the backend is gone', async () => ((await monitor.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [killed])).rowCount === 0 ? true : undefined));
          },
        },
      },
    });
    served = await serveRouter(router);
    await monitor.query(
      `INSERT INTO notes (id, text, created, updated)
       SELECT substr(md5(i::text), 1, 15), repeat(md5(i::text), 32), now(), now() FROM generate_series(1, $1::int) AS i`,
      [ROWS],
    );
  }, TIMEOUT_MS);

  afterAll(async () => {
    await served?.close();
    await db?.destroy();
    await bouncer?.destroy();
    await postgres?.destroy();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }, TIMEOUT_MS);

  /** The backend running the slow filter now, if one is. */
  async function slowBackend(): Promise<number | undefined> {
    // The filter's values are bound parameters: the statement is told by its text (`~` is ILIKE).
    const { rows } = await monitor.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%FROM \"notes\"%ILIKE%' AND pid <> pg_backend_pid()");
    return rows[0]?.pid;
  }

  test("a slow filter: the cancel reaches the statement's backend through the pooler, the client gets 400 statement_timeout, the backend is idle after, the next request answers", async () => {
    const started = Date.now();
    const answer = call(served, 'GET', `/api/collections/notes/records?skipTotal=1&filter=${encodeURIComponent(SLOW_FILTER)}`);
    const pid = await until('the slow filter runs on the server', slowBackend);
    const { status, body } = await answer;
    expect({ status, code: body.status, message: body.message }).toMatchObject({ status: 400, code: 400, message: expect.stringContaining(`statement timeout (${STATEMENT_TIMEOUT_MS} ms, limits.statementTimeoutMs)`) });
    expect(Date.now() - started).toBeLessThan(STATEMENT_TIMEOUT_MS + 2_000);
    // The backend that ran it was cancelled, not left running, within a second: idle in the
    // pooler's pool, or closed by the pooler (which may close a server connection whose client
    // left while a cancel was under way: recordbase closes a cancelled connection).
    const state = await until(
      'the backend no longer runs the statement',
      async () => {
        const { rows } = await monitor.query<{ state: string }>('SELECT state FROM pg_stat_activity WHERE pid = $1', [pid]);
        if (rows.length === 0) return 'closed';
        return rows[0]!.state === 'active' ? undefined : rows[0]!.state;
      },
      1_000,
    );
    expect(['idle', 'closed']).toContain(state);
    expect(await slowBackend()).toBeUndefined();
    expect((await call(served, 'GET', '/api/collections/notes/records?perPage=1')).status).toBe(200);
  }, TIMEOUT_MS);

  test("the pooler's server connection dropped between a batch's BEGIN and COMMIT: nothing kept, a 503, and the next requests answer 200", async () => {
    killed = undefined;
    const answer = await call(served, 'POST', '/api/batch', {
      requests: [
        { method: 'POST', url: '/api/collections/notes/records', body: { text: 'batch first' } },
        { method: 'POST', url: '/api/collections/notes/records', body: { text: 'kill' } },
        { method: 'POST', url: '/api/collections/notes/records', body: { text: 'batch last' } },
      ],
    });
    expect(killed).toBeDefined();
    expect(answer.status).toBe(503);
    expect(answer.body).toMatchObject({ status: 503, message: 'The database is unavailable. Try again later.', data: {} });
    const { rows } = await monitor.query<{ text: string }>("SELECT text FROM notes WHERE text IN ('batch first', 'kill', 'batch last')");
    expect(rows).toEqual([]);
    // The pool is healthy: every connection of the Knex and of the pooler serves again.
    for (let i = 0; i < 4; i++) {
      expect((await call(served, 'POST', '/api/collections/notes/records', { text: `after ${i}` })).status).toBe(200);
      expect((await call(served, 'GET', '/api/collections/notes/records?perPage=1&filter=' + encodeURIComponent(`text = "after ${i}"`))).body).toMatchObject({ totalItems: 1 });
    }
  }, TIMEOUT_MS);
});
