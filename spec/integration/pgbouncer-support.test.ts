/**
 * Checks the PgBouncer test helper (spec/support/pgbouncer.ts) against a real PgBouncer: Debian's
 * 1.18, which has no `max_prepared_statements`. In transaction mode plain and unnamed
 * parameterised queries work from many clients over a few server connections, while a named
 * prepared statement does not follow its client: a second client preparing the same name on the
 * same server connection gets "already exists", and a client whose server connection changed
 * gets "does not exist". That is why issue 43's `preparedStatements: false` exists. The helper's
 * admin commands, stop and start are checked too, and transaction mode in front of the shared
 * server at :5432 (read-only statements only).
 */
import { existsSync } from 'node:fs';
import pg from 'pg';
import { pgBouncerAvailable, startPgBouncer, type PgBouncer } from '../support/pgbouncer.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/throwaway-postgres.js';

/** Generous: initdb + start is 1-2 s here, but a loaded 2-core machine can be many times slower. */
const TIMEOUT_MS = 60_000;
const WITH_PGBOUNCER = pgBouncerAvailable();
const NEXT = 'SELECT $1::int + 1 AS n';

/** Clients a test opened, ended after it whatever happened. */
const clients: pg.Client[] = [];

async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  // A client whose connection the pooler closes emits 'error'; the query's rejection is what tests check.
  client.on('error', () => undefined);
  clients.push(client);
  await client.connect();
  return client;
}

afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.end().catch(() => undefined)));
});

