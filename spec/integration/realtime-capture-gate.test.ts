import knexFactory, { type Knex } from 'knex';
import type { CollectionDefinition } from '../../lib/index.js';
import { captureTriggerStatements } from '../../lib/db/realtime/realtime-schema.js';
import { CLIENTS_TABLE, TOPIC_KEYS_FUNCTION } from '../../lib/db/shared-names.js';
import { topicKey } from '../../lib/realtime/parse-subscription.js';
import { buildSchemaRegistry } from '../../lib/schema/collection-schema.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { outboxCount } from '../support/realtime-outbox.js';
import { openSse, type SseConnection } from '../support/sse-reader.js';
import { createMemoryLogger, startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines, testKnexLog } from '../support/test-database.js';

/**
 * Issue 35, item 1: a change is captured into the outbox only while some client subscribes to its
 * collection (by name or by id), so writes nobody could receive cost no outbox row. Switching a
 * collection's capture on must never lose a change committed after the subscription's 204.
 */

const POSTS_ID = 'posts_collection_id';

function collections(): CollectionDefinition[] {
  return [
    { id: POSTS_ID, name: 'posts', fields: [{ name: 'title', type: 'text' }], rules: OPEN_RULES },
    { name: 'extras', fields: [{ name: 'title', type: 'text' }], rules: OPEN_RULES },
    {
      name: 'comments',
      fields: [
        { name: 'post', type: 'relation', collection: 'posts' },
        { name: 'title', type: 'text' },
      ],
      rules: { ...OPEN_RULES, list: "post.title != 'hidden'" },
    },
  ];
}

