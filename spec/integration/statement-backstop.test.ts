import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { CollectionDefinition } from '../../lib/index.js';
import { OPEN_RULES } from '../support/open-rules.js';
import express from 'express';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import supertest from 'supertest';
import { createRecordsRouter } from '../../lib/index.js';
import { createMemoryLogger, startSiblingRouter, startTestApp, type SiblingRouter, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/**
 * A statement recordbase gave up on must not go on running on the server, and what one request
 * may cost the database is one statement timeout (issue 41, finding 1), on both engines:
 * - a filter of a few characters that Postgres would plan for minutes (calendar modifiers nested
 *   in strftime) answers at once, and leaves no backend behind;
 * - a request's statements share one budget: a list and its count together end within one
 *   statement timeout, although each alone stays under it;
 * - a transaction carries the server's own statement_timeout (the backstop that needs no cancel),
 *   which ends with it.
 */

const api = (path: string) => `/backend/api/collections/${path}`;

function backstopCollections(): CollectionDefinition[] {
  return [
    { name: 'backstop_posts', fields: [{ name: 'title', type: 'text' }], rules: OPEN_RULES },
    {
      name: 'backstop_slow',
      type: 'view',
      // Each statement over this view (the list, then its count) sleeps 0.6 s once.
      viewQuery: 'SELECT p.id, p.title FROM backstop_posts AS p CROSS JOIN LATERAL (SELECT pg_sleep(0.6)) AS s',
      rules: { list: '', view: '' },
    },
  ];
}

describe.each(testEngines())('statements recordbase gave up on on %s', (engine) => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp(engine, { collections: backstopCollections(), realtime: false });
    for (const title of ['a', 'b', 'c', 'd']) expect((await app.http.post(api('backstop_posts/records')).send({ title })).status).toBe(200);
  });
  afterAll(async () => {
    await app?.close();
  });

  /** Backends of the shared server running a statement over `table` (Postgres only: PGlite has one session). */
  async function activeStatementsOn(table: string): Promise<number> {
    if (engine !== 'postgres') return 0;
    const { rows } = await app.database.db.raw(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() AND query LIKE ?`, [`%${table}%`]);
    return rows[0].n;
  }

  test('calendar modifiers nested eight deep answer at once (they planned in exponential time) and leave no backend running', async () => {
    const modifiers = ["'start of day'", "'+1 months'", "'weekday 1'", "'start of month'", "'-3 years'", "'+0001-02-03 04:05'", "'start of year'", "'start of day'"];
    const filters = [
      `strftime('%Y', created, ${modifiers.map(() => "'start of day'").join(', ')}) = '1'`,
      `strftime('%Y%m%d%H%M%S%j%J%W%U%s', created, ${modifiers.join(', ')}) = '1'`,
      `strftime('%Y%J%W', title, 'auto', ${modifiers.slice(1).join(', ')}) = '1'`,
    ];
    for (const filter of filters) {
      const started = Date.now();
      const res = await app.http.get(api('backstop_posts/records')).query({ filter, skipTotal: '1' });
      // Before the fix: 6 'start of day' took 7 s and a 503 on Postgres, with the backend planning on for a minute.
      expect({ status: res.status, items: res.body.items }).toEqual({ status: 200, items: [] });
      expect(Date.now() - started).toBeLessThan(3_000);
    }
    expect(await activeStatementsOn('backstop_')).toBe(0);
  });

  /**
   * A router with a 1 s statement timeout on an engine that can stop a statement: Postgres (a
   * sibling on this database), or the embedded engine on disk (its own folder). The in-memory
   * engine of the other tests cannot stop one, so there each statement keeps the whole timeout.
   */
  async function startStoppingRouter(): Promise<SiblingRouter> {
    const options = { collections: backstopCollections(), realtime: false as const, limits: { statementTimeoutMs: 1_000 } };
    if (engine === 'postgres') return startSiblingRouter(app, options);
    const router = createRecordsRouter({ ...options, dataDir: mkdtempSync(path.join(os.tmpdir(), 'rb-budget-')), logger: createMemoryLogger(), fileSweep: false });
    const host = express();
    host.use('/backend', router);
    const server = host.listen(0, '127.0.0.1');
    await router.ready;
    const http = supertest.agent(server);
    for (const title of ['a', 'b', 'c', 'd']) expect((await http.post(api('backstop_posts/records')).send({ title })).status).toBe(200);
    return {
      http,
      async close() {
        server.close();
        await router.close();
      },
    };
  }

  test("a list and its count share one statement timeout: together over it is a 400, and nothing runs on", async () => {
    const sibling = await startStoppingRouter();
    try {
      // Alone, each statement (0.6 s) is under the 1 s timeout: without a total count the list answers.
      const alone = await sibling.http.get(api('backstop_slow/records')).query({ skipTotal: '1' });
      expect(alone.status).toBe(200);
      expect(alone.body.items).toHaveLength(4);
      // The list and its count: 1.2 s together, over the one second the request may cost.
      const started = Date.now();
      const both = await sibling.http.get(api('backstop_slow/records'));
      const elapsed = Date.now() - started;
      expect({ status: both.status, body: both.body }).toEqual({
        status: 400,
        body: { status: 400, message: expect.stringContaining('statement timeout'), data: {} },
      });
      // The count was stopped when the second ran out, not after its own full timeout.
      expect(elapsed).toBeLessThan(1_000 + 2_000);
      await waitFor(async () => (await activeStatementsOn('backstop_')) === 0, 3_000);
    } finally {
      await sibling.close();
    }
  });
});

async function waitFor(condition: () => Promise<boolean>, withinMs: number): Promise<void> {
  const until = Date.now() + withinMs;
  while (!(await condition())) {
    if (Date.now() > until) throw new Error(`still not so after ${withinMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
