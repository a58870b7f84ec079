/**
 * Record statements read a timestamptz in UTC straight from Postgres's text (run-statement.ts);
 * any other text (a session in another time zone) is parsed as before. Both must give the same
 * record dates: these tests read the same rows through sessions in UTC and in +05:30 and -03:00,
 * and rows whose stored fraction Postgres prints with none, one or three digits.
 */
import { randomBytes } from 'node:crypto';
import express from 'express';
import knexFactory, { type Knex } from 'knex';
import supertest from 'supertest';
import { createRecordsRouter, type RecordsRouter } from '../../lib/index.js';

const collections = [{ name: 'events', fields: [{ name: 'at', type: 'date' as const }], rules: { list: '', view: '', create: '' } }];
const schema = `rbtest_dates_${randomBytes(5).toString('hex')}`;
const url = process.env.RB_TEST_POSTGRES!;
const opened: { db: Knex; router: RecordsRouter }[] = [];

async function openApp(timeZone: string) {
  const db = knexFactory({
    client: 'pg',
    connection: url,
    searchPath: [schema],
    pool: { min: 0, max: 2, afterCreate: (conn: { query(sql: string, cb: (err: Error | null) => void): void }, done: (err: Error | null, conn: unknown) => void) => conn.query(`SET TIME ZONE '${timeZone}'`, (err) => done(err, conn)) },
  });
  const router = createRecordsRouter({ collections, database: db, realtime: false, fileSweep: false, fileTokenSecret: 'date-text-test-secret-0123456789abcdef', dataDir: `${process.env.TMPDIR ?? '/tmp'}/rb-date-text-${process.pid}` });
  await router.ready;
  opened.push({ db, router });
  const app = express();
  app.use(router);
  return supertest(app);
}

beforeAll(async () => {
  const admin = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: 1 } });
  await admin.raw(`CREATE SCHEMA "${schema}"`);
  await admin.destroy();
});

afterAll(async () => {
  for (const { router, db } of opened) {
    await router.close();
    await db.raw(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await db.destroy();
  }
});

test('dates read the same in a UTC session and in sessions at +05:30 and -03:00', async () => {
  const utc = await openApp('UTC');
  const values = ['2024-02-29 23:59:59.123Z', '0001-01-01 00:00:00.000Z', '9999-12-31 23:59:59.999Z', '1999-12-31 18:30:00.000Z', '2024-06-01 00:00:00.500Z'];
  for (const at of values) expect((await utc.post('/api/collections/events/records').send({ at })).status).toBe(200);
  const read = async (http: ReturnType<typeof supertest>) => {
    const res = await http.get('/api/collections/events/records?perPage=50&sort=at');
    expect(res.status).toBe(200);
    return res.body.items.map((item: { at: string; created: string; updated: string; id: string }) => item);
  };
  const fromUtc = await read(utc);
  expect(fromUtc.map((item: { at: string }) => item.at)).toEqual([...values].sort());
  for (const item of fromUtc) expect(item.created).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}Z$/);
  expect(await read(await openApp('Asia/Kolkata'))).toEqual(fromUtc);
  expect(await read(await openApp('America/Sao_Paulo'))).toEqual(fromUtc);
});

test('stored fractions of any length Postgres prints (none, one, three digits) read as milliseconds', async () => {
  const utc = await openApp('UTC');
  const kolkata = await openApp('Asia/Kolkata');
  const created = await utc.post('/api/collections/events/records').send({ at: '2030-01-01 00:00:00.000Z' });
  const db = opened[0]!.db;
  for (const [stored, expected] of [
    ['2030-01-02 03:04:05.5+00', '2030-01-02 03:04:05.500Z'],
    ['2030-01-02 03:04:05+00', '2030-01-02 03:04:05.000Z'],
    ['2030-01-02 03:04:05.678+00', '2030-01-02 03:04:05.678Z'],
    // The column keeps milliseconds: Postgres rounds what is finer when it stores it.
    ['2030-01-02 03:04:05.6789+00', '2030-01-02 03:04:05.679Z'],
  ]) {
    await db.raw(`UPDATE "events" SET "at" = ?::timestamptz WHERE "id" = ?`, [stored, created.body.id]);
    expect((await utc.get(`/api/collections/events/records/${created.body.id}`)).body.at).toBe(expected);
    expect((await kolkata.get(`/api/collections/events/records/${created.body.id}`)).body.at).toBe(expected);
  }
});
