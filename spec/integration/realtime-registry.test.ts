import knexFactory, { type Knex } from 'knex';
import { createRecordsRouter, type CollectionDefinition, type RecordsRouter } from '../../lib/index.js';
import type { Identity } from '../../lib/auth/identity.js';
import { realtimeTableStatements } from '../../lib/db/realtime/realtime-schema.js';
import { CLIENTS_TABLE, INSTANCES_TABLE, OUTBOX_TABLE } from '../../lib/db/shared-names.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { outboxCount } from '../support/realtime-outbox.js';
import { openSse, type SseConnection } from '../support/sse-reader.js';
import { createMemoryLogger, startSiblingRouter, startTestApp, TEST_FILE_TOKEN_SECRET, TEST_IDENTITIES, type TestApp } from '../support/test-app.js';
import { openTestDatabase, testEngines, testKnexLog } from '../support/test-database.js';

/**
 * Issue 29 findings 11 and 12: instances on one database agree whatever their own `realtime`
 * setting (capture is gated in the database by the live realtime instances), and the registry
 * keeps only an identity's id and superuser flag while the whole identity reaches the instance
 * holding the stream.
 */

const IDENTITIES: Record<string, Identity> = {
  ...TEST_IDENTITIES,
  'token-carol': { id: 'carolcccccccccc', team: 'red', session: 'sess-SECRET-0123456789', last: 'Z9' },
  // Over 20 KB of JSON, multi-byte characters included: several notifications of under 8,000 bytes.
  // The rule reads `last`, which comes after the big field: a hand-off cut short would lose it.
  'token-big': { id: 'bigbbbbbbbbbbbb', team: 'red', notes: `${'ü'.repeat(7_000)}${'"\\'.repeat(2_000)}${'a'.repeat(4_000)}`, last: 'Z9' },
};

function collections(): CollectionDefinition[] {
  return [
    { name: 'posts', fields: [{ name: 'title', type: 'text' }], rules: OPEN_RULES },
    { name: 'extras', fields: [{ name: 'title', type: 'text' }], rules: OPEN_RULES },
    {
      name: 'notes',
      fields: [
        { name: 'team', type: 'text' },
        { name: 'title', type: 'text' },
      ],
      rules: { ...OPEN_RULES, list: "team = @request.auth.team && @request.auth.last = 'Z9'" },
    },
  ];
}

const options = () => ({ collections: collections(), auth: (token: string) => IDENTITIES[token] ?? null });

