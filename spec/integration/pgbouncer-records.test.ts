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
import { sdkOf } from '../support/served-router.js';
import { TEST_FILE_TOKEN_SECRET, TEST_IDENTITIES } from '../support/test-app.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/throwaway-postgres.js';

const TIMEOUT_MS = 60_000;
const WITH_PGBOUNCER = pgBouncerAvailable();

const OPEN = { list: '', view: '', create: '', update: '', delete: '' };
const collections: RecordsRouterOptions['collections'] = [
  { name: 'notes', fields: [{ name: 'text', type: 'text' }], rules: OPEN },
  { name: 'authors', fields: [{ name: 'name', type: 'text' }], rules: OPEN },
  {
    name: 'posts',
    fields: [
      { name: 'title', type: 'text' },
      { name: 'owner', type: 'text' },
      { name: 'author', type: 'relation', collection: 'authors' },
      { name: 'doc', type: 'file' },
    ],
    // Signed-in callers create; only the owner changes or deletes.
    rules: { list: '', view: '', create: '@request.auth.id != "" && owner = @request.auth.id', update: 'owner = @request.auth.id', delete: 'owner = @request.auth.id' },
  },
];

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
    const router = createRecordsRouter({ collections, logger, auth: (token) => TEST_IDENTITIES[token] ?? null, fileSweep: false, realtime: false, fileTokenSecret: TEST_FILE_TOKEN_SECRET, thumbnailWorkers: 1, ...rest, database: db });
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
  test('preparedStatements: false: the records API through the pooler from two instances with the PocketBase SDK (CRUD, filter, sort, expand, files, batch, rules)', async () => {
    const bouncer = await pooler(2);
    const dir = dataDir();
    const one = await instance(bouncer.url('postgres'), { dataDir: dir, preparedStatements: false, poolMax: 3 });
    const two = await instance(bouncer.url('postgres'), { dataDir: dir, preparedStatements: false, poolMax: 3 });
    const [guestOne, aliceOne, bobOne] = [sdkOf(one.served), sdkOf(one.served, 'token-alice'), sdkOf(one.served, 'token-bob')];
    const [guestTwo, aliceTwo] = [sdkOf(two.served), sdkOf(two.served, 'token-alice')];
    const alice = TEST_IDENTITIES['token-alice']!.id;

    const ann = await guestOne.collection('authors').create({ name: 'Ann' });
    const bea = await guestTwo.collection('authors').create({ name: 'Bea' });

    // A rule-gated create: the guest is refused on one instance, Alice's lands on the other with a file.
    await expect(guestTwo.collection('posts').create({ title: 'sneaky', owner: alice })).rejects.toMatchObject({ status: 403 });
    const body = 'a file through the pooler';
    const first = await aliceTwo.collection('posts').create({ title: 'hello one', owner: alice, author: ann.id, doc: new File([body], 'notes.txt', { type: 'text/plain' }) });
    const second = await aliceOne.collection('posts').create({ title: 'hello two', owner: alice, author: bea.id });
    await aliceOne.collection('posts').create({ title: 'other', owner: alice, author: ann.id });
    expect(first.doc).toMatch(/^notes_\w+\.txt$/);

    // List with filter, sort and expand, read on the instance that did not write.
    const list = await guestOne.collection('posts').getList(1, 10, { filter: 'title ~ "hello"', sort: '-title', expand: 'author' });
    expect(list.totalItems).toBe(2);
    expect(list.items.map((item) => [item.title, item.expand?.author?.name])).toEqual([
      ['hello two', 'Bea'],
      ['hello one', 'Ann'],
    ]);

    // The file, uploaded through one instance, downloaded through the other.
    const download = await fetch(guestOne.files.getURL(first, first.doc));
    expect(download.status).toBe(200);
    expect(await download.text()).toBe(body);

    // Update: Bob is refused by the rule, Alice changes it, each on another instance than the create.
    await expect(bobOne.collection('posts').update(first.id, { title: 'bob was here' })).rejects.toMatchObject({ status: 404 });
    expect(await aliceOne.collection('posts').update(first.id, { title: 'hello one, edited' })).toMatchObject({ title: 'hello one, edited' });
    expect(await guestTwo.collection('posts').getOne(first.id)).toMatchObject({ title: 'hello one, edited', author: ann.id });

    // A batch: its statements in one transaction through the pooler.
    const batch = aliceTwo.createBatch();
    batch.collection('notes').create({ text: 'batched a' });
    batch.collection('notes').create({ text: 'batched b' });
    batch.collection('posts').update(second.id, { title: 'hello two, batched' });
    const results = await batch.send();
    expect(results.map((result) => result.status)).toEqual([200, 200, 200]);
    expect((await guestOne.collection('notes').getFullList({ filter: 'text ~ "batched"', sort: 'text' })).map((note) => note.text)).toEqual(['batched a', 'batched b']);
    expect(await guestOne.collection('posts').getOne(second.id)).toMatchObject({ title: 'hello two, batched' });

    // Delete on one instance, gone on the other.
    await aliceOne.collection('posts').delete(second.id);
    await expect(guestTwo.collection('posts').getOne(second.id)).rejects.toMatchObject({ status: 404 });

    // Through the pooler's two server connections, and nothing was ever prepared on them.
    const servers = (await bouncer.admin('SHOW SERVERS')).filter((row) => row.database === 'postgres');
    expect(servers.length).toBeLessThanOrEqual(2);
    const prepared = await one.db.raw("SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name LIKE 'rb\\_%'");
    expect((prepared as { rows: { n: number }[] }).rows[0]!.n).toBe(0);
    await one.close();
    await two.close();
  }, TIMEOUT_MS);
});
