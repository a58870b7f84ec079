import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import type { CollectionDefinition } from '../../lib/index.js';
import type { Limits } from '../../lib/options.js';
import { measureEventLoopLag, measureLeastEventLoopLag } from '../support/event-loop-lag.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { startSiblingRouter, startTestApp, type SiblingRouter, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/**
 * Issue 10, the rows that are not the database's: single requests that used to freeze the
 * process or blow up the response. Each attack must answer within its limit with a clear status,
 * keep the event loop under 100 ms, and leave the server able to answer the next request.
 */

const MAX_LAG_MS = 100;
/**
 * PGlite runs its queries on the event loop (until the embedded engine moves to a worker thread,
 * issue 10 item 4), so reading a few thousand rows there blocks by itself, whatever we do with
 * them: a plain perPage=1000 list already takes 100-300 ms on a busy machine. Its bound still
 * catches the freezes of seconds that these attacks caused before they were bounded.
 */
const MAX_LAG_MS_BY_ENGINE = { postgres: MAX_LAG_MS, pglite: 1000 };
/**
 * An expansion refused at its limit may cost what the page itself costs (it reads at most one
 * level of at most maxExpandRecords + 1 rows), and a page of 1,000 records alone comes near
 * 100 ms on a loaded machine (a single garbage collection took 128 ms there). So an attack's
 * lag is bounded by MAX_LAG_MS or by this many times the lag of the same page without expand,
 * measured alongside, whichever is larger; the unbounded expansions blocked for seconds.
 */
const LAG_RATIO_TO_PAGE = 2;
/**
 * Runs of each measured request; the least of their worst blocks counts. In the full suite on a
 * shared 2-core machine a garbage collection of 100-130 ms landed in one run of two now and then.
 */
const LAG_RUNS = 3;
/** Nodes in the seeded graph: enough that every attack below would go far over its limit. */
const NODE_COUNT = 20_000;
/** Children per node in the parent tree (node i's parent is (i - 1) / FAN_OUT). */
const FAN_OUT = 3;
/** Forward links per node. */
const LINKS = 20;

function collections(): CollectionDefinition[] {
  return [
    { name: 'texts', fields: [{ name: 'name', type: 'text' }], rules: OPEN_RULES },
    {
      name: 'nodes',
      fields: [
        { name: 'label', type: 'text' },
        { name: 'parent', type: 'relation', collection: 'nodes' },
        { name: 'links', type: 'relation', collection: 'nodes', maxSelect: 100 },
      ],
      rules: OPEN_RULES,
    },
  ];
}

function nodeId(i: number): string {
  return `n${String(i).padStart(14, '0')}`;
}

/** The NODE_COUNT nodes in one statement: a tree through `parent`, LINKS forward links each. */
async function seedNodes(app: TestApp): Promise<void> {
  const id = (expr: string) => `'n' || lpad((${expr})::text, 14, '0')`;
  const links = `(SELECT jsonb_agg(${id(`(i * 7 + k * 13) % ${NODE_COUNT}`)}) FROM generate_series(1, ${LINKS}) AS k)`;
  await app.database.db.raw(
    `INSERT INTO nodes (id, label, parent, links)
     SELECT ${id('i')}, 'node ' || i, CASE WHEN i = 0 THEN '' ELSE ${id(`(i - 1) / ${FAN_OUT}`)} END, ${links}
     FROM generate_series(0, ${NODE_COUNT - 1}) AS i`,
  );
}

