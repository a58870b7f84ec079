import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import express from 'express';
import supertest from 'supertest';
import { createAppServer, fileFromPath, RecordbaseError, ValidationError, type CollectionDefinition, type Identity } from '../../lib/index.js';
import { listFilesUnder } from '../support/file-fixtures.js';
import { startTestApp, TEST_IDENTITIES, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/**
 * Finding 8 of issue 29: the server API never reads a server path from a value JSON can produce.
 * A host route that forwards a request body into `create({ ...req.body, owner }, { as })` (the
 * pattern `as` exists for) must not let a client name a file on the server's disk.
 */

const alice = TEST_IDENTITIES['token-alice']!;
const COLLECTION_ID = 'pbc_memos000001';

function collections(): CollectionDefinition[] {
  return [
    {
      name: 'memos',
      id: COLLECTION_ID,
      fields: [
        { name: 'title', type: 'text' },
        { name: 'owner', type: 'text' },
        { name: 'cover', type: 'file', maxSelect: 1 },
        { name: 'docs', type: 'file', maxSelect: 4 },
      ],
      rules: { list: '', view: '', create: '@request.auth.id != ""', update: 'owner = @request.auth.id', delete: null },
    },
  ];
}

/** A host's own routes, as docs/server-api.md shows them: the body forwarded, the owner set by the host. */
async function startForwardingHost(app: TestApp): Promise<{ http: supertest.Agent; close(): Promise<void> }> {
  const host = express();
  const identityOf = (req: express.Request): Identity | null => TEST_IDENTITIES[req.get('authorization') ?? ''] ?? null;
  const answer = (res: express.Response, err: unknown) => {
    if (!(err instanceof RecordbaseError)) throw err;
    res.status(err.status).json({ status: err.status, message: err.message, data: err.data });
  };
  host.post('/memos', express.json(), async (req, res) => {
    const user = identityOf(req);
    try {
      res.json(await app.router.api.collection('memos').create({ ...req.body, owner: user?.id ?? '' }, { as: user }));
    } catch (err) {
      answer(res, err);
    }
  });
  host.patch('/memos/:id', express.json(), async (req, res) => {
    try {
      res.json(await app.router.api.collection('memos').update(req.params.id, { ...req.body }, { as: identityOf(req) }));
    } catch (err) {
      answer(res, err);
    }
  });
  const server: Server = createAppServer(host);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    http: supertest.agent(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe.each(testEngines())('server API file inputs on %s', (engine) => {
  let app: TestApp;
  let host: Awaited<ReturnType<typeof startForwardingHost>>;
  /** A directory outside the router's dataDir, holding a "server file" a client must never read. */
  let outside: string;
  let secretPath: string;
  const secret = `server secret ${randomBytes(8).toString('hex')}`;

  beforeAll(async () => {
    app = await startTestApp(engine, { collections: collections() });
    host = await startForwardingHost(app);
    outside = mkdtempSync(path.join(os.tmpdir(), 'rb-outside-'));
    secretPath = path.join(outside, 'secret.txt');
    writeFileSync(secretPath, secret);
  });
  afterAll(async () => {
    await host?.close();
    await app?.close();
    rmSync(outside, { recursive: true, force: true });
  });

  const storage = () => path.join(app.dataDir, 'storage');
  /** Every stored file whose bytes are the secret's: none may ever be. */
  const storedSecrets = () => listFilesUnder(storage()).filter((file) => readFileSync(path.join(storage(), file)).toString().includes(secret));
  const memoCount = async () => Number((await app.database.db('memos').count({ n: '*' }).first())!.n);

  describe('a forwarded JSON body never names a server path', () => {
    test.each([
      ['a single file field', () => ({ title: 'attack', cover: { name: 'x.txt', data: secretPath } })],
      ['an item of a multi-file field', () => ({ title: 'attack', docs: ['kept.txt', { name: 'x.txt', data: secretPath }] })],
      ['an append modifier', () => ({ title: 'attack', 'docs+': { name: 'x.txt', data: secretPath } })],
      ['a relative path', () => ({ title: 'attack', cover: { name: 'x.txt', data: path.relative(process.cwd(), secretPath) } })],
      ['what JSON makes of fileFromPath', () => ({ title: 'attack', cover: JSON.parse(JSON.stringify(fileFromPath(secretPath))) as unknown })],
    ])('create through %s: a 422 on that field, as the records API answers the same body; nothing stored', async (_label, body) => {
      const before = { rows: await memoCount(), files: listFilesUnder(storage()) };
      const res = await host.http.post('/memos').set('Authorization', 'token-alice').send(body());
      expect(res.status).toBe(422);
      const field = Object.keys(body()).find((key) => key !== 'title')!.replace('+', '');
      expect(res.body.data[field]).toEqual({ code: 'validation_invalid_value', message: expect.stringContaining('never a string') });
      // the same body sent to the records API itself is refused the same way
      const direct = await app.http.post(`/backend/api/collections/memos/records`).set('Authorization', 'token-alice').send(body());
      expect(direct.status).toBe(422);
      expect(direct.body.data[field].code).toBe(res.body.data[field].code);

      expect(await memoCount()).toBe(before.rows);
      expect(listFilesUnder(storage())).toEqual(before.files);
      expect(storedSecrets()).toEqual([]);
    });

    test('an update that forwards the body cannot attach a server file either', async () => {
      const memo = await app.router.api.collection('memos').create({ title: 'mine', owner: alice.id }, { as: alice });
      const res = await host.http.patch(`/memos/${memo.id}`).set('Authorization', 'token-alice').send({ cover: { name: 'x.txt', data: secretPath } });
      expect(res.status).toBe(422);
      expect(res.body.data.cover.code).toBe('validation_invalid_value');
      expect((await app.database.db('memos').where({ id: memo.id }).first()).cover).toBe('');
      expect(storedSecrets()).toEqual([]);
    });

    test('what JSON.stringify makes of a Buffer is not taken as bytes: JSON never uploads a file', async () => {
      const before = await memoCount();
      const res = await host.http
        .post('/memos')
        .set('Authorization', 'token-alice')
        .send({ title: 'buffer json', cover: { name: 'x.txt', data: JSON.parse(JSON.stringify(Buffer.from(secret))) as unknown } });
      expect(res.status).toBe(422);
      expect(res.body.data.cover.code).toBe('validation_invalid_value');
      expect(await memoCount()).toBe(before);
      expect(storedSecrets()).toEqual([]);
    });
  });

  describe('the file inputs the host gives', () => {
    const download = (memo: { id: string }, name: string) =>
      app.http
        .get(`/backend/api/files/${COLLECTION_ID}/${memo.id}/${name}`)
        .buffer(true)
        .parse((res, done) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => done(null, Buffer.concat(chunks)));
        });

    test('fileFromPath: the bytes are stored and downloadable, named after the path unless a name is given', async () => {
      const file = path.join(outside, 'report.txt');
      writeFileSync(file, 'read from the host\'s own path');
      const memo = await app.router.api.collection('memos').create({ title: 'from disk', cover: fileFromPath(file), docs: [fileFromPath(file, 'renamed.txt')] }, { as: alice });
      expect(memo.cover).toMatch(/^report_[a-z0-9]{10}\.txt$/);
      expect(memo.docs).toEqual([expect.stringMatching(/^renamed_[a-z0-9]{10}\.txt$/)]);
      for (const name of [memo.cover as string, (memo.docs as string[])[0]!]) {
        const res = await download(memo, name);
        expect(res.status).toBe(200);
        expect(res.headers['content-type']).toMatch(/^text\/plain/);
        expect((res.body as Buffer).toString()).toBe("read from the host's own path");
      }
    });

    test('a Buffer, a Uint8Array view and a Readable are stored and downloadable', async () => {
      const backing = new TextEncoder().encode('xxa viewyy');
      const memo = await app.router.api.collection('memos').create(
        {
          title: 'bytes',
          docs: [
            { name: 'buffer.txt', data: Buffer.from('a buffer') },
            { name: 'view.txt', data: backing.subarray(2, 8) },
            { name: 'stream.txt', data: Readable.from([Buffer.from('a '), Buffer.from('stream')]) },
          ],
        },
        { as: alice },
      );
      const bodies = [];
      for (const name of memo.docs as string[]) {
        const res = await download(memo, name);
        expect(res.status).toBe(200);
        bodies.push((res.body as Buffer).toString());
      }
      expect(bodies).toEqual(['a buffer', 'a view', 'a stream']);
    });

    test('a string data from the host\'s own code is the same ValidationError, with a message that names the forms; nothing is read', async () => {
      const before = await memoCount();
      const err = await app.router.api
        .collection('memos')
        .create({ title: 'old style', cover: { name: 'x.txt', data: secretPath } }, { as: 'superuser' })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ValidationError);
      expect((err as ValidationError).data.cover).toEqual({ code: 'validation_invalid_value', message: expect.stringContaining('fileFromPath') });
      expect(await memoCount()).toBe(before);
      expect(storedSecrets()).toEqual([]);
    });

    test('the rules still come first: a guest forwarding a path is refused by the create rule (403)', async () => {
      const res = await host.http.post('/memos').send({ title: 'guest', cover: { name: 'x.txt', data: secretPath } });
      expect(res.status).toBe(403);
      expect(storedSecrets()).toEqual([]);
    });

    test('fileFromPath refuses what is not a path at once, and a directory when the write runs; its result cannot be changed', async () => {
      expect(() => fileFromPath('')).toThrow(TypeError);
      expect(() => fileFromPath(42 as unknown as string)).toThrow(/path must be a non-empty string/);
      expect(() => fileFromPath(secretPath, 7 as unknown as string)).toThrow(/name must be a string/);
      const input = fileFromPath(secretPath);
      expect(Object.isFrozen(input)).toBe(true);
      expect(input).toMatchObject({ name: 'secret.txt', path: secretPath });

      const folder = path.join(outside, 'a-folder');
      mkdirSync(folder, { recursive: true });
      const before = await memoCount();
      await expect(app.router.api.collection('memos').create({ title: 'folder', cover: fileFromPath(folder) }, { as: alice })).rejects.toThrow(/is not a file/);
      expect(await memoCount()).toBe(before);
    });
  });
});