describe.each(testEngines())('realtime registry and capture on %s', (engine) => {
  const open: SseConnection[] = [];
  let app: TestApp | undefined;
  afterEach(async () => {
    for (const s of open.splice(0)) s.close();
    await app?.router.close();
    await app?.close();
    app = undefined;
  });

  async function stream(target: TestApp, subscriptions: string[], via: TestApp['http'], token?: string): Promise<SseConnection & { id: string }> {
    const sse = await openSse(`${target.baseUrl}/backend/api/realtime`);
    open.push(sse);
    const id = await sse.clientId();
    const req = via.post('/backend/api/realtime');
    if (token) req.set('Authorization', token);
    const res = await req.send({ clientId: id, subscriptions });
    expect(res.status).toBe(204);
    return Object.assign(sse, { id });
  }

  test('a realtime: false router started after a realtime one leaves capture on: its writes reach the subscribers, even of a collection only it declares', async () => {
    app = await startTestApp(engine, { ...options(), collections: collections().filter((c) => c.name !== 'extras') });
    const logger = createMemoryLogger();
    const off = await startSiblingRouter(app, { ...options(), realtime: false, logger });
    try {
      expect(logger.lines.filter((line) => line.includes('does not serve realtime'))).toHaveLength(1);
      // `extras` is unknown to the realtime router, yet the registry's topic keys name it: its changes are captured.
      const sse = await stream(app, ['posts/*', 'extras/*'], app.http);
      const created = await off.http.post('/backend/api/collections/posts/records').send({ title: 'through the realtime-off router' });
      expect(created.status).toBe(200);
      const message = await sse.next((e) => e.event === 'posts/*', { timeoutMs: 10_000 });
      expect(JSON.parse(message.data!).record).toMatchObject({ id: created.body.id, title: 'through the realtime-off router' });
      // `extras` is declared by the realtime-off router only: it installed the capture triggers there too.
      expect((await off.http.post('/backend/api/collections/extras/records').send({ title: 'x' })).status).toBe(200);
      expect(await outboxCount(app.database.db, 'extras')).toBe(1);
    } finally {
      await off.close();
    }
  });

  test('with no live realtime instance, writes add no outbox rows; a row of older code (no expires_at) still counts as live', async () => {
    app = await startTestApp(engine, options());
    const db = app.database.db;
    // A subscriber to posts (of an instance that is not live itself: the gate asks for any live one).
    await db(CLIENTS_TABLE).insert({ client_id: 'subscriber', instance_id: 'elsewhere', subscriptions: JSON.stringify(['posts/*']) });
    await db.raw(`INSERT INTO "posts" ("id", "title", "created", "updated") VALUES ('live00000000001', 'while live', now(), now())`);
    expect(await outboxCount(app.database.db, 'posts')).toBe(1);

    await app.router.close();
    expect(((await db.raw(`SELECT count(*)::int AS n FROM "${INSTANCES_TABLE}"`)) as { rows: { n: number }[] }).rows[0]!.n).toBe(0);
    await db.raw(`INSERT INTO "posts" ("id", "title", "created", "updated") VALUES ('gone00000000001', 'nobody listens', now(), now())`);
    await db.raw(`UPDATE "posts" SET "title" = 'still nobody' WHERE "id" = 'live00000000001'`);
    await db.raw(`DELETE FROM "posts" WHERE "id" = 'live00000000001'`);
    expect(await outboxCount(app.database.db, 'posts')).toBe(1);

    // An instance that was killed: its row stays, expired.
    await db.raw(`INSERT INTO "${INSTANCES_TABLE}" ("instance_id", "heartbeat_at", "expires_at") VALUES ('killed', now() - interval '1 minute', now() - interval '45 seconds')`);
    await db.raw(`INSERT INTO "posts" ("id", "title", "created", "updated") VALUES ('dead00000000001', 'killed', now(), now())`);
    expect(await outboxCount(app.database.db, 'posts')).toBe(1);

    // A running instance of older code writes no expires_at: its recent heartbeat counts.
    await db.raw(`INSERT INTO "${INSTANCES_TABLE}" ("instance_id", "heartbeat_at") VALUES ('older', now())`);
    await db.raw(`INSERT INTO "posts" ("id", "title", "created", "updated") VALUES ('old000000000001', 'older code', now(), now())`);
    expect(await outboxCount(app.database.db, 'posts')).toBe(2);
  });

  test('the registry keeps only id and superuser; a POST forwarded to the instance holding the stream carries the whole identity, 20 KB included', async () => {
    app = await startTestApp(engine, options());
    const sibling = await startSiblingRouter(app, options());
    try {
      for (const token of ['token-carol', 'token-big']) {
        const sse = await stream(app, ['notes/*'], sibling.http, token);
        const row = await app.database.db(CLIENTS_TABLE).where({ client_id: sse.id }).first();
        expect(row.identity).toEqual({ id: IDENTITIES[token]!.id, superuser: false });
        expect(JSON.stringify(row)).not.toContain('sess-SECRET');
        await app.http.post('/backend/api/collections/notes/records').send({ team: 'blue', title: `blue for ${token}` });
        await sibling.http.post('/backend/api/collections/notes/records').send({ team: 'red', title: `red for ${token}` });
        const message = await sse.next((e) => e.event === 'notes/*', { timeoutMs: 10_000 });
        expect(JSON.parse(message.data!).record.title).toBe(`red for ${token}`);
        expect(sse.messages('notes/*').map((m) => m.data.record.title)).toEqual([`red for ${token}`]);
        sse.close();
      }
      // Nothing of the identities was ever stored.
      const all: { rows: { text: string }[] } = await app.database.db.raw(`SELECT coalesce(string_agg("identity"::text, ','), '') AS text FROM "${CLIENTS_TABLE}"`);
      expect(all.rows[0]!.text).not.toMatch(/sess-SECRET|üüü/);
    } finally {
      await sibling.close();
    }
  });

  test('a database made by older code gets the new columns and index, and the statements run again change nothing', async () => {
    const database = await openTestDatabase(engine);
    try {
      const db = database.db;
      // The tables as the previous release made them.
      await db.raw(`CREATE TABLE "${OUTBOX_TABLE}" ("seq" bigserial PRIMARY KEY, "tx" xid8 NOT NULL DEFAULT pg_current_xact_id(), "collection" text NOT NULL, "record_id" text NOT NULL, "action" text NOT NULL, "row" jsonb NOT NULL, "created_at" timestamptz NOT NULL DEFAULT now())`);
      await db.raw(`CREATE TABLE "${INSTANCES_TABLE}" ("instance_id" text PRIMARY KEY, "heartbeat_at" timestamptz NOT NULL DEFAULT now())`);
      await db.raw(`INSERT INTO "${INSTANCES_TABLE}" ("instance_id") VALUES ('older')`);
      await db.raw(`CREATE TABLE "${CLIENTS_TABLE}" ("client_id" text PRIMARY KEY, "instance_id" text NOT NULL, "identity" jsonb, "subscriptions" jsonb NOT NULL DEFAULT '[]'::jsonb, "updated_at" timestamptz NOT NULL DEFAULT now())`);
      await db.raw(`INSERT INTO "${CLIENTS_TABLE}" ("client_id", "instance_id", "subscriptions") VALUES ('older-client', 'older', '["posts/*"]')`);
      const columns = async () =>
        ((await db.raw(`SELECT table_name || '.' || column_name AS c FROM information_schema.columns WHERE table_schema = current_schema() AND column_name IN ('snapshot', 'expires_at', 'topic_keys', 'reads_other_tables') ORDER BY 1`)) as { rows: { c: string }[] }).rows.map((r) => r.c);
      expect(await columns()).toEqual([]);
      const added = [`${CLIENTS_TABLE}.reads_other_tables`, `${CLIENTS_TABLE}.topic_keys`, `${INSTANCES_TABLE}.expires_at`, `${OUTBOX_TABLE}.snapshot`];
      for (const statement of realtimeTableStatements()) await db.raw(statement);
      expect(await columns()).toEqual(added);
      const indexes = async () => ((await db.raw(`SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND indexname LIKE '\\_recordbase%' AND indexname NOT LIKE '%\\_pkey' ORDER BY 1`)) as { rows: { indexname: string }[] }).rows.map((r) => r.indexname);
      const made = await indexes();
      expect(made).toEqual(['_recordbase_realtime_clients_identity', '_recordbase_realtime_clients_instance', '_recordbase_realtime_clients_reading_others', '_recordbase_realtime_clients_topics', '_recordbase_realtime_outbox_created', '_recordbase_realtime_outbox_tx']);
      for (const statement of realtimeTableStatements()) await db.raw(statement);
      expect(await columns()).toEqual(added);
      // The older client's row got its topic keys computed; it says nothing of what its rules read (NULL: counted as reading other tables).
      expect(await db(CLIENTS_TABLE).first()).toMatchObject({ topic_keys: ['posts'], reads_other_tables: null });
      expect(await indexes()).toEqual(made);
      // The older instance's row (no expires_at) is live: a delete is captured, with its snapshot.
      await db.raw(`CREATE TABLE "posts" ("id" text PRIMARY KEY)`);
      await db.raw(`CREATE TRIGGER "_recordbase_realtime_delete" AFTER DELETE ON "posts" REFERENCING OLD TABLE AS rb_old FOR EACH STATEMENT EXECUTE FUNCTION "_recordbase_realtime_capture"()`);
      await db.raw(`INSERT INTO "posts" VALUES ('p1')`);
      await db.raw(`DELETE FROM "posts"`);
      const captured: { rows: { action: string; has_snapshot: boolean }[] } = await db.raw(`SELECT "action", "snapshot" IS NOT NULL AS has_snapshot FROM "${OUTBOX_TABLE}"`);
      expect(captured.rows).toEqual([{ action: 'delete', has_snapshot: true }]);
    } finally {
      await database.destroy();
    }
  });

  if (engine === 'postgres') {
    test('switching capture on waits for transactions that were running (they captured nothing), within a bound', async () => {
      app = await startTestApp(engine, options());
      await app.router.close();
      const schema = ((await app.database.db.raw('SELECT current_schema() AS s')) as { rows: { s: string }[] }).rows[0]!.s;
      const writer = knexFactory({ client: 'pg', connection: process.env.RB_TEST_POSTGRES!, searchPath: [schema], pool: { min: 0, max: 1 }, log: testKnexLog });
      const routers: RecordsRouter[] = [];
      const transactions: Knex.Transaction[] = [];
      const start = (limits: { statementTimeoutMs: number }, logger = createMemoryLogger()) => {
        // Only `posts`, so that nothing of the start could wait on a lock of `extras`, which the transactions below hold.
        const router = createRecordsRouter({ ...options(), collections: collections().filter((c) => c.name === 'posts'), limits, logger, database: app!.database.db, dataDir: app!.dataDir, fileSweep: false, fileTokenSecret: TEST_FILE_TOKEN_SECRET, thumbnailWorkers: 1 });
        routers.push(router);
        let settled = false;
        const ready = router.ready.finally(() => (settled = true));
        return { router, ready, logger, settled: () => settled };
      };
      const writeEarly = async (id: string) => {
        const trx = await writer.transaction();
        transactions.push(trx);
        await trx.raw(`INSERT INTO "extras" ("id", "title", "created", "updated") VALUES (?, 'before the switch', now(), now())`, [id]);
        return trx;
      };
      try {
        const early = await writeEarly('early0000000001');
        const waiting = start({ statementTimeoutMs: 60_000 });
        for (let i = 0; i < 40 && !waiting.settled(); i++) await new Promise((resolve) => setTimeout(resolve, 50));
        // Still waiting for the transaction that wrote `extras` before any instance was live.
        expect(waiting.settled()).toBe(false);
        await early.commit();
        await waiting.ready;
        await waiting.router.close();
        expect(await outboxCount(app.database.db, 'extras')).toBe(0);

        // A transaction that never ends holds the start for at most the bound, with a warning.
        await writeEarly('stuck0000000001');
        const bounded = start({ statementTimeoutMs: 500 });
        await bounded.ready;
        expect(bounded.logger.lines.filter((line) => line.includes('still running'))).toHaveLength(1);
      } finally {
        for (const trx of transactions) if (!trx.isCompleted()) await trx.rollback();
        for (const router of routers) await router.close();
        await writer.destroy();
      }
    }, 60_000);
  }
});
