import knexFactory, { type Knex } from 'knex';
import type { Statement, StatementResult } from '../../lib/db/statements/run-statement.js';
import { StatementRunner } from '../../lib/db/statements/statement-runner.js';
import type { CollectionDefinition } from '../../lib/index.js';
import { ClientRegistry } from '../../lib/realtime/client-registry.js';
import type { SqlFragment } from '../../lib/sql-fragment.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { openSse, type SseConnection } from '../support/sse-reader.js';
import { startSiblingRouter, startTestApp, type SiblingRouter } from '../support/test-app.js';
import { openTestDatabase, testEngines, testKnexLog, type TestDatabase } from '../support/test-database.js';

/**
 * A POST that switches capture on waits for the transactions running at its commit to end
 * (docs/realtime.md, "Switching capture on never loses a change"). Every waiting POST of an
 * instance shares one waiter: one listing of pg_locks per round for all who joined since the last
 * one, then one poll for all of them, so many waiting POSTs cost the database what one does.
 */

/** Waiting POSTs in the attack: each switches capture on for a collection of its own. */
const WAITERS = 40;

function collections(): CollectionDefinition[] {
  return [
    { name: 'posts', fields: [{ name: 'title', type: 'text' }], rules: OPEN_RULES },
    ...Array.from({ length: WAITERS }, (_, i): CollectionDefinition => ({ name: `quiet${i}`, fields: [{ name: 'title', type: 'text' }], rules: OPEN_RULES })),
  ];
}

/**
 * The pg_locks statements one waiter alone runs in `elapsedMs` at most: its listing, then a poll
 * after 2 ms, doubling up to every 50 ms.
 */
function oneWaiterStatements(elapsedMs: number): number {
  let statements = 1;
  let at = 0;
  for (let pause = 2; at + pause <= elapsedMs; pause = Math.min(pause * 2, 50)) {
    at += pause;
    statements++;
  }
  return statements;
}

/** Counts the statements `db` runs that read pg_locks (the waiter's listings and polls). */
function countLockStatements(db: Knex): { readonly count: number; stop(): void } {
  const counter = { count: 0, stop: () => db.off('query', onQuery) };
  const onQuery = (query: { sql?: string }) => {
    if (query.sql?.includes('pg_locks') === true) counter.count++;
  };
  db.on('query', onQuery);
  return counter;
}

/** A Knex on the test database's schema, outside the router's pool, to hold transactions open. */
async function openWriter(db: Knex, connections: number): Promise<Knex> {
  const schema = ((await db.raw('SELECT current_schema() AS s')) as { rows: { s: string }[] }).rows[0]!.s;
  return knexFactory({ client: 'pg', connection: process.env.RB_TEST_POSTGRES!, searchPath: [schema], pool: { min: 0, max: connections }, log: testKnexLog });
}

/**
 * A runner on `db` whose statements answer `ms` after the database ran them, so each stays in
 * flight that long; the first `failures` of them fail then instead.
 */
function answeringLate(db: Knex, ms: number, failures = 0): StatementRunner {
  let toFail = failures;
  class LateRunner extends StatementRunner {
    override async query(statement: SqlFragment | Statement): Promise<StatementResult> {
      const result = await super.query(statement);
      await new Promise((resolve) => setTimeout(resolve, ms));
      if (toFail-- > 0) throw new Error('the connection broke');
      return result;
    }
  }
  return new LateRunner(db);
}

/** A transaction that has begun (its virtual id is in pg_locks once it ran a statement). */
async function beginTransaction(writer: Knex): Promise<Knex.Transaction> {
  const trx = await writer.transaction();
  await trx.raw('SELECT 1');
  return trx;
}