/** Polls `probe` until it returns true; fails with `what` after `timeoutMs`. */
async function until(what: string, probe: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** The backend pids of the pooler's server connections to `database`. */
async function serverPids(bouncer: PgBouncer, database: string): Promise<number[]> {
  const rows = await bouncer.admin('SHOW SERVERS');
  return rows.filter((row) => row.database === database).map((row) => Number(row.remote_pid));
}

(WITH_PGBOUNCER ? describe : describe.skip)('PgBouncer in front of a throwaway Postgres', () => {
  let server: ThrowawayPostgres;
  const bouncers: PgBouncer[] = [];

  async function bouncer(poolMode: 'transaction' | 'session', poolSize: number): Promise<PgBouncer> {
    const started = await startPgBouncer({ target: { host: '127.0.0.1', port: server.port }, poolMode, poolSize });
    bouncers.push(started);
    return started;
  }

  beforeAll(async () => {
    server = await startThrowawayPostgres();
  }, TIMEOUT_MS);

  afterAll(async () => {
    await Promise.all(bouncers.map((b) => b.destroy()));
    await server?.destroy();
  }, TIMEOUT_MS);

  test('transaction mode: plain and unnamed parameterised queries from 6 clients share 2 server connections', async () => {
    const pooler = await bouncer('transaction', 2);
    expect(pooler.url('postgres')).toBe(`postgres://postgres@127.0.0.1:${pooler.port}/postgres`);
    const many = await Promise.all(Array.from({ length: 6 }, () => connect(pooler.url('postgres'))));
    const backends = new Set<number>();
    await Promise.all(
      many.map(async (client, c) => {
        for (let i = 0; i < 20; i++) {
          const plain = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
          backends.add(plain.rows[0]!.pid);
          const bound = await client.query<{ n: number }>(NEXT, [c * 100 + i]);
          expect(bound.rows[0]!.n).toBe(c * 100 + i + 1);
        }
      }),
    );
    // Six clients, at most two backends: the statements really went through the pool.
    expect(backends.size).toBeLessThanOrEqual(2);
    const pids = await serverPids(pooler, 'postgres');
    expect(pids.length).toBeLessThanOrEqual(2);
    for (const pid of backends) expect(pids).toContain(pid);
    const pools = (await pooler.admin('SHOW POOLS')).filter((row) => row.database === 'postgres');
    expect(pools.map((row) => row.pool_mode)).toEqual(['transaction']);
  }, TIMEOUT_MS);

  test('transaction mode: a named prepared statement "already exists" for a second client, and "does not exist" once the server connection changed', async () => {
    // One server connection, so that both clients' statements land on it, every time.
    const pooler = await bouncer('transaction', 1);
    const first = await connect(pooler.url('postgres'));
    const second = await connect(pooler.url('postgres'));

    expect((await first.query<{ n: number }>({ name: 'next', text: NEXT, values: [1] })).rows[0]!.n).toBe(2);
    // node-postgres prepares `next` on its own connection once; the pooler gives the second
    // client the server connection that already holds it.
    await expect(second.query({ name: 'next', text: NEXT, values: [1] })).rejects.toThrow('prepared statement "next" already exists');
    // Unnamed statements are parsed anew every time, on whatever server connection: they work.
    expect((await second.query<{ n: number }>(NEXT, [5])).rows[0]!.n).toBe(6);

    // RECONNECT closes the server connection once it is released (it is idle); the next
    // statement gets a fresh one, where `next` was never prepared.
    const [before] = await serverPids(pooler, 'postgres');
    expect(before).toBeDefined();
    await pooler.admin('RECONNECT postgres');
    await until('the old server connection is closed', async () => !(await serverPids(pooler, 'postgres')).includes(before!));
    await expect(first.query({ name: 'next', text: NEXT, values: [2] })).rejects.toThrow('prepared statement "next" does not exist');
    expect((await first.query<{ n: number }>(NEXT, [7])).rows[0]!.n).toBe(8);
    expect(await serverPids(pooler, 'postgres')).not.toContain(before);
  }, TIMEOUT_MS);

  test('session mode: the same named statements work (each client keeps its server connection)', async () => {
    const pooler = await bouncer('session', 2);
    const first = await connect(pooler.url('postgres'));
    const second = await connect(pooler.url('postgres'));
    for (let i = 0; i < 3; i++) {
      expect((await first.query<{ n: number }>({ name: 'next', text: NEXT, values: [i] })).rows[0]!.n).toBe(i + 1);
      expect((await second.query<{ n: number }>({ name: 'next', text: NEXT, values: [i] })).rows[0]!.n).toBe(i + 1);
    }
    await pooler.admin('RECONNECT postgres');
    expect((await first.query<{ n: number }>({ name: 'next', text: NEXT, values: [9] })).rows[0]!.n).toBe(10);
  }, TIMEOUT_MS);

  test('KILL drops the clients and server connections of a database until RESUME', async () => {
    const pooler = await bouncer('transaction', 2);
    const held = await connect(pooler.url('postgres'));
    await held.query('SELECT 1');
    expect((await serverPids(pooler, 'postgres')).length).toBeGreaterThan(0);

    await pooler.admin('KILL postgres');
    await expect(held.query('SELECT 1')).rejects.toThrow();
    expect(await serverPids(pooler, 'postgres')).toEqual([]);
    await pooler.admin('RESUME postgres');
    const fresh = await connect(pooler.url('postgres'));
    expect((await fresh.query<{ one: number }>('SELECT 1 AS one')).rows[0]!.one).toBe(1);
  }, TIMEOUT_MS);

  test('stop closes every connection; start serves again on the same port; destroy removes its files', async () => {
    const pooler = await bouncer('transaction', 2);
    const held = await connect(pooler.url('postgres'));
    await held.query('SELECT 1');
    const port = pooler.port;

    await pooler.stop();
    expect(pooler.running).toBe(false);
    await expect(held.query('SELECT 1')).rejects.toThrow();
    await expect(connect(pooler.url('postgres'))).rejects.toThrow(/ECONNREFUSED/);

    await pooler.start();
    expect(pooler.running).toBe(true);
    expect(pooler.port).toBe(port);
    const fresh = await connect(pooler.url('postgres'));
    expect((await fresh.query<{ one: number }>('SELECT 1 AS one')).rows[0]!.one).toBe(1);

    await pooler.destroy();
    await expect(connect(pooler.url('postgres'))).rejects.toThrow(/ECONNREFUSED/);
    expect(existsSync(pooler.baseDir)).toBe(false);
  }, TIMEOUT_MS);
});

const SHARED = process.env.RB_TEST_POSTGRES;

(WITH_PGBOUNCER && SHARED ? describe : describe.skip)('PgBouncer in transaction mode in front of the shared Postgres (read-only)', () => {
  let pooler: PgBouncer;
  let database: string;

  beforeAll(async () => {
    const url = new URL(SHARED!);
    database = decodeURIComponent(url.pathname.slice(1));
    pooler = await startPgBouncer({ target: { host: url.hostname, port: Number(url.port || 5432) }, poolMode: 'transaction', poolSize: 1 });
  }, TIMEOUT_MS);

  afterAll(async () => {
    await pooler?.destroy();
  }, TIMEOUT_MS);

  test('reads answer through one pooled server connection', async () => {
    const [a, b] = await Promise.all([connect(pooler.url(database)), connect(pooler.url(database))]);
    const pids = new Set<number>();
    for (const client of [a!, b!, a!, b!]) {
      const { rows } = await client.query<{ db: string; pid: number; n: number }>('SELECT current_database() AS db, pg_backend_pid() AS pid, $1::int AS n', [3]);
      expect(rows[0]).toMatchObject({ db: database, n: 3 });
      pids.add(rows[0]!.pid);
    }
    expect(pids.size).toBe(1);
    expect(await serverPids(pooler, database)).toEqual([...pids]);
  }, TIMEOUT_MS);
});
