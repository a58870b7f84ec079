import PocketBase from 'pocketbase';
import type { CollectionDefinition } from '../../lib/index.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { startTestApp, TEST_IDENTITIES, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/**
 * Issue 47, DESIGN 23: `GET /api/collections/{c}/aggregate` counts, sums, averages and bounds
 * only the records the caller's list rule lets it list. For four identities, each shown another
 * subset, every aggregate equals what this test computes from the records that identity lists
 * through the list endpoint: no more, no fewer.
 */

const alice = TEST_IDENTITIES['token-alice']!;
const bob = TEST_IDENTITIES['token-bob']!;
const api = (p: string) => `/backend/api/collections/${p}`;

const collections = (): CollectionDefinition[] => [
  { name: 'members', fields: [{ name: 'name', type: 'text' }], rules: OPEN_RULES },
  {
    name: 'orders',
    fields: [
      { name: 'status', type: 'text' },
      { name: 'author', type: 'relation', collection: 'members' },
      { name: 'amount', type: 'number' },
      { name: 'note', type: 'text' },
      { name: 'paid', type: 'bool' },
    ],
    indexes: [{ search: ['note'] }],
    // A guest lists the public orders; alice and bob those and their own; superusers every one.
    rules: { ...OPEN_RULES, list: 'status = "public" || (@request.auth.id != "" && author = @request.auth.id)' },
  },
  { name: 'closed', fields: [{ name: 'amount', type: 'number' }], rules: { ...OPEN_RULES, list: null } },
  // A view collection aggregates as a table does, under its own list rule.
  { name: 'order_view', type: 'view', viewQuery: 'SELECT id, status, amount FROM orders', rules: { list: 'amount >= 10', view: '' } },
];

type Row = Record<string, unknown>;
const IDENTITIES = [
  { who: 'guest', token: undefined },
  { who: 'alice', token: 'token-alice' },
  { who: 'bob', token: 'token-bob' },
  { who: 'superuser', token: 'token-root' },
] as const;

/** Every aggregate of `rows` grouped by `groupBy`, as the endpoint should answer it (default order: group fields ascending). */
function expected(rows: Row[], groupBy: string[]): Row[] {
  const groups = new Map<string, Row[]>();
  for (const row of rows) {
    const key = JSON.stringify(groupBy.map((f) => row[f]));
    groups.set(key, [...(groups.get(key) ?? []), row]);
  }
  if (groupBy.length === 0 && groups.size === 0) groups.set('[]', []);
  const items = [...groups.values()].map((members) => {
    const item: Row = {};
    for (const f of groupBy) item[f] = members[0]![f];
    const amounts = members.map((m) => m.amount as number);
    const created = members.map((m) => m.created as string).sort();
    const notes = members.map((m) => m.note as string).sort();
    item.count = members.length;
    item.sum_amount = members.length === 0 ? null : amounts.reduce((a, b) => a + b, 0);
    item.avg_amount = members.length === 0 ? null : (item.sum_amount as number) / members.length;
    item.min_created = created[0] ?? null;
    item.max_created = created.at(-1) ?? null;
    item.min_note = notes[0] ?? null;
    item.max_amount = members.length === 0 ? null : Math.max(...amounts);
    return item;
  });
  const compare = (a: unknown, b: unknown) => (a === b ? 0 : String(a) < String(b) ? -1 : 1);
  return items.sort((x, y) => {
    for (const f of groupBy) {
      const c = compare(x[f], y[f]);
      if (c !== 0) return c;
    }
    return 0;
  });
}

const FIELDS = 'count(),sum(amount),avg(amount),min(created),max(created),min(note),max(amount)';

