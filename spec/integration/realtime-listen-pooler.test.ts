/**
 * Issue 43, part B: realtime behind a pooler in transaction mode. A private PgBouncer (Debian's
 * 1.18, spec/support/pgbouncer.ts) in front of a throwaway Postgres; each router's Knex goes
 * through it, as behind PgBouncer, Supavisor or Neon's pooled URL.
 *
 * - Without `realtime.listen`, LISTEN goes through the pooler, whose server connection is handed
 *   to other clients after each statement: notifications never come back. `ready` rejects with
 *   the start-up check's message naming the fix, never a silent start.
 * - With `realtime.listen` = the server's direct URL, two routers through the pooler deliver a
 *   change to an SDK subscriber on the other within a second (by the notification, not the 2 s
 *   safety read), and a subscription POST on the instance not holding the stream answers 204
 *   (the forward's notification and its ack arrive), not 503 after 3 s.
 * - The LISTEN connection killed (`pg_terminate_backend`): re-listened, and the changes written
 *   while it was down are delivered (the outbox catches up).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EventSource } from 'eventsource';
import knexFactory, { type Knex } from 'knex';
import { createRecordsRouter, type RecordsRouterOptions } from '../../lib/index.js';
import { INSTANCES_TABLE, LISTENER_APPLICATION_NAME } from '../../lib/db/shared-names.js';
import { pgBouncerAvailable, startPgBouncer, type PgBouncer } from '../support/pgbouncer.js';
import { sdkOf, serveRouter, type ServedRouter } from '../support/served-router.js';
import { openSse, type SseConnection } from '../support/sse-reader.js';
import { TEST_FILE_TOKEN_SECRET } from '../support/test-app.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/throwaway-postgres.js';

const TIMEOUT_MS = 60_000;
const WITH_PGBOUNCER = pgBouncerAvailable();

const collections: RecordsRouterOptions['collections'] = [{ name: 'notes', fields: [{ name: 'text', type: 'text' }], rules: { list: '', view: '', create: '', update: '', delete: '' } }];

interface Instance {
  readonly db: Knex;
  readonly served: ServedRouter;
  readonly logged: string[];
}

(WITH_PGBOUNCER ? describe : describe.skip)('realtime through PgBouncer in transaction mode', () => {
  let server: ThrowawayPostgres;
  let bouncer: PgBouncer;
  let admin: Knex;
  const owned: { close(): Promise<void> }[] = [];
  const dataDirs: string[] = [];

  beforeAll(async () => {
    server = await startThrowawayPostgres();
    bouncer = await startPgBouncer({ target: { host: '127.0.0.1', port: server.port }, poolMode: 'transaction', poolSize: 2 });
    admin = knexFactory({ client: 'pg', connection: server.url, pool: { min: 0, max: 1 } });
  }, TIMEOUT_MS);

  afterAll(async () => {
    for (const item of owned.reverse()) await item.close().catch(() => undefined);
    await admin?.destroy();
    await bouncer?.destroy();
    await server?.destroy();
    for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
  }, TIMEOUT_MS);

  function dataDir(): string {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'rb-listen-'));
    dataDirs.push(dir);
    return dir;
  }

  /** A router whose Knex goes through `url`, with realtime's settings `realtime`. */
  function router(url: string, realtime: RecordsRouterOptions['realtime'], dir: string) {
    const db = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: 3 }, log: { warn: () => undefined, error: () => undefined } });
    const logged: string[] = [];
    const log = (message: string) => void logged.push(message);
    const made = createRecordsRouter({
      collections,
      logger: { error: log, warn: log, info: log },
      fileSweep: false,
      fileTokenSecret: TEST_FILE_TOKEN_SECRET,
      thumbnailWorkers: 1,
      realtime,
      dataDir: dir,
      database: db,
    });
    return { db, router: made, logged };
  }

  async function instance(url: string, realtime: RecordsRouterOptions['realtime'], dir: string): Promise<Instance> {
    const { db, router: made, logged } = router(url, realtime, dir);
    const served = await serveRouter(made);
    owned.push({
      async close() {
        await served.close();
        await db.destroy();
      },
    });
    return { db, served, logged };
  }

  /**
   * A record written straight to the server. The changes under test are PATCHes through the
   * pooler: a create's INSERT is a named prepared statement, which PgBouncer 1.18 in transaction
   * mode cannot keep (`preparedStatements: false`, another part of issue 43).
   */
  async function seedNote(text: string): Promise<string> {
    const id = `n${Math.random().toString(36).slice(2, 16).padEnd(14, '0')}`;
    await admin.raw('INSERT INTO notes (id, text) VALUES (?, ?)', [id, text]);
    return id;
  }

  async function updateNote(on: Instance, id: string, text: string): Promise<void> {
    const res = await fetch(`${on.served.baseUrl}/api/collections/notes/records/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text }) });
    expect(res.status).toBe(200);
    await res.text();
  }

  async function postSubscriptions(on: Instance, clientId: string, subscriptions: string[]): Promise<{ status: number; ms: number }> {
    const started = Date.now();
    const res = await fetch(`${on.served.baseUrl}/api/realtime`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ clientId, subscriptions }) });
    await res.text();
    return { status: res.status, ms: Date.now() - started };
  }

  test('without realtime.listen, ready rejects: the NOTIFY of the start-up check does not come back, and the message names the fix', async () => {
    const { db, router: made } = router(bouncer.url('postgres'), { listenCheckMs: 1_000 }, dataDir());
    try {
      const started = Date.now();
      const refusal = await made.ready.then(() => undefined, (error: unknown) => error);
      expect(refusal).toBeInstanceOf(Error);
      expect((refusal as Error).message).toContain(`notifications do not come back through 127.0.0.1:${bouncer.port}`);
      expect((refusal as Error).message).toContain('a pooler in transaction mode? Set realtime.listen to a direct or session-mode URL, see docs/realtime.md');
      expect(Date.now() - started).toBeLessThan(15_000);
      // Nothing left behind: the instance's row is removed (the listener's connection was a
      // pooler client; its server connection keeps the application_name it SET, so
      // pg_stat_activity cannot tell here).
      const live = await admin.raw(`SELECT count(*)::int AS n FROM "${INSTANCES_TABLE}"`);
      expect(live.rows[0].n).toBe(0);
    } finally {
      await made.close();
      await db.destroy();
    }
  }, TIMEOUT_MS);

  test('with realtime.listen = the direct URL: an SDK subscriber on one instance hears a change written on the other within a second, and a POST on the other answers 204 at once', async () => {
    const dir = dataDir();
    const realtime = { listen: server.url };
    const a = await instance(bouncer.url('postgres'), realtime, dir);
    const b = await instance(bouncer.url('postgres'), realtime, dir);

    // A raw stream on A, its subscriptions POSTed to B: B forwards to A by NOTIFY and waits for A's ack.
    const sse: SseConnection = await openSse(`${a.served.baseUrl}/api/realtime`);
    try {
      const clientId = await sse.clientId();
      const forwarded = await postSubscriptions(b, clientId, ['notes/*']);
      expect(forwarded.status).toBe(204);
      expect(forwarded.ms).toBeLessThan(2_000);
    } finally {
      sse.close();
    }

    const previous = (globalThis as { EventSource?: unknown }).EventSource;
    (globalThis as { EventSource?: unknown }).EventSource = EventSource;
    const pb = sdkOf(a.served);
    try {
      const heard: Array<{ text: string; at: number }> = [];
      await pb.collection('notes').subscribe('*', (event) => void heard.push({ text: String(event.record["text"]), at: Date.now() }));
      // Several, so that one landing just before a safety read cannot pass by luck.
      const id = await seedNote('seeded');
      for (let i = 0; i < 3; i++) {
        const sent = Date.now();
        await updateNote(b, id, `through-b-${i}`);
        const deadline = sent + 5_000;
        while (!heard.some((h) => h.text === `through-b-${i}`) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
        const got = heard.find((h) => h.text === `through-b-${i}`);
        expect(got).toBeDefined();
        expect(got!.at - sent).toBeLessThan(1_000);
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
    } finally {
      await pb.realtime.unsubscribe().catch(() => undefined);
      (globalThis as { EventSource?: unknown }).EventSource = previous;
    }
  }, TIMEOUT_MS);

  /** The pids of realtime's LISTEN connections on the server (not the pooler's server connections, which may carry the name a LISTEN through them SET). */
  async function listenerPids(): Promise<number[]> {
    const pooled = new Set((await bouncer.admin('SHOW SERVERS')).map((row) => Number(row.remote_pid)));
    const { rows } = (await admin.raw('SELECT pid FROM pg_stat_activity WHERE application_name = ?', [LISTENER_APPLICATION_NAME])) as { rows: { pid: number }[] };
    return rows.map((row) => row.pid).filter((pid) => !pooled.has(pid));
  }

  test.each([
    ['through realtime.listen (direct), the Knex through the pooler', 'pooled'],
    ['without a pooler (the Knex and LISTEN direct)', 'direct'],
  ])('the LISTEN connection killed (pg_terminate_backend), %s: re-listened, and the changes written while it was down are delivered', async (_name, how) => {
    const dir = dataDir();
    const realtime = how === 'pooled' ? { listen: server.url } : {};
    const url = how === 'pooled' ? bouncer.url('postgres') : server.url;
    // Other tests' instances stay open until the end: this instance's listener is the new one.
    const others = new Set(await listenerPids());
    const ours = async () => (await listenerPids()).filter((pid) => !others.has(pid));
    const a = await instance(url, realtime, dir);
    const before = await ours();
    expect(before).toHaveLength(1);
    const sse = await openSse(`${a.served.baseUrl}/api/realtime`);
    try {
      const clientId = await sse.clientId();
      expect((await postSubscriptions(a, clientId, ['notes/*'])).status).toBe(204);
      const id = await seedNote('seeded');
      await admin.raw('SELECT pg_terminate_backend(?)', [before[0]]);
      // Written while the listener is down or reconnecting: its notifications are lost with it.
      for (let i = 0; i < 5; i++) await updateNote(a, id, `while-down-${i}`);
      const deadline = Date.now() + 10_000;
      const texts = () => sse.messages('notes/*').map((m) => m.data.record['text']);
      while (texts().length < 6 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 25));
      // The seed's create (written after the subscription, before the kill), then every update once, in order.
      expect(texts()).toEqual(['seeded', ...[0, 1, 2, 3, 4].map((i) => `while-down-${i}`)]);
      // Listening again on a new connection, and a change after it is heard by notification.
      const after = await ours();
      expect(after).toHaveLength(1);
      expect(after[0]).not.toBe(before[0]);
      expect(a.logged.join('\n')).toMatch(/the listening connection was lost/);
      const sent = Date.now();
      await updateNote(a, id, 'after');
      while (!texts().includes('after') && Date.now() < sent + 5_000) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(texts().at(-1)).toBe('after');
      expect(Date.now() - sent).toBeLessThan(1_000);
    } finally {
      sse.close();
    }
  }, TIMEOUT_MS);
});
