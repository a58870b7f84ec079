import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import PocketBase, { ClientResponseError } from 'pocketbase';
import type { CollectionDefinition } from '../../lib/index.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';
import { ROOT } from '../support/query-fixtures.js';
import { openSse } from '../support/sse-reader.js';

/**
 * Issue 45, parity: PocketBase refuses an expression of only whitespace or comments ("empty filter
 * expression"); a filter of them is a 400, not every record. A rule of them stops the start
 * (spec/integration/rule-integrity.test.ts), since `// only owners` would let everyone in.
 */

const api = (path: string) => `/backend/api/collections/${path}`;
const collections: CollectionDefinition[] = [{ name: 'notes', fields: [{ name: 'text', type: 'text' }], rules: { list: '', view: '', create: '', update: '', delete: '' } }];
const BLANKS = ['// note', '   ', '\n// one\n  // two\n', '\t', '//'];

describe.each(testEngines())('a filter of only whitespace or comments (%s)', (engine) => {
  let app: TestApp;

  beforeAll(async () => {
    app = await startTestApp(engine, { collections });
    await app.router.api.collection('notes').create({ text: 'kept' }, { as: 'superuser' });
  }, 60_000);

  afterAll(async () => {
    await app?.close();
  });

  test.each(BLANKS)('%j answers 400 invalid_filter in the one error body, for a guest and a superuser', async (filter) => {
    for (const headers of [{}, ROOT]) {
      const res = await app.http.get(api('notes/records')).query({ filter }).set(headers);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ status: 400, message: 'Invalid filter: empty expression (only whitespace or comments); send no filter at all to match every record.', data: {} });
    }
  });

  test('no filter, or the empty string, still matches every record; a comment beside a condition is still a comment', async () => {
    for (const query of [{}, { filter: '' }, { filter: "text = 'kept' // the one" }]) {
      const res = await app.http.get(api('notes/records')).query(query);
      expect(res.status).toBe(200);
      expect(res.body.totalItems).toBe(1);
    }
  });

  test('a bulk delete with a comment for a filter deletes nothing', async () => {
    const res = await app.http.delete(api('notes/records')).query({ filter: '// everything' }).set(ROOT);
    expect(res.status).toBe(400);
    expect((await app.http.get(api('notes/records'))).body.totalItems).toBe(1);
  });

  test('a realtime subscription whose filter is only whitespace or comments is refused as the list refuses it; an empty one is no filter', async () => {
    const stream = await openSse(`${app.baseUrl}/backend/api/realtime`);
    try {
      const clientId = await stream.clientId();
      const topic = (filter: string) => `notes/*?options=${encodeURIComponent(JSON.stringify({ query: { filter } }))}`;
      for (const filter of BLANKS) {
        const res = await app.http.post('/backend/api/realtime').send({ clientId, subscriptions: [topic(filter)] });
        expect([res.status, res.body.message]).toEqual([400, expect.stringContaining('empty expression')]);
      }
      expect((await app.http.post('/backend/api/realtime').send({ clientId, subscriptions: [topic('')] })).status).toBe(204);
    } finally {
      stream.close();
    }
  });

  test('through the SDK: getList with a comment-only filter rejects with 400', async () => {
    const pb = new PocketBase(`${app.baseUrl}/backend`);
    const err = await pb.collection('notes').getList(1, 10, { filter: '// note' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ClientResponseError);
    expect((err as ClientResponseError).status).toBe(400);
    expect((err as ClientResponseError).response.message).toMatch(/empty expression/);
    expect((await pb.collection('notes').getList(1, 10, { filter: '' })).totalItems).toBe(1);
  });
});