describe.each(testEngines())('aggregates under the list rule on %s', (engine) => {
  let app: TestApp;
  const logged: Record<string, unknown>[] = [];
  beforeAll(async () => {
    app = await startTestApp(engine, { collections: collections(), onRequest: (entry) => void logged.push({ ...entry }) });
    const members = app.router.api.collection('members');
    await members.create({ id: alice.id, name: 'Alice' }, { as: 'superuser' });
    await members.create({ id: bob.id, name: 'Bob' }, { as: 'superuser' });
    const orders = app.router.api.collection('orders');
    const statuses = ['public', 'draft', 'paid'];
    const authors = [alice.id, bob.id, '', alice.id];
    for (let i = 0; i < 36; i++) {
      await orders.create(
        { status: statuses[i % 3], author: authors[Math.floor(i / 3) % 4], amount: (i * 7) % 23, note: `n${String((i * 5) % 36).padStart(2, '0')}`, paid: i % 4 === 0 },
        { as: 'superuser' },
      );
    }
    await app.router.api.collection('closed').create({ amount: 1 }, { as: 'superuser' });
  });
  afterAll(async () => {
    await app?.close();
  });

  const get = (path: string, token?: string) => {
    const req = app.http.get(api(path));
    if (token) req.set('Authorization', token);
    return req;
  };

  /** What `token` may list, through the list endpoint. */
  async function listed(token: string | undefined, narrow: { filter?: string; search?: string } = {}): Promise<Row[]> {
    const res = await get('orders/records', token).query({ perPage: 1000, ...narrow });
    expect(res.status).toBe(200);
    return res.body.items;
  }

  const filter = 'amount > 5 && note != "n10"';
  const search = 'n05 or n10 or n15 or n20 or n25 or n30 or n01';
  test.each(IDENTITIES)('$who: every aggregate equals what the list endpoint shows it, with and without groupBy, a filter and a search', async ({ token }) => {
    const counts = new Set<number>();
    for (const narrow of [{}, { filter }, { search }, { filter, search }]) {
      const rows = await listed(token, narrow);
      counts.add(rows.length);
      for (const groupBy of [[], ['status'], ['status', 'author'], ['paid'], ['author']]) {
        const res = await get('orders/aggregate', token).query({ fields: FIELDS, perPage: 1000, ...(groupBy.length ? { groupBy: groupBy.join(',') } : {}), ...narrow });
        expect({ groupBy, narrow, status: res.status }).toEqual({ groupBy, narrow, status: 200 });
        const want = expected(rows, groupBy);
        expect(res.body).toMatchObject({ page: 1, perPage: 1000, totalItems: want.length, totalPages: want.length === 0 ? 0 : 1 });
        expect(res.body.items.length).toBe(want.length);
        res.body.items.forEach((item: Row, i: number) => {
          const { avg_amount: avg, ...rest } = want[i]!;
          expect(item).toEqual({ ...rest, avg_amount: avg === null ? null : expect.closeTo(avg as number, 9) });
        });
      }
    }
    expect(counts.size).toBeGreaterThan(2); // the filter and the search each narrow what is aggregated
  });

  test('the four identities see four different subsets (the test above would prove nothing otherwise)', async () => {
    const counts = await Promise.all(IDENTITIES.map(async ({ token }) => (await get('orders/aggregate', token)).body.items[0].count));
    expect(new Set(counts).size).toBe(4);
    expect(counts[3]).toBe(36);
  });

  test('sort by an aggregate or a group field, and paging over groups', async () => {
    const all = await get('orders/aggregate', 'token-root').query({ groupBy: 'status,author', fields: 'count(),sum(amount)', sort: '-sum_amount' });
    expect(all.status).toBe(200);
    expect(all.body.totalItems).toBe(9);
    const sums = all.body.items.map((i: Row) => i.sum_amount as number);
    expect(sums).toEqual([...sums].sort((a, b) => b - a));
    const page2 = await get('orders/aggregate', 'token-root').query({ groupBy: 'status,author', fields: 'count(),sum(amount)', sort: '-sum_amount', page: 2, perPage: 4 });
    expect(page2.body).toMatchObject({ page: 2, perPage: 4, totalItems: 9, totalPages: 3 });
    expect(page2.body.items).toEqual(all.body.items.slice(4, 8));
    const past = await get('orders/aggregate', 'token-root').query({ groupBy: 'status', page: 9, perPage: 2 });
    expect(past.body).toEqual({ page: 9, perPage: 2, totalItems: 3, totalPages: 2, items: [] });
    const byStatus = await get('orders/aggregate', 'token-root').query({ groupBy: 'status', sort: '-status' });
    expect(byStatus.body.items.map((i: Row) => i.status)).toEqual(['public', 'paid', 'draft']);
    expect(byStatus.body.items[0]).toEqual({ status: 'public', count: 12 });
  });

  test('a null list rule: 403 for guests and users as list answers, superusers aggregate', async () => {
    for (const token of [undefined, 'token-alice']) {
      const list = await get('closed/records', token);
      const aggregate = await get('closed/aggregate', token).query({ fields: 'sum(amount)' });
      expect(aggregate.status).toBe(list.status);
      expect(aggregate.body).toEqual(list.body);
      expect(aggregate.status).toBe(403);
    }
    expect((await get('closed/aggregate', 'token-root').query({ fields: 'sum(amount)' })).body.items).toEqual([{ sum_amount: 1 }]);
    expect((await get('nothere/aggregate', 'token-root')).status).toBe(404);
    // search as lists read it: a collection without a search index is a 400.
    expect((await get('closed/aggregate', 'token-root').query({ search: 'x' })).body.message).toMatch(/no search index/);
  });

  test('a view collection, and the request log names the route as for other routes', async () => {
    const rows = (await listed('token-root')).filter((r) => (r.amount as number) >= 10);
    const res = await get('order_view/aggregate', 'token-alice').query({ groupBy: 'status', fields: 'count(),sum(amount)' });
    expect(res.status).toBe(200);
    expect(res.body.items).toEqual(
      ['draft', 'paid', 'public'].map((status) => {
        const group = rows.filter((r) => r.status === status);
        return { status, count: group.length, sum_amount: group.reduce((n, r) => n + (r.amount as number), 0) };
      }),
    );
    const entry = [...logged].reverse().find((e) => e.path === '/backend/api/collections/order_view/aggregate');
    expect(entry).toMatchObject({ method: 'GET', route: '/api/collections/:collection/aggregate', status: 200, collection: 'order_view', callerId: alice.id });
  });

  test('the server API: aggregate() as a caller answers what HTTP answers', async () => {
    const orders = app.router.api.collection('orders');
    for (const { token } of IDENTITIES) {
      const as = token === undefined ? null : token === 'token-root' ? 'superuser' : TEST_IDENTITIES[token]!;
      for (const narrow of [{ filter: 'amount > 3' }, { filter: 'amount > 3', search }]) {
        const viaApi = await orders.aggregate({ as, groupBy: 'status', fields: 'count(),sum(amount)', sort: '-count', ...narrow });
        const viaHttp = await get('orders/aggregate', token).query({ groupBy: 'status', fields: 'count(),sum(amount)', sort: '-count', ...narrow });
        expect(viaApi).toEqual(viaHttp.body);
      }
    }
    await expect(orders.aggregate({ as: alice, fields: 'sum(note)' })).rejects.toMatchObject({ status: 400 });
    await expect(app.router.api.collection('closed').aggregate({ as: alice })).rejects.toMatchObject({ status: 403 });
  });

  test('the SDK: pb.send to the aggregate endpoint', async () => {
    const pb = new PocketBase(`${app.baseUrl}/backend`);
    pb.authStore.save('token-bob');
    const answer = await pb.send('/api/collections/orders/aggregate', { query: { groupBy: 'author', fields: 'count(),max(amount)', filter: 'amount >= 0' } });
    const rows = await listed('token-bob');
    expect(answer).toMatchObject({ page: 1, totalItems: new Set(rows.map((r) => r.author)).size });
    expect(answer.items.reduce((n: number, i: Row) => n + (i.count as number), 0)).toBe(rows.length);
    for (const item of answer.items) expect(item.count).toBe(rows.filter((r) => r.author === item.author).length);
  });
});