describe.each(testEngines())('realtime capture gate on %s', (engine) => {
  const open: SseConnection[] = [];
  let app: TestApp | undefined;
  afterEach(async () => {
    for (const s of open.splice(0)) s.close();
    await app?.router.close();
    await app?.close();
    app = undefined;
  });

  async function connect(target: TestApp): Promise<SseConnection & { id: string }> {
    const sse = await openSse(`${target.baseUrl}/backend/api/realtime`);
    open.push(sse);
    return Object.assign(sse, { id: await sse.clientId() });
  }

  async function subscribe(target: TestApp, clientId: string, subscriptions: string[]): Promise<void> {
    const res = await target.http.post('/backend/api/realtime').send({ clientId, subscriptions });
    expect(res.status).toBe(204);
  }

  const create = async (target: TestApp, collection: string, title: string) => {
    const res = await target.http.post(`/backend/api/collections/${collection}/records`).send({ title });
    expect(res.status).toBe(200);
    return res.body.id as string;
  };

  test('writes nobody subscribes to add no outbox rows; a subscription by name or by id switches its collection on, and only it', async () => {
    app = await startTestApp(engine, { collections: collections() });
    const sse = await connect(app);
    await create(app, 'posts', 'before any subscription');
    expect(await outboxCount(app.database.db, 'posts')).toBe(0);

    await subscribe(app, sse.id, ['posts/*']);
    const id = await create(app, 'posts', 'subscribed');
    await create(app, 'extras', 'nobody listens here');
    expect((await sse.next((e) => e.event === 'posts/*')).data).toContain(id);
    expect(await outboxCount(app.database.db, 'posts')).toBe(1);
    expect(await outboxCount(app.database.db, 'extras')).toBe(0);

    // By id, with options after `?` (which may hold a `/`).
    const options = encodeURIComponent(JSON.stringify({ query: { filter: "title != 'a/b'" } }));
    await subscribe(app, sse.id, [`${POSTS_ID}/*?options=${options}`]);
    const second = await create(app, 'posts', 'by id');
    expect((await sse.next((e) => e.event?.startsWith(POSTS_ID) === true && e.data?.includes(second) === true)).data).toContain('by id');
    expect(await outboxCount(app.database.db, 'posts')).toBe(2);

    // Unsubscribing switches it off again; a subscription naming no collection switches nothing on.
    await subscribe(app, sse.id, ['nothing/*', 'PB_CONNECT']);
    await create(app, 'posts', 'after unsubscribing');
    expect(await outboxCount(app.database.db, 'posts')).toBe(2);

    // The stream's close removes its row, and with it the capture.
    await subscribe(app, sse.id, ['extras/*']);
    await create(app, 'extras', 'captured');
    expect(await outboxCount(app.database.db, 'extras')).toBe(1);
    sse.close();
    for (let i = 0; i < 100; i++) {
      const left = (await app.database.db(CLIENTS_TABLE).count({ n: '*' }))[0] as { n: string | number };
      if (Number(left.n) === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await create(app, 'extras', 'after the stream closed');
    expect(await outboxCount(app.database.db, 'extras')).toBe(1);
  });

  test('a row written by other code (subscriptions only) counts: the topic keys are computed by the database, as topicKey reads them', async () => {
    app = await startTestApp(engine, { collections: collections() });
    const db = app.database.db;
    const raws = ['posts', 'posts/*', 'posts/abc', 'posts?options=%7B%7D', 'posts/*?options={"a":"/x?y"}', 'a?b/c', '/x', '', 'x/y/z', `${POSTS_ID}/*`];
    const computed: { rows: { keys: string[] }[] } = await db.raw(`SELECT "${TOPIC_KEYS_FUNCTION}"(?::jsonb) AS keys`, [JSON.stringify(raws)]);
    expect([...computed.rows[0]!.keys].sort()).toEqual([...new Set(raws.map(topicKey))].sort());
    const none: { rows: { keys: string[] }[] } = await db.raw(`SELECT "${TOPIC_KEYS_FUNCTION}"('{"not":"an array"}'::jsonb) AS keys`);
    expect(none.rows[0]!.keys).toEqual([]);

    // (`reads_other_tables` false: a row saying nothing of it counts as reading every table, tested below.)
    await db(CLIENTS_TABLE).insert({ client_id: 'written-by-other-code', instance_id: 'elsewhere', subscriptions: JSON.stringify(['extras?options=%7B%7D']), reads_other_tables: false });
    await create(app, 'extras', 'captured for a row of other code');
    await create(app, 'posts', 'not captured');
    expect(await outboxCount(app.database.db, 'extras')).toBe(1);
    expect(await outboxCount(app.database.db, 'posts')).toBe(0);
    await db(CLIENTS_TABLE).where({ client_id: 'written-by-other-code' }).update({ subscriptions: JSON.stringify([`${POSTS_ID}/x`]) });
    await create(app, 'posts', 'now captured by id');
    expect(await outboxCount(app.database.db, 'posts')).toBe(1);
  });

  test('a capture trigger of older code (naming no collection id) is made again naming it; one in place is left alone', async () => {
    app = await startTestApp(engine, { collections: collections() });
    const db = app.database.db;
    const posts = buildSchemaRegistry(collections()).get('posts')!;
    const triggers = async () =>
      ((await db.raw(`SELECT tgname, encode(tgargs, 'escape') AS args FROM pg_trigger WHERE tgrelid = 'posts'::regclass AND tgname LIKE '\\_recordbase%' ORDER BY 1`)) as { rows: { tgname: string; args: string }[] }).rows;
    expect((await triggers()).map((t) => t.args)).toEqual([`${POSTS_ID}\\000`, `${POSTS_ID}\\000`, `${POSTS_ID}\\000`]);
    await db.raw(`CREATE OR REPLACE TRIGGER "_recordbase_realtime_insert" AFTER INSERT ON "posts" REFERENCING NEW TABLE AS rb_new FOR EACH STATEMENT EXECUTE FUNCTION "_recordbase_realtime_capture"()`);
    expect((await triggers()).map((t) => t.args)).toEqual([`${POSTS_ID}\\000`, '', `${POSTS_ID}\\000`]);
    const sse = await connect(app);
    await subscribe(app, sse.id, [`${POSTS_ID}/*`]);
    // By id, the older trigger cannot tell: nothing is captured.
    await create(app, 'posts', 'missed by the older trigger');
    expect(await outboxCount(app.database.db, 'posts')).toBe(0);
    for (const statement of captureTriggerStatements([posts])) await db.raw(statement);
    expect((await triggers()).map((t) => t.args)).toEqual([`${POSTS_ID}\\000`, `${POSTS_ID}\\000`, `${POSTS_ID}\\000`]);
    // Run again, nothing is made again (CREATE TRIGGER would lock the table against writes).
    const oids = async () => ((await db.raw(`SELECT array_agg(oid ORDER BY oid)::text AS o FROM pg_trigger WHERE tgrelid = 'posts'::regclass`)) as { rows: { o: string }[] }).rows[0]!.o;
    const before = await oids();
    for (const statement of captureTriggerStatements([posts])) await db.raw(statement);
    expect(await oids()).toBe(before);
    const id = await create(app, 'posts', 'captured');
    expect(await outboxCount(app.database.db, 'posts')).toBe(1);
    expect((await sse.next((e) => e.data?.includes(id) === true)).data).toContain('captured');
  });

  test('a subscription whose rule reads other tables captures every collection (a delete is checked for staleness against every later change), until it goes', async () => {
    app = await startTestApp(engine, { collections: collections() });
    const sse = await connect(app);
    await subscribe(app, sse.id, ['comments/*']);
    await create(app, 'extras', 'captured: a rule may read it');
    expect(await outboxCount(app.database.db, 'extras')).toBe(1);
    await subscribe(app, sse.id, ['comments/*?options=' + encodeURIComponent(JSON.stringify({ query: { filter: "title != 'x'" } }))]);
    expect(await outboxCount(app.database.db, 'extras')).toBe(1);
    await subscribe(app, sse.id, []);
    await create(app, 'extras', 'no longer');
    expect(await outboxCount(app.database.db, 'extras')).toBe(1);
    // The view rule (`comments/{id}`) reads only the row: nothing more is captured. The list rule again: extras are.
    await subscribe(app, sse.id, ['comments/abc']);
    await create(app, 'extras', 'not for a view rule');
    expect(await outboxCount(app.database.db, 'extras')).toBe(1);
    await subscribe(app, sse.id, ['comments/*']);
    await create(app, 'extras', 'again');
    expect(await outboxCount(app.database.db, 'extras')).toBe(2);
    // A row of older code says nothing of what its rules read: it counts as reading other tables.
    await subscribe(app, sse.id, []);
    await app.database.db(CLIENTS_TABLE).insert({ client_id: 'older-code', instance_id: 'elsewhere', subscriptions: JSON.stringify([]) });
    await create(app, 'extras', 'for the older row');
    expect(await outboxCount(app.database.db, 'extras')).toBe(3);
  });

  if (engine === 'postgres') {
    test('a subscription that switches capture on answers once every write that captured nothing has ended, within a bound; a second one does not wait', async () => {
      const logger = createMemoryLogger();
      app = await startTestApp(engine, { collections: collections(), limits: { statementTimeoutMs: 1_500 }, logger });
      const schema = ((await app.database.db.raw('SELECT current_schema() AS s')) as { rows: { s: string }[] }).rows[0]!.s;
      const writer = knexFactory({ client: 'pg', connection: process.env.RB_TEST_POSTGRES!, searchPath: [schema], pool: { min: 0, max: 2 }, log: testKnexLog });
      const transactions: Knex.Transaction[] = [];
      try {
        const first = await connect(app);
        const early = await writer.transaction();
        transactions.push(early);
        await early.raw(`INSERT INTO "posts" ("id", "title", "created", "updated") VALUES ('early0000000001', 'written before the subscription', now(), now())`);
        let answered = false;
        const posting = subscribe(app, first.id, ['posts/*']).then(() => (answered = true));
        await new Promise((resolve) => setTimeout(resolve, 400));
        expect(answered).toBe(false);
        await early.commit();
        await posting;
        // It committed before the 204: it may or may not be sent; it was not captured.
        expect(await outboxCount(app.database.db, 'posts')).toBe(0);

        // Capture of posts is on (the first client holds it): another subscription answers at once.
        const held = await writer.transaction();
        transactions.push(held);
        await held.raw(`INSERT INTO "posts" ("id", "title", "created", "updated") VALUES ('held00000000001', 'captured', now(), now())`);
        const second = await connect(app);
        const started = Date.now();
        await subscribe(app, second.id, ['posts/*']);
        expect(Date.now() - started).toBeLessThan(1_000);
        await held.commit();
        expect((await second.next((e) => e.event === 'posts/*')).data).toContain('held00000000001');

        // A transaction that never ends holds a switching POST for at most the statement timeout, with a warning.
        const stuck = await writer.transaction();
        transactions.push(stuck);
        await stuck.raw(`INSERT INTO "extras" ("id", "title", "created", "updated") VALUES ('stuck0000000001', 'never committed', now(), now())`);
        await subscribe(app, second.id, ['posts/*', 'extras/*']);
        expect(logger.lines.filter((line) => line.includes('a subscription switched capture on') && line.includes('still running'))).toHaveLength(1);
      } finally {
        for (const trx of transactions) if (!trx.isCompleted()) await trx.rollback();
        await writer.destroy();
      }
    }, 30_000);

    test('attack: writers committing all through a subscription that switches capture on lose nothing committed after its 204 (five rounds)', async () => {
      app = await startTestApp(engine, { collections: collections() });
      const schema = ((await app.database.db.raw('SELECT current_schema() AS s')) as { rows: { s: string }[] }).rows[0]!.s;
      const writer = knexFactory({ client: 'pg', connection: process.env.RB_TEST_POSTGRES!, searchPath: [schema], pool: { min: 0, max: 6 }, log: testKnexLog });
      try {
        for (let round = 0; round < 5; round++) {
          let subscribed = false;
          let stop = false;
          const afterTheAnswer: string[] = [];
          let counter = 0;
          // Six writers: insert, hold the transaction open a few milliseconds, commit; over and over.
          const writers = Array.from({ length: 6 }, async (_, w) => {
            while (!stop) {
              const id = `r${round}w${w}n${String(counter++).padStart(9, '0')}`.slice(0, 15).padEnd(15, '0');
              const trx = await writer.transaction();
              await trx.raw(`INSERT INTO "posts" ("id", "title", "created", "updated") VALUES (?, 'race', now(), now())`, [id]);
              await new Promise((resolve) => setTimeout(resolve, 1 + ((counter * 7) % 15)));
              const commitIssuedAfterAnswer = subscribed;
              await trx.commit();
              if (commitIssuedAfterAnswer) afterTheAnswer.push(id);
            }
          });
          await new Promise((resolve) => setTimeout(resolve, 100));
          const sse = await connect(app);
          await subscribe(app, sse.id, ['posts/*']);
          subscribed = true;
          await new Promise((resolve) => setTimeout(resolve, 400));
          stop = true;
          await Promise.all(writers);
          expect(afterTheAnswer.length).toBeGreaterThan(10);
          const last = afterTheAnswer[afterTheAnswer.length - 1]!;
          await sse.next((e) => e.event === 'posts/*' && e.data?.includes(last) === true, { timeoutMs: 10_000 });
          await new Promise((resolve) => setTimeout(resolve, 100));
          const received = sse.messages('posts/*').map((m) => m.data.record.id as string);
          expect(afterTheAnswer.filter((id) => !received.includes(id))).toEqual([]);
          expect(new Set(received).size).toBe(received.length);
          // Close, so that the next round switches capture on again.
          sse.close();
          for (let i = 0; i < 100; i++) {
            const left = (await app.database.db(CLIENTS_TABLE).count({ n: '*' }))[0] as { n: string | number };
            if (Number(left.n) === 0) break;
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
        }
      } finally {
        await writer.destroy();
      }
    }, 60_000);
  }
});