describe.each(testEngines())('realtime switch-on waiter on %s', (engine) => {
  test('many concurrent waits all answer true, costing what one wait does and one listing more (for those who joined while the first ran)', async () => {
    const database: TestDatabase = await openTestDatabase(engine);
    const statements = countLockStatements(database.db);
    try {
      const registry = new ClientRegistry(new StatementRunner(database.db), 'waiter-test');
      const started = Date.now();
      expect(await Promise.all(Array.from({ length: WAITERS }, () => registry.waitForRunningTransactions(5_000)))).toEqual(Array(WAITERS).fill(true));
      // PGlite has one session, so nothing else runs: the first listing, and one for those who joined
      // during it. On a shared Postgres server other sessions' transactions may run: polls wait for them.
      expect(statements.count).toBeLessThanOrEqual(engine === 'pglite' ? 2 : oneWaiterStatements(Date.now() - started) + 1);
      // The loop stopped: a later wait lists again, after its own call.
      const count = statements.count;
      expect(await registry.waitForRunningTransactions(1_000)).toBe(true);
      expect(statements.count).toBeGreaterThan(count);
    } finally {
      statements.stop();
      await database.destroy();
    }
  });

  test('a failing statement rejects the waits it was for; one that joined while it ran is listed next, and answers', async () => {
    const database: TestDatabase = await openTestDatabase(engine);
    try {
      const registry = new ClientRegistry(answeringLate(database.db, 200, 1), 'waiter-test');
      const listed = new Promise<void>((resolve) => database.db.once('query', () => resolve()));
      const failing = registry.waitForRunningTransactions(5_000);
      await listed;
      const joinedMeanwhile = registry.waitForRunningTransactions(5_000);
      await expect(failing).rejects.toThrow('the connection broke');
      expect(await joinedMeanwhile).toBe(true);
    } finally {
      await database.destroy();
    }
  });

  if (engine === 'postgres') {
    test('a wait counts the transactions running after its call, never a listing taken before (even one still in flight); each answers at its own deadline or when its own are gone', async () => {
      const database: TestDatabase = await openTestDatabase(engine);
      const writer = await openWriter(database.db, 3);
      const transactions: Knex.Transaction[] = [];
      try {
        const registry = new ClientRegistry(answeringLate(database.db, 300), 'waiter-test');
        const first = await beginTransaction(writer);
        transactions.push(first);
        const settled: string[] = [];
        const listed = new Promise<void>((resolve) => database.db.once('query', () => resolve()));
        const early = registry.waitForRunningTransactions(10_000).then((done) => settled.push(`early ${done}`));
        await listed;
        await new Promise((resolve) => setTimeout(resolve, 50));
        // Begun after the early wait's listing ran, while its answer is still on its way: only a later wait counts it.
        const second = await beginTransaction(writer);
        transactions.push(second);
        const late = registry.waitForRunningTransactions(10_000).then((done) => settled.push(`late ${done}`));
        const short = registry.waitForRunningTransactions(300).then((done) => settled.push(`short ${done}`));
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        expect(settled).toEqual(['short false']);
        await first.commit();
        await early;
        expect(settled).toEqual(['short false', 'early true']);
        await new Promise((resolve) => setTimeout(resolve, 800));
        expect(settled).toEqual(['short false', 'early true']);
        await second.commit();
        await Promise.all([late, short]);
        expect(settled).toEqual(['short false', 'early true', 'late true']);
      } finally {
        for (const trx of transactions) if (!trx.isCompleted()) await trx.rollback();
        await writer.destroy();
        await database.destroy();
      }
    }, 30_000);

    test(`attack: ${WAITERS} POSTs waiting behind a long transaction cost the pool what one does, an honest request answers meanwhile, and all answer 204 once it ends`, async () => {
      const target = await startTestApp(engine, { collections: collections(), limits: { statementTimeoutMs: 20_000 } });
      // Every router's realtime sends its statements on this Knex's client, so the counter hears
      // the router the POSTs reach. The streams stay on the first one: each POST is handed over to
      // it once it has waited.
      const statements = countLockStatements(target.database.db);
      const streams: SseConnection[] = [];
      let sibling: SiblingRouter | undefined;
      let writer: Knex | undefined;
      let held: Knex.Transaction | undefined;
      try {
        const posting = await startSiblingRouter(target, { collections: collections(), limits: { statementTimeoutMs: 20_000 } });
        sibling = posting;
        writer = await openWriter(target.database.db, 1);
        const clients = await Promise.all(
          Array.from({ length: WAITERS }, async () => {
            const sse = await openSse(`${target.baseUrl}/backend/api/realtime`);
            streams.push(sse);
            return sse.clientId();
          }),
        );
        held = await beginTransaction(writer);
        const started = Date.now();
        const before = statements.count;
        let answered = 0;
        const posts = clients.map((clientId, i) =>
          posting.http
            .post('/backend/api/realtime')
            .send({ clientId, subscriptions: [`quiet${i}/*`] })
            .then((res) => {
              answered++;
              return res.status;
            }),
        );
        await new Promise((resolve) => setTimeout(resolve, 500));
        expect(answered).toBe(0);

        // An honest client meanwhile: its create and view answer while the held transaction still runs.
        let released = false;
        const fallback = setTimeout(() => {
          released = true;
          void held?.commit();
        }, 10_000);
        const created = await posting.http.post('/backend/api/collections/posts/records').send({ title: 'honest' });
        const viewed = await posting.http.get(`/backend/api/collections/posts/records/${created.body.id as string}`);
        clearTimeout(fallback);
        expect([created.status, viewed.status, released, answered]).toEqual([200, 200, false, 0]);

        await new Promise((resolve) => setTimeout(resolve, 1_000));
        expect(answered).toBe(0);
        await held.commit();
        expect(await Promise.all(posts)).toEqual(Array(WAITERS).fill(204));
        const elapsed = Date.now() - started;
        const counted = statements.count - before;
        console.log(`switch-on waiter: ${WAITERS} waiting POSTs over ${elapsed} ms ran ${counted} pg_locks statements (one waiter alone: at most ${oneWaiterStatements(elapsed)})`);
        expect(counted).toBeLessThanOrEqual(oneWaiterStatements(elapsed) + 5);
      } finally {
        statements.stop();
        if (held && !held.isCompleted()) await held.rollback();
        await writer?.destroy();
        for (const sse of streams) sse.close();
        await sibling?.close();
        await target.close();
      }
    }, 60_000);
  }
});
