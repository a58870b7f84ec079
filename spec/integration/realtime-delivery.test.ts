import { RecordStore } from '../../lib/db/record-store.js';
import { realtimeSchema } from '../../lib/db/realtime/realtime-schema.js';
import { StatementRunner } from '../../lib/db/statements/statement-runner.js';
import { syncDatabaseSchema } from '../../lib/db/schema/sync-database-schema.js';
import { DEFAULT_MAX_WAITING_PER_CLIENT, shareConnectionsFairly } from '../../lib/db/statements/statement-bounds.js';
import { ChangeReader } from '../../lib/realtime/change-reader.js';
import { ChangeDelivery } from '../../lib/realtime/deliver-changes.js';
import type { LocalClient, LocalSubscription } from '../../lib/realtime/local-client.js';
import { parseSubscription } from '../../lib/realtime/parse-subscription.js';
import type { SseStream } from '../../lib/realtime/sse-stream.js';
import { prepareSubscriptions } from '../../lib/realtime/subscription-conditions.js';
import { RecordPresenter } from '../../lib/records/present-records.js';
import { buildSchemaRegistry } from '../../lib/schema/collection-schema.js';
import { createMemoryLogger, TEST_IDENTITIES } from '../support/test-app.js';
import { openTestDatabase, testEngines, type TestDatabase } from '../support/test-database.js';

/**
 * Delivery read long after the writes (issue 29 finding 3): the reader starts, the writes all
 * commit, and only then is the outbox read and delivered, the widest delay there can be. A
 * subscriber never receives a version its rules did not let it read at the time.
 */
describe.each(testEngines())('delivery after a delay on %s', (engine) => {
  let database: TestDatabase;
  const rule = 'post.private = false || author = @request.auth.id';
  const registry = buildSchemaRegistry([
    { name: 'posts', fields: [{ name: 'private', type: 'bool' }], rules: { list: '', view: '' } },
    {
      name: 'notes',
      fields: [
        { name: 'text', type: 'text' },
        { name: 'author', type: 'text' },
        { name: 'post', type: 'relation', collection: 'posts' },
      ],
      rules: { list: rule, view: rule },
    },
    { name: 'plain', fields: [{ name: 'text', type: 'text' }], rules: { list: '', view: '' } },
  ]);
  const alice = TEST_IDENTITIES['token-alice']!.id;
  const bob = TEST_IDENTITIES['token-bob']!;
  beforeAll(async () => {
    database = await openTestDatabase(engine);
    shareConnectionsFairly(database.db, { maxWaitingPerClient: DEFAULT_MAX_WAITING_PER_CLIENT });
    await syncDatabaseSchema(database.db, registry.collections, { additions: [realtimeSchema(true)] });
    await database.db.raw(`INSERT INTO "_recordbase_realtime_instances" ("instance_id", "expires_at") VALUES ('test-instance', now() + interval '1 hour')`);
    // The registry row of the subscriber below (its rule on notes reads posts: every collection is captured).
    await database.db.raw(`INSERT INTO "_recordbase_realtime_clients" ("client_id", "instance_id", "subscriptions", "reads_other_tables") VALUES ('client', 'test-instance', '["notes/*", "plain/*"]', true)`);
  });
  afterAll(async () => {
    await database?.destroy();
  });

  /** A client whose stream keeps what is written to it. */
  async function subscriber(topics: string[]): Promise<{ client: LocalClient; subs: LocalSubscription[]; messages: () => { action: string; record: Record<string, unknown> }[] }> {
    const written: string[] = [];
    const stream = { isOpen: true, room: 1e9, writeChunks: (chunks: (string | Buffer)[]) => (written.push(chunks.map(String).join('')), true), end() {} };
    const client: LocalClient = { id: 'client', address: '127.0.0.1', identity: bob, subscriptions: [], stream: stream as unknown as SseStream };
    const prepared = await prepareSubscriptions({ registry, identity: bob, subscriptions: topics.map((t) => parseSubscription(t, registry)) });
    client.subscriptions = prepared.map((p) => ({ ...p, client, active: true }));
    const messages = () =>
      written
        .join('')
        .split('\n\n')
        .filter((frame) => frame.includes('data:'))
        .map((frame) => JSON.parse(frame.slice(frame.indexOf('data:') + 5)) as { action: string; record: Record<string, unknown> });
    return { client, subs: client.subscriptions, messages };
  }

  test('created and updated records are checked and sent as they are at delivery; a delete whose rule may have changed since says only which record went', async () => {
    const runner = new StatementRunner(database.db);
    const reader = new ChangeReader(runner);
    await reader.start();
    const logger = createMemoryLogger();
    const delivery = new ChangeDelivery({
      runner,
      store: new RecordStore(database.db),
      presenter: new RecordPresenter(registry, { expandLimits: { maxRecords: 10_000, maxBytes: 16 * 1024 * 1024 } }),
      collectionOf: (table) => registry.collections.find((c) => c.table === table),
      bounds: { checkTimeoutMs: 5_000, acquireTimeoutMs: 3_000 },
      endClient: () => undefined,
      logger,
    });
    const bobs = await subscriber(['notes/*', 'plain/*']);
    const sql = (text: string) => database.db.raw(text);
    await sql(`INSERT INTO "posts" ("id", "private") VALUES ('post00000000001', true)`);
    await sql(`INSERT INTO "notes" ("id", "text", "author", "post") VALUES ('note00000000001', 'DRAFT secret', '${alice}', 'post00000000001')`);
    await sql(`UPDATE "notes" SET "text" = 'final' WHERE "id" = 'note00000000001'`);
    await sql(`INSERT INTO "notes" ("id", "text", "author", "post") VALUES ('note00000000002', 'DRAFT deleted', '${alice}', 'post00000000001')`);
    await sql(`DELETE FROM "notes" WHERE "id" = 'note00000000002'`);
    // Rows that read only themselves keep every version, as written.
    await sql(`INSERT INTO "plain" ("id", "text") VALUES ('plain0000000001', 'v1')`);
    await sql(`UPDATE "plain" SET "text" = 'v2' WHERE "id" = 'plain0000000001'`);
    await sql(`UPDATE "posts" SET "private" = false WHERE "id" = 'post00000000001'`);
    // Only now is anything read: the widest delay between commit and delivery. (On a shared
    // server another test's open transaction can hold the read window back: read until it passes.)
    const deadline = Date.now() + 20_000;
    do {
      await reader.readNew((changes) => delivery.deliverPage(changes, (c) => bobs.subs.filter((s) => s.collection === c)), () => ['notes', 'plain', 'posts']);
      await delivery.idle();
      if (bobs.messages().length < 5) await new Promise((resolve) => setTimeout(resolve, 50));
    } while (bobs.messages().length < 5 && Date.now() < deadline);
    const seen = bobs.messages();
    expect(JSON.stringify(seen)).not.toContain('DRAFT');
    expect(seen.map((m) => [m.action, m.record.id, m.record.text ?? null])).toEqual([
      ['create', 'note00000000001', 'final'],
      ['update', 'note00000000001', 'final'],
      ['delete', 'note00000000002', null],
      ['create', 'plain0000000001', 'v1'],
      ['update', 'plain0000000001', 'v2'],
    ]);
    expect(Object.keys(seen[2].record).sort()).toEqual(['collectionId', 'collectionName', 'id']);
    await delivery.close();
  });
});
