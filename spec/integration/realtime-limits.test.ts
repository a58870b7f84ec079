import http from 'node:http';
import knexFactory from 'knex';
import type { CollectionDefinition } from '../../lib/index.js';
import { CLIENTS_TABLE } from '../../lib/db/shared-names.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { startSiblingRouter, startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines, testKnexLog } from '../support/test-database.js';

/**
 * Issue 29 finding 9: one guest must not take every realtime slot. Streams are bounded per client
 * address at the GET (per instance) and per identity at the POST (across instances).
 */

/** The base URL of a supertest agent made for a URL (SiblingRouter exposes only its agent); nothing is sent. */
function agentUrl(agent: TestApp['http']): string {
  return new URL(agent.get('/').url).origin;
}

function collections(): CollectionDefinition[] {
  return [{ name: 'posts', fields: [{ name: 'title', type: 'text' }], rules: OPEN_RULES }];
}

/** A raw `GET /api/realtime` from `localAddress`: its status, and its clientId or error body. */
interface RawStream {
  status: number;
  clientId?: string;
  body?: { status: number; message: string; data: object };
  ended: Promise<void>;
  close(): void;
}

/** Opens a stream from a chosen loopback address (the server sees it as `req.ip`); resolves at PB_CONNECT or with the error body. */
function openStreamFrom(baseUrl: string, localAddress: string): Promise<RawStream> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${baseUrl}/backend/api/realtime`, { localAddress, headers: { Accept: 'text/event-stream' } }, (res) => {
      let text = '';
      const ended = new Promise<void>((done) => res.on('close', () => done()));
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
        const id = /^id:([A-Za-z0-9]{40})\n/.exec(text);
        if (res.statusCode === 200 && id) resolve({ status: 200, clientId: id[1], ended, close: () => req.destroy() });
      });
      res.on('end', () => {
        if (res.statusCode !== 200) resolve({ status: res.statusCode ?? 0, body: JSON.parse(text), ended, close: () => req.destroy() });
      });
    });
    req.on('error', reject);
  });
}

/**
 * Runs `work` while another connection holds the registry's clients table against row locks, until
 * at least 3 of work's transactions wait for it (or 5 s pass), then lets them all go at once.
 */
async function releasedTogether<T>(app: TestApp, work: () => Promise<T>): Promise<T> {
  const schema = ((await app.database.db.raw('SELECT current_schema() AS s')) as { rows: { s: string }[] }).rows[0]!.s;
  const locker = knexFactory({ client: 'pg', connection: process.env.RB_TEST_POSTGRES!, searchPath: [schema], pool: { min: 0, max: 2 }, log: testKnexLog });
  try {
    const trx = await locker.transaction();
    await trx.raw(`LOCK TABLE "${CLIENTS_TABLE}" IN EXCLUSIVE MODE`);
    const result = work();
    const waiting = async () =>
      ((await locker.raw(`SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND relation = to_regclass(?)`, [`"${schema}"."${CLIENTS_TABLE}"`])) as { rows: { n: number }[] }).rows[0]!.n;
    for (let i = 0; i < 100 && (await waiting()) < 3; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await waiting()).toBeGreaterThanOrEqual(3);
    await trx.commit();
    return await result;
  } finally {
    await locker.destroy();
  }
}

describe.each(testEngines())('realtime streams per address and per identity on %s', (engine) => {
  const open: RawStream[] = [];
  let app: TestApp | undefined;
  afterEach(async () => {
    for (const s of open.splice(0)) s.close();
    await app?.router.close();
    await app?.close();
    app = undefined;
  });
  const track = (s: RawStream) => (open.push(s), s);
  const post = (target: TestApp | { http: TestApp['http'] }, clientId: string, token?: string) => {
    const req = target.http.post('/backend/api/realtime');
    if (token) req.set('Authorization', token);
    return req.send({ clientId, subscriptions: ['posts/*'] });
  };

  test('one guest address holds at most maxClientsPerAddress streams (429); another address still gets its stream and its 204; a closed stream frees its slot', async () => {
    app = await startTestApp(engine, { collections: collections(), realtime: { maxClients: 20, maxClientsPerAddress: 5 } });
    const guest: RawStream[] = [];
    for (let i = 0; i < 5; i++) {
      const s = track(await openStreamFrom(app.baseUrl, '127.0.0.1'));
      expect(s.status).toBe(200);
      guest.push(s);
    }
    const sixth = track(await openStreamFrom(app.baseUrl, '127.0.0.1'));
    expect(sixth.status).toBe(429);
    expect(sixth.body).toEqual({ status: 429, message: expect.stringContaining('maxClientsPerAddress'), data: {} });

    const user = track(await openStreamFrom(app.baseUrl, '127.0.0.2'));
    expect(user.status).toBe(200);
    expect((await post(app, user.clientId!, 'token-alice')).status).toBe(204);

    guest[0]!.close();
    await guest[0]!.ended;
    // The server hears the close a moment later: the slot comes back within a few attempts.
    let again: RawStream | undefined;
    for (let i = 0; i < 100 && again?.status !== 200; i++) {
      if (i > 0) await new Promise((resolve) => setTimeout(resolve, 20));
      again = track(await openStreamFrom(app.baseUrl, '127.0.0.1'));
    }
    expect(again!.status).toBe(200);
    expect(track(await openStreamFrom(app.baseUrl, '127.0.0.1')).status).toBe(429);
  });

  test('one identity holds at most maxClientsPerIdentity clients, counted across routers; guest to signed-in counts; a client already counted may POST again', async () => {
    app = await startTestApp(engine, { collections: collections(), realtime: { maxClientsPerIdentity: 2 } });
    const sibling = await startSiblingRouter(app, { collections: collections(), realtime: { maxClientsPerIdentity: 2 } });
    try {
      const siblingUrl = agentUrl(sibling.http);
      const onApp = track(await openStreamFrom(app.baseUrl, '127.0.0.1'));
      const onSibling = track(await openStreamFrom(siblingUrl, '127.0.0.1'));
      const third = track(await openStreamFrom(app.baseUrl, '127.0.0.1'));
      expect((await post(app, onApp.clientId!, 'token-alice')).status).toBe(204);
      // Guest first, then signed in: the second POST takes the identity's second slot.
      expect((await post(sibling, onSibling.clientId!)).status).toBe(204);
      expect((await post(app, onSibling.clientId!, 'token-alice')).status).toBe(204);
      const refused = await post(sibling, third.clientId!, 'token-alice');
      expect(refused.status).toBe(429);
      expect(refused.body).toEqual({ status: 429, message: expect.stringContaining('maxClientsPerIdentity'), data: {} });
      // The refused client is untouched: still a guest, and another identity is fine.
      expect((await post(app, third.clientId!, 'token-bob')).status).toBe(204);
      // A client already counted may change its subscriptions.
      expect((await post(sibling, onApp.clientId!, 'token-alice')).status).toBe(204);

      onApp.close();
      let status = 0;
      const fourth = track(await openStreamFrom(siblingUrl, '127.0.0.1'));
      for (let i = 0; i < 100 && status !== 204; i++) {
        if (i > 0) await new Promise((resolve) => setTimeout(resolve, 20));
        status = (await post(app, fourth.clientId!, 'token-alice')).status;
      }
      expect(status).toBe(204);
    } finally {
      // The sibling's server waits for its open streams to close before it does.
      for (const s of open.splice(0)) s.close();
      await sibling.close();
    }
  });

  test('concurrent POSTs of one identity for 8 clients: exactly maxClientsPerIdentity are accepted', async () => {
    app = await startTestApp(engine, { collections: collections(), realtime: { maxClientsPerIdentity: 2 } });
    const sibling = await startSiblingRouter(app, { collections: collections(), realtime: { maxClientsPerIdentity: 2 } });
    try {
      const siblingUrl = agentUrl(sibling.http);
      const streams: RawStream[] = [];
      for (let i = 0; i < 8; i++) streams.push(track(await openStreamFrom(i % 2 === 0 ? app.baseUrl : siblingUrl, '127.0.0.1')));
      const posting = () => Promise.all(streams.map((s, i) => post(i % 2 === 0 ? sibling : app!, s.clientId!, 'token-bob')));
      // On Postgres the POSTs' transactions are held at their first statement and let go together, so they truly overlap.
      const answers = engine === 'postgres' ? await releasedTogether(app, posting) : await posting();
      const statuses = answers.map((a) => a.status).sort();
      expect(statuses).toEqual([204, 204, 429, 429, 429, 429, 429, 429]);
    } finally {
      // The sibling's server waits for its open streams to close before it does.
      for (const s of open.splice(0)) s.close();
      await sibling.close();
    }
  });

  if (engine === 'postgres') {
    test('a GET that fails half-way (its registry row could not be written) gives its address slot back', async () => {
      app = await startTestApp(engine, { collections: collections(), realtime: { maxClientsPerAddress: 3 }, limits: { statementTimeoutMs: 300 } });
      const schema = ((await app.database.db.raw('SELECT current_schema() AS s')) as { rows: { s: string }[] }).rows[0]!.s;
      const locker = knexFactory({ client: 'pg', connection: process.env.RB_TEST_POSTGRES!, searchPath: [schema], pool: { min: 0, max: 1 }, log: testKnexLog });
      try {
        await locker.transaction(async (trx) => {
          await trx.raw(`LOCK TABLE "${CLIENTS_TABLE}" IN ACCESS EXCLUSIVE MODE`);
          for (let i = 0; i < 5; i++) {
            const failed = track(await openStreamFrom(app!.baseUrl, '127.0.0.1'));
            expect(failed.status).toBe(400);
          }
        });
      } finally {
        await locker.destroy();
      }
      for (let i = 0; i < 3; i++) expect(track(await openStreamFrom(app.baseUrl, '127.0.0.1')).status).toBe(200);
      expect(track(await openStreamFrom(app.baseUrl, '127.0.0.1')).status).toBe(429);
    });
  }
});