describe.each(testEngines())('bounded cost on %s', (engine) => {
  let app: TestApp;
  const api = (path: string) => `/backend/api/collections/${path}`;

  beforeAll(async () => {
    app = await startTestApp(engine, { collections: collections() });
    await seedNodes(app);
  }, 120_000);
  afterAll(async () => {
    await app?.close();
  });

  async function expectServerHealthy(): Promise<void> {
    const res = await app.http.get(api(`nodes/records/${nodeId(1)}?expand=parent`));
    expect(res.status).toBe(200);
    expect(res.body.expand.parent.id).toBe(nodeId(0));
  }

  describe(':excerpt', () => {
    const shapes: Array<[label: string, text: string, excerpt: string]> = [
      ['"<" x 100000', '<'.repeat(100_000), '<<<<<<<<<<'],
      ['"<" x 1000000', '<'.repeat(1_000_000), '<<<<<<<<<<'],
      ['nested "<<<>" x 100000', '<<<>'.repeat(100_000), ''],
      ['a whitespace run of 50,000', `${' \n\t'.repeat(16_666)}after the run`, 'after the'],
      ['a whitespace run of 1,000,000 (past the step cap)', `${' \n\t'.repeat(333_333)}after the run`, ''],
      ['"<>" x 500000 then text', `${'<>'.repeat(500_000)}hidden`, ''],
      ['one tag of 1,000,000 characters', `<${'a'.repeat(1_000_000)}>shown`, 'shown'],
      ['text', `${'word '.repeat(200_000)}`, 'word word'],
    ];

    test.each(shapes)('%s answers quickly, without blocking the event loop', async (_label, text, expected) => {
      const created = await app.http.post(api('texts/records')).send({ name: text });
      expect(created.status).toBe(200);
      const { results, leastMaxLagMs } = await measureLeastEventLoopLag(LAG_RUNS, () => app.http.get(api(`texts/records/${created.body.id}?fields=name:excerpt(10)`)));
      for (const result of results) {
        expect(result.status).toBe(200);
        expect(result.body).toEqual({ name: expected });
      }
      expect(leastMaxLagMs).toBeLessThan(MAX_LAG_MS);
    }, 60_000);

    test('a list of such records with :excerpt stays responsive', async () => {
      const { results, leastMaxLagMs } = await measureLeastEventLoopLag(LAG_RUNS, () => app.http.get(api('texts/records?perPage=100&fields=id,name:excerpt(10,true)')));
      for (const result of results) {
        expect(result.status).toBe(200);
        expect(result.body.items.length).toBeGreaterThanOrEqual(7);
      }
      expect(leastMaxLagMs).toBeLessThan(MAX_LAG_MS);
    }, 60_000);
  });

  describe('expand', () => {
    test('back-relations within the limits expand correctly', async () => {
      const res = await app.http.get(api(`nodes/records?perPage=2&sort=id&expand=nodes_via_parent.nodes_via_parent`));
      expect(res.status).toBe(200);
      const [root, first] = res.body.items;
      expect(root.id).toBe(nodeId(0));
      // node 0 is its own child's parent only for 1..3 (node 0 has no parent itself)
      expect(root.expand.nodes_via_parent.map((n: { id: string }) => n.id)).toEqual([nodeId(1), nodeId(2), nodeId(3)]);
      expect(root.expand.nodes_via_parent[0].expand.nodes_via_parent.map((n: { id: string }) => n.id)).toEqual([nodeId(4), nodeId(5), nodeId(6)]);
      expect(first.expand.nodes_via_parent.map((n: { id: string }) => n.id)).toEqual([nodeId(4), nodeId(5), nodeId(6)]);
    });

    const attacks: Array<[label: string, query: string]> = [
      ['perPage=1000&expand=nodes_via_parent six levels deep', `perPage=1000&expand=${Array(6).fill('nodes_via_parent').join('.')}`],
      ['expand=links.links.links.links (forward fan-out)', 'perPage=30&expand=links.links.links.links'],
      ['perPage=1&expand=links six levels deep', `perPage=1&expand=${Array(6).fill('links').join('.')}`],
      ['perPage=1000&expand=links,parent,nodes_via_parent', 'perPage=1000&expand=links,parent,nodes_via_parent'],
    ];

    test.each(attacks)('%s: a 400 naming the limit, quickly, and the server stays healthy', async (_label, query) => {
      const perPage = /perPage=(\d+)/.exec(query)![1];
      const pageLags: number[] = [];
      const attackLags: number[] = [];
      // Three times each: a garbage collection or another process can stall any single request
      // on a busy machine; a request that blocks by itself does so every time.
      for (let round = 0; round < LAG_RUNS; round++) {
        const page = await measureEventLoopLag(() => app.http.get(api(`nodes/records?skipTotal=1&perPage=${perPage}`)));
        expect(page.result.status).toBe(200);
        pageLags.push(page.maxLagMs);
        const rssBefore = process.memoryUsage().rss;
        const started = Date.now();
        const { result, maxLagMs } = await measureEventLoopLag(() => app.http.get(api(`nodes/records?skipTotal=1&${query}`)));
        const elapsedMs = Date.now() - started;
        expect(result.status).toBe(400);
        expect(result.body).toEqual({ status: 400, message: expect.stringContaining('limits.maxExpandRecords'), data: {} });
        expect(result.body.message).toContain('10000 related records');
        expect(elapsedMs).toBeLessThan(10_000);
        expect(process.memoryUsage().rss - rssBefore).toBeLessThan(200 * 1024 * 1024);
        attackLags.push(maxLagMs);
        await expectServerHealthy();
      }
      expect(Math.min(...attackLags)).toBeLessThan(Math.max(MAX_LAG_MS_BY_ENGINE[engine], LAG_RATIO_TO_PAGE * Math.max(...pageLags)));
    }, 60_000);

    test('records shared by many parents are serialised in full under each of them', async () => {
      // Every item's parent chain ends at node 0: the upper nodes are one object each, shared by
      // hundreds of parents, and each item must still carry its own complete chain.
      const chain = Array(6).fill('parent').join('.');
      const res = await app.http.get(api(`nodes/records?perPage=1000&page=2&sort=id&skipTotal=1&expand=${chain}&fields=id,expand`));
      expect(res.status).toBe(200);
      expect(res.body.items).toHaveLength(1000);
      for (const [index, item] of (res.body.items as Array<Record<string, unknown>>).entries()) {
        let expected = 1000 + index;
        let node = item as { id: string; expand?: { parent?: unknown } };
        const seen: string[] = [];
        while (node.expand?.parent) {
          node = node.expand.parent as typeof node;
          expected = Math.floor((expected - 1) / FAN_OUT);
          seen.push(node.id);
          expect(node.id).toBe(nodeId(expected));
        }
        expect(seen.length).toBe(6);
      }
    }, 60_000);
  });

  describe('expand limits are exact', () => {
    // A router a failed assertion left open is closed after its test (a test that reassigned
    // `tight` over an open router once left its server listening, and jest never exited).
    let tight: SiblingRouter | undefined;
    afterEach(async () => {
      await tight?.close();
      tight = undefined;
    });

    const startLimited = (limits: Partial<Limits>) => startSiblingRouter(app, { collections: collections(), limits });

    /** Through a router with `limits`, `path` answers exactly what the unlimited router did. */
    async function expectServedUnder(limits: Partial<Limits>, path: string, full: { body: unknown }): Promise<void> {
      tight = await startLimited(limits);
      const response = await tight.http.get(api(path));
      expect(response.status).toBe(200);
      expect(response.body).toEqual(full.body);
      await tight.close();
      tight = undefined;
    }

    /** Through a router with `limits`, `path` is a 400 whose message contains each of `parts`. */
    async function expectRefusedUnder(limits: Partial<Limits>, path: string, parts: string[]): Promise<void> {
      tight = await startLimited(limits);
      const response = await tight.http.get(api(path));
      expect(response.status).toBe(400);
      for (const part of parts) expect(response.body.message).toContain(part);
      await tight.close();
      tight = undefined;
    }

    /** The request, its expansion's record count (repeats included) and its bytes as sent. */
    const query = `nodes/records?perPage=5&sort=id&skipTotal=1&expand=links.parent,nodes_via_parent`;

    function measureExpansion(items: Array<Record<string, unknown>>): { records: number; bytes: number } {
      let records = 0;
      const visit = (value: unknown): void => {
        if (Array.isArray(value)) return value.forEach(visit);
        if (value === null || typeof value !== 'object') return;
        records++;
        for (const child of Object.values((value as { expand?: object }).expand ?? {})) visit(child);
      };
      for (const item of items) for (const child of Object.values((item.expand ?? {}) as object)) visit(child);
      const without = items.map(({ expand: _expand, ...rest }) => rest);
      const bytes = Buffer.byteLength(JSON.stringify(items)) - Buffer.byteLength(JSON.stringify(without));
      return { records, bytes };
    }

    test('at the limit is 200, one over is 400 naming the limit', async () => {
      const full = await app.http.get(api(query));
      expect(full.status).toBe(200);
      const { records, bytes } = measureExpansion(full.body.items);
      // 5 items x 20 links (+ their parents) + children: big enough to mean something
      expect(records).toBeGreaterThan(150);

      await expectServedUnder({ maxExpandRecords: records, maxExpandBytes: bytes }, query, full);
      await expectRefusedUnder({ maxExpandRecords: records - 1 }, query, [`more than ${records - 1} related records`, 'limits.maxExpandRecords']);
      await expectRefusedUnder({ maxExpandBytes: bytes - 1 }, query, [`more than ${bytes - 1} bytes`, 'limits.maxExpandBytes']);
    }, 60_000);

    test('a deep chain at the byte limit is 200 and one byte under is 400 (levels first counted by a bound are measured as they were)', async () => {
      // Six levels of one record each: the first levels fit by their upper bound, a later one
      // does not, and then the earlier records (which by now carry their own `expand`) are
      // measured without it; counting that `expand` twice would refuse the exact limit.
      const chain = `nodes/records?perPage=1&page=1500&sort=id&skipTotal=1&expand=${Array(6).fill('parent').join('.')}`;
      const full = await app.http.get(api(chain));
      expect(full.status).toBe(200);
      const { records, bytes } = measureExpansion(full.body.items);
      expect(records).toBe(6);

      await expectServedUnder({ maxExpandBytes: bytes }, chain, full);
      await expectRefusedUnder({ maxExpandBytes: bytes - 1 }, chain, [`more than ${bytes - 1} bytes`]);
    }, 60_000);
  });
});
