import { EventSource } from 'eventsource';
import type { RecordSubscription } from 'pocketbase';
import type { CollectionDefinition } from '../../lib/index.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';
import { ALICE, BOB, sdkClient } from './sdk-fixtures.js';

/** The pocketbase SDK's realtime (pb.collection(c).subscribe / unsubscribe) over eventsource@4, as a Node app would use it. */

(globalThis as { EventSource?: unknown }).EventSource = EventSource;

function collections(): CollectionDefinition[] {
  return [
    { name: 'authors', fields: [{ name: 'name', type: 'text' }], rules: OPEN_RULES },
    {
      name: 'notes',
      fields: [
        { name: 'title', type: 'text' },
        { name: 'n', type: 'number' },
        { name: 'author', type: 'relation', collection: 'authors' },
      ],
      rules: OPEN_RULES,
    },
    {
      name: 'private',
      fields: [
        { name: 'owner', type: 'text' },
        { name: 'title', type: 'text' },
      ],
      rules: { ...OPEN_RULES, list: 'owner = @request.auth.id', view: 'owner = @request.auth.id' },
    },
  ];
}

/** Collects callbacks and waits for the n-th. */
function collector<T = Record<string, unknown>>() {
  const seen: RecordSubscription<T & { id: string }>[] = [];
  const waiters: (() => void)[] = [];
  return {
    seen,
    callback: (e: RecordSubscription<T & { id: string }>) => {
      seen.push(e);
      for (const w of waiters.splice(0)) w();
    },
    async until(count: number, timeoutMs = 5000): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      while (seen.length < count) {
        if (Date.now() > deadline) throw new Error(`expected ${count} events, got ${seen.length}: ${JSON.stringify(seen)}`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 50);
        });
      }
    },
  };
}

describe.each(testEngines())('realtime through the pocketbase SDK against %s', (engine) => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp(engine, { collections: collections() });
  });
  afterAll(async () => {
    await app?.router.close();
    await app?.close();
  });

  test("subscribe('*') and to one id: create, update, delete arrive as the SDK's callbacks; unsubscribe stops them", async () => {
    const pb = sdkClient(app);
    const all = collector<{ title: string }>();
    const unsubscribeAll = await pb.collection('notes').subscribe('*', all.callback);
    const one = await pb.collection('notes').create({ title: 'one' });
    const two = await pb.collection('notes').create({ title: 'two' });
    // Both creates read and delivered before the id subscription starts: a change committed before
    // a POST but not yet read by the instance may still reach the new subscription (docs/realtime.md).
    await all.until(2);
    const single = collector<{ title: string }>();
    const unsubscribeOne = await pb.collection('notes').subscribe(one.id, single.callback);
    await pb.collection('notes').update(one.id, { title: 'one!' });
    await pb.collection('notes').update(two.id, { title: 'two!' });
    await pb.collection('notes').delete(one.id);
    await all.until(5);
    await single.until(2);
    expect(all.seen.map((e) => `${e.action} ${e.record.title}`)).toEqual(['create one', 'create two', 'update one!', 'update two!', 'delete one!']);
    expect(single.seen.map((e) => `${e.action} ${e.record.title}`)).toEqual(['update one!', 'delete one!']);
    await unsubscribeOne();
    await unsubscribeAll();
    expect(pb.realtime.isConnected).toBe(false);
    await pb.collection('notes').create({ title: 'after' });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(all.seen).toHaveLength(5);
  });

  test('options: filter, expand and fields shape what arrives', async () => {
    const pb = sdkClient(app);
    const author = await pb.collection('authors').create({ name: 'Ann' });
    const got = collector<{ n: number; expand?: { author: { name: string } } }>();
    const unsubscribe = await pb.collection('notes').subscribe('*', got.callback, { filter: 'n > 5', expand: 'author', fields: 'id,n,expand.author.name' });
    await pb.collection('notes').create({ title: 'low', n: 1, author: author.id });
    const high = await pb.collection('notes').create({ title: 'high', n: 9, author: author.id });
    await got.until(1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(got.seen.map((e) => e.record)).toEqual([{ id: high.id, n: 9, expand: { author: { name: 'Ann' } } }]);
    await unsubscribe();
  });

  test("signed-in subscriptions: each user receives only what the rule lets it see", async () => {
    const alice = sdkClient(app, 'token-alice');
    const bob = sdkClient(app, 'token-bob');
    const forAlice = collector<{ title: string }>();
    const forBob = collector<{ title: string }>();
    const stopAlice = await alice.collection('private').subscribe('*', forAlice.callback);
    const stopBob = await bob.collection('private').subscribe('*', forBob.callback);
    await alice.collection('private').create({ owner: ALICE, title: 'a' });
    await bob.collection('private').create({ owner: BOB, title: 'b' });
    await alice.collection('private').create({ owner: ALICE, title: 'a2' });
    await forAlice.until(2);
    await forBob.until(1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(forAlice.seen.map((e) => e.record.title)).toEqual(['a', 'a2']);
    expect(forBob.seen.map((e) => e.record.title)).toEqual(['b']);
    await stopAlice();
    await stopBob();
  });

  test('the SDK reconnects after the server ends its stream, with a new clientId and its subscriptions', async () => {
    const pb = sdkClient(app);
    const got = collector<{ title: string }>();
    const unsubscribe = await pb.collection('notes').subscribe('*', got.callback);
    const firstId = pb.realtime.clientId;
    await pb.collection('notes').create({ title: 'before' });
    await got.until(1);
    app.server.closeAllConnections();
    const deadline = Date.now() + 10_000;
    while ((pb.realtime.clientId === firstId || !pb.realtime.isConnected) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(pb.realtime.clientId).not.toBe(firstId);
    // The SDK resubmits its topics right after PB_CONNECT; give that POST a moment.
    await new Promise((resolve) => setTimeout(resolve, 300));
    await pb.collection('notes').create({ title: 'after' });
    await got.until(2);
    expect(got.seen.map((e) => e.record.title)).toEqual(['before', 'after']);
    await unsubscribe();
  });
});
