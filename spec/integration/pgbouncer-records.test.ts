/**
 * Issue 43, part A: recordbase behind a pooler in transaction mode. A private PgBouncer (Debian's
 * 1.18, no `max_prepared_statements`, spec/support/pgbouncer.ts) in front of a throwaway Postgres,
 * with a small pool, so that several routers ("instances") share a few server connections as they
 * do behind PgBouncer, Supavisor or Neon's pooled URL.
 *
 * - With `preparedStatements` left on, a named statement lands on a server connection that does
 *   not hold it: the client gets a 503 `prepared_statement_lost` naming `preparedStatements: false`,
 *   never a bare 500.
 * - With `preparedStatements: false`, no statement carries a name (pg_prepared_statements stays
 *   empty on the server) and the records API works through the pooler from two routers.
 *
 * Realtime is off here: LISTEN needs a session connection (docs/realtime.md), which is not this suite's subject.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import knexFactory, { type Knex } from 'knex';
import { createRecordsRouter, type RecordsRouterOptions } from '../../lib/index.js';
import { pgBouncerAvailable, startPgBouncer, type PgBouncer } from '../support/pgbouncer.js';
import { serveRouter, type ServedRouter } from '../support/served-router.js';
import { TEST_FILE_TOKEN_SECRET } from '../support/test-app.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/throwaway-postgres.js';

const TIMEOUT_MS = 60_000;
const WITH_PGBOUNCER = pgBouncerAvailable();

const collections: RecordsRouterOptions['collections'] = [{ name: 'notes', fields: [{ name: 'text', type: 'text' }], rules: { list: '', view: '', create: '', update: '', delete: '' } }];

/** One instance: its own Knex through the pooler and its router, served on its own port. */
interface Instance {
  readonly db: Knex;
  readonly served: ServedRouter;
  /** What the router logged, each line with its cause's message. */
  readonly logged: string[];
  close(): Promise<void>;
}

/** The JSON answer of `method path` on `instance`. */
async function call(instance: Instance, method: string, route: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${instance.served.baseUrl}${route}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

(WITH_PGBOUNCER ? describe : describe.skip)('records through PgBouncer in transaction mode', () => {
  let server: ThrowawayPostgres;
  const owned: { close(): Promise<void> }[] = [];
  const dataDirs: string[] = [];

  async function pooler(poolSize: number): Promise<PgBouncer> {
    const started = await startPgBouncer({ target: { host: '127.0.0.1', port: server.port }, poolMode: 'transaction', poolSize });
    owned.push({ close: () => started.destroy() });
    return started;
  }

  /** A router on `url` (a pooler's), sharing `dataDir` (and so its files) with the others given the same. */
  async function instance(url: string, options: Partial<RecordsRouterOptions> & { dataDir: string; poolMax?: number }): Promise<Instance> {
    const { poolMax, ...rest } = options;
    const db = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: poolMax ?? 2 }, log: { warn: () => undefined, error: () => undefined } });
    const logged: string[] = [];
    const log = (message: string, cause?: unknown) => void logged.push(`${message} ${cause instanceof Error ? cause.message : String(cause ?? '')}`);
    const logger = { error: log, warn: log, info: log };
    const router = createRecordsRouter({ collections, logger, fileSweep: false, realtime: false, fileTokenSecret: TEST_FILE_TOKEN_SECRET, thumbnailWorkers: 1, ...rest, database: db });
    const served = await serveRouter(router);
    const made: Instance = {
      db,
      served,
      logged,
      async close() {
        await served.close();
        await db.destroy();
      },
    };
    owned.push(made);
    return made;
  }

  function dataDir(): string {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'rb-pgbouncer-'));
    dataDirs.push(dir);
    return dir;
  }

  beforeAll(async () => {
    server = await startThrowawayPostgres();
  }, TIMEOUT_MS);

  afterAll(async () => {
    for (const item of owned.reverse()) await item.close().catch(() => undefined);
    await server?.destroy();
    for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
  }, TIMEOUT_MS);

  /** The prepared statements of the pooler's one server connection (its pool has one, so every client's statements land there). */
  async function preparedOnServer(through: Instance): Promise<string[]> {
    const rows = (await through.db.raw('SELECT name FROM pg_prepared_statements ORDER BY name')) as { rows: { name: string }[] };
    return rows.rows.map((row) => row.name);
  }

  test('preparedStatements left on: a named statement the pooler lost is a 503 naming preparedStatements: false, not a 500', async () => {
    const bouncer = await pooler(1);
    const dir = dataDir();
    // Two instances, one server connection: the first prepares the create's INSERT there, the
    // second's connection never prepared it and sends its Parse, which the server refuses.
    const first = await instance(bouncer.url('postgres'), { dataDir: dir });
    const second = await instance(bouncer.url('postgres'), { dataDir: dir });
    expect(await call(first, 'POST', '/api/collections/notes/records', { text: 'one' })).toMatchObject({ status: 200 });
    const refused = await call(second, 'POST', '/api/collections/notes/records', { text: 'two' });
    expect(refused).toMatchObject({ status: 503, body: { status: 503, data: {} } });
    expect(refused.body.message).toMatch(/prepared statement/);
    expect(refused.body.message).toContain('`preparedStatements: false`');
    expect(JSON.stringify(refused.body)).not.toMatch(/already exists|at .*\.ts/);
    // The logger has the driver's own error for the operator.
    expect(second.logged.join('\n')).toMatch(/prepared statement "rb_[0-9a-f]+" already exists/);
    // Nothing half-written: the refused create left no row.
    const { rows } = (await first.db.raw('SELECT text FROM notes ORDER BY text')) as { rows: { text: string }[] };
    expect(rows.map((row) => row.text)).toEqual(['one']);
    await first.close();
    await second.close();
  }, TIMEOUT_MS);

  test('preparedStatements: false: no statement is sent with a name, and two instances create, read and update through one server connection', async () => {
    const bouncer = await pooler(1);
    const dir = dataDir();
    const first = await instance(bouncer.url('postgres'), { dataDir: dir, preparedStatements: false });
    const second = await instance(bouncer.url('postgres'), { dataDir: dir, preparedStatements: false });
    await first.db.raw('DEALLOCATE ALL');
    for (let i = 0; i < 4; i++) {
      for (const [n, through] of [first, second].entries()) {
        const created = await call(through, 'POST', '/api/collections/notes/records', { text: `false-${i}-${n}` });
        expect(created).toMatchObject({ status: 200 });
        const id = created.body.id as string;
        expect(await call(through === first ? second : first, 'PATCH', `/api/collections/notes/records/${id}`, { text: `changed-${i}-${n}` })).toMatchObject({ status: 200, body: { text: `changed-${i}-${n}` } });
        expect(await call(through, 'GET', `/api/collections/notes/records/${id}`)).toMatchObject({ status: 200, body: { text: `changed-${i}-${n}` } });
      }
    }
    expect(await preparedOnServer(first)).toEqual([]);
    await first.close();
    await second.close();
  }, TIMEOUT_MS);
});
