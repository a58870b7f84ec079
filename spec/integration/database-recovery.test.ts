import type { Server } from 'node:http';
import express from 'express';
import knexFactory, { type Knex } from 'knex';
import supertest from 'supertest';
import { createRecordsRouter, type RecordsRouter } from '../../lib/index.js';
import { createMemoryLogger } from '../support/test-app.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/throwaway-postgres.js';

// This suite stops and restarts a database, so it runs its own throwaway server, never :5432.
describe('a Postgres restart under a running router', () => {
  let pg: ThrowawayPostgres;
  let db: Knex;
  let router: RecordsRouter;
  let server: Server;
  let http: supertest.Agent;

  beforeAll(async () => {
    pg = await startThrowawayPostgres();
    db = knexFactory({ client: 'pg', connection: pg.url, pool: { min: 0, max: 4 }, acquireConnectionTimeout: 3000 });
    router = createRecordsRouter({
      collections: [{ name: 'notes', fields: [{ name: 'text', type: 'text' }], rules: { list: '', view: '', create: '', update: '' } }],
      database: db,
      logger: createMemoryLogger(),
    });
    await router.ready;
    const app = express();
    app.use('/backend', router);
    server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    http = supertest.agent(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
  }, 60_000);

  afterAll(async () => {
    server?.close();
    await router?.close();
    await db?.destroy();
    await pg?.destroy();
  }, 60_000);

  test('requests fail with 503 while it is down and succeed again once it is back, without a crash', async () => {
    const created = await http.post('/backend/api/collections/notes/records').send({ text: 'before' });
    expect(created.status).toBe(200);
    // warm several pooled connections, so the pool holds sockets that the restart kills
    await Promise.all(Array.from({ length: 4 }, () => http.get('/backend/api/collections/notes/records')));

    await pg.stop();
    for (const res of [
      await http.get('/backend/api/collections/notes/records'),
      await http.post('/backend/api/collections/notes/records').send({ text: 'while down' }),
      await http.patch(`/backend/api/collections/notes/records/${created.body.id}`).send({ text: 'while down' }),
    ]) {
      expect(res.status).toBe(503);
      expect(res.body).toEqual({ status: 503, message: 'The database is unavailable. Try again later.', data: {} });
    }

    await pg.start();
    let status = 0;
    for (let attempt = 0; attempt < 50 && status !== 200; attempt++) {
      status = (await http.get('/backend/api/collections/notes/records')).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 200));
    }
    expect(status).toBe(200);
    const list = await http.get('/backend/api/collections/notes/records');
    expect(list.body.items.map((r: { text: string }) => r.text)).toEqual(['before']);
    const after = await http.post('/backend/api/collections/notes/records').send({ text: 'after' });
    expect(after.status).toBe(200);
  }, 60_000);
});
