import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from '@jest/globals';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import supertest from 'supertest';
import { createFileTokens, loadFileTokenSecret } from '../../lib/auth/file-token.js';
import { openEmbeddedDatabase } from '../../lib/db/engine/open-embedded-database.js';
import { openSharedSetting } from '../../lib/db/schema/settings-store.js';
import { diskStorage } from '../../lib/files/disk-storage.js';
import { syncDatabaseSchema } from '../../lib/db/schema/sync-database-schema.js';
import { createRecordsRouter, type RecordsRouter } from '../../lib/index.js';
import { buildSchemaRegistry } from '../../lib/schema/collection-schema.js';
import { FILE_TOKEN_SECRET_SETTING, SETTINGS_TABLE } from '../../lib/db/shared-names.js';
import { fileCollections } from '../support/file-fixtures.js';
import { createMemoryLogger, TEST_IDENTITIES } from '../support/test-app.js';
import { openTestDatabase, testEngines, type TestDatabase } from '../support/test-database.js';

const ALICE = TEST_IDENTITIES['token-alice']!;

describe.each(testEngines())('the file-token secret kept in the database (%s)', (engine) => {
  let database: TestDatabase;
  let parent: string;
  let dataDir: string;

  beforeAll(async () => {
    database = await openTestDatabase(engine);
    await syncDatabaseSchema(database.db, []);
  }, 60_000);

  afterAll(async () => {
    await database?.destroy();
  });

  beforeEach(async () => {
    await database.db.delete().from(SETTINGS_TABLE); // every test starts as a fresh database would
    parent = await fs.mkdtemp(path.join(os.tmpdir(), 'rb-secret-'));
    dataDir = path.join(parent, 'data');
  });

  afterEach(async () => {
    await fs.rm(parent, { recursive: true, force: true });
  });

  const shared = () => openSharedSetting(database.db, FILE_TOKEN_SECRET_SETTING);
  const storedRows = async () => database.db.select('key', 'value').from(SETTINGS_TABLE);

  test('is generated once, stored in _recordbase_settings, and read back; no file is written', async () => {
    const first = await loadFileTokenSecret({ shared: shared(), dataDir });
    expect(first.toString('utf8')).toMatch(/^[0-9a-f]{64}$/);
    expect(await storedRows()).toEqual([{ key: 'file_token_secret', value: first.toString('utf8') }]);
    const second = await loadFileTokenSecret({ shared: shared(), dataDir });
    expect(second.equals(first)).toBe(true);
    await expect(fs.stat(dataDir)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  test('concurrent first loads agree on one secret', async () => {
    const results = await Promise.all(Array.from({ length: 8 }, () => loadFileTokenSecret({ shared: shared(), dataDir })));
    for (const result of results) expect(result.equals(results[0]!)).toBe(true);
    expect(await storedRows()).toHaveLength(1);
  });

  test('an explicit secret wins and nothing is stored', async () => {
    const secret = 's'.repeat(32);
    expect((await loadFileTokenSecret({ secret, shared: shared(), dataDir })).toString('utf8')).toBe(secret);
    expect(await storedRows()).toEqual([]);
  });

  test.each([[''], ['short'], ['x'.repeat(31)]])('an explicit secret shorter than 32 characters (%j) is a TypeError when the router is created', (secret) => {
    // The options are checked once, when resolved; loadFileTokenSecret takes the checked value.
    expect(() => createRecordsRouter({ collections: [], dataDir, fileTokenSecret: secret })).toThrow(TypeError);
    expect(() => createRecordsRouter({ collections: [], dataDir, fileTokenSecret: secret })).toThrow(/fileTokenSecret must be a string of at least 32 characters/);
  });

  test('the secret file of an earlier version is adopted when the database has none, then the database decides', async () => {
    const legacy = 'l'.repeat(64);
    await fs.mkdir(dataDir, { recursive: true });
    await fs.writeFile(path.join(dataDir, 'file-token.secret'), legacy + '\n');
    expect((await loadFileTokenSecret({ shared: shared(), dataDir })).toString('utf8')).toBe(legacy);
    expect(await storedRows()).toEqual([{ key: 'file_token_secret', value: legacy }]);
    // Another instance with another (or a broken) file still gets the database's secret.
    const otherDir = path.join(parent, 'other');
    await fs.mkdir(otherDir);
    await fs.writeFile(path.join(otherDir, 'file-token.secret'), '');
    expect((await loadFileTokenSecret({ shared: shared(), dataDir: otherDir })).toString('utf8')).toBe(legacy);
  });

  test('a corrupted secret file is reported, not silently replaced, while the database has no secret', async () => {
    await fs.mkdir(dataDir, { recursive: true });
    await fs.writeFile(path.join(dataDir, 'file-token.secret'), 'too short');
    await expect(loadFileTokenSecret({ shared: shared(), dataDir })).rejects.toThrow(/no usable secret/);
    expect(await storedRows()).toEqual([]);
  });

  test('a corrupted stored secret is reported', async () => {
    await database.db.insert({ key: FILE_TOKEN_SECRET_SETTING, value: 'short' }).into(SETTINGS_TABLE);
    await expect(loadFileTokenSecret({ shared: shared(), dataDir })).rejects.toThrow(/stored in the database is under 32 characters/);
  });

  test('keyInDataDir (the embedded engine the router opened): the key is made once in dataDir/file-token.key, owner-only, and a secret an earlier release stored in the database is deleted, never used', async () => {
    const earlier = 'e'.repeat(64);
    await shared().claim(earlier);
    const first = await loadFileTokenSecret({ shared: shared(), dataDir, keyInDataDir: true });
    expect(first.toString('utf8')).toMatch(/^[0-9a-f]{64}$/);
    expect(first.toString('utf8')).not.toBe(earlier);
    expect(await storedRows()).toEqual([]);
    const file = path.join(dataDir, 'file-token.key');
    expect((await fs.readFile(file, 'utf8')).trim()).toBe(first.toString('utf8'));
    expect((await fs.stat(file)).mode & 0o777).toBe(0o600);
    expect(await fs.readdir(dataDir)).toEqual(['file-token.key']); // nothing staged is left behind
    const again = await loadFileTokenSecret({ shared: shared(), dataDir, keyInDataDir: true });
    expect(again.equals(first)).toBe(true);
    // The legacy secret file is not adopted either: it went into the database, so into backups.
    const otherDir = path.join(parent, 'legacy');
    await fs.mkdir(otherDir);
    await fs.writeFile(path.join(otherDir, 'file-token.secret'), earlier);
    expect((await loadFileTokenSecret({ shared: shared(), dataDir: otherDir, keyInDataDir: true })).toString('utf8')).not.toBe(earlier);
    // An explicit secret still wins.
    expect((await loadFileTokenSecret({ secret: 's'.repeat(32), shared: shared(), dataDir, keyInDataDir: true })).toString('utf8')).toBe('s'.repeat(32));
  });

  test('keyInDataDir: a key file under 32 characters is reported, not replaced', async () => {
    await fs.mkdir(dataDir, { recursive: true });
    await fs.writeFile(path.join(dataDir, 'file-token.key'), 'short\n');
    await expect(loadFileTokenSecret({ shared: shared(), dataDir, keyInDataDir: true })).rejects.toThrow(/file-token\.key holds no usable secret/);
    expect(await fs.readFile(path.join(dataDir, 'file-token.key'), 'utf8')).toBe('short\n');
  });

  test('collection names that could collide with recordbase tables are refused', () => {
    for (const name of ['_recordbase_settings', '_rb_collections', '_rbx', '_recordbase']) {
      expect(() => buildSchemaRegistry([{ name, fields: [] }])).toThrow(/are reserved/);
    }
  });
});

describe('a router on the embedded engine it opens, without fileTokenSecret', () => {
  let parent: string;

  beforeAll(async () => {
    parent = await fs.mkdtemp(path.join(os.tmpdir(), 'rb-secret-embedded-'));
  });
  afterAll(async () => {
    await fs.rm(parent, { recursive: true, force: true });
  });

  async function start(dataDir: string): Promise<{ router: RecordsRouter; agent: supertest.Agent }> {
    const router = createRecordsRouter({ collections: fileCollections(), dataDir, auth: (token) => TEST_IDENTITIES[token] ?? null, logger: createMemoryLogger(), fileSweep: false, realtime: false, thumbnailWorkers: 1 });
    await router.ready;
    const app = express();
    app.use('/backend', router);
    return { router, agent: supertest.agent(app) };
  }

  test('keeps its key beside the database, not in it: a token survives a restart; another data dir has another key', async () => {
    const dataDir = path.join(parent, 'data');
    let { router, agent } = await start(dataDir);
    let url: string;
    let token: string;
    try {
      const created = await agent.post('/backend/api/collections/vault/records').set('Authorization', 'token-alice').field('owner', ALICE.id).attach('scan', Buffer.from('%PDF-1.4 scan'), { filename: 'scan.pdf', contentType: 'application/pdf' });
      expect(created.status).toBe(200);
      url = `/backend/api/files/vault/${created.body.id}/${created.body.scan}`;
      token = (await agent.post('/backend/api/files/token').set('Authorization', 'token-alice')).body.token as string;
      expect((await agent.get(`${url}?token=${encodeURIComponent(token)}`)).status).toBe(200);
      expect(await router.api.collection('vault').getFullList({ as: 'superuser' })).toHaveLength(1);
    } finally {
      await router.close();
    }
    const db = openEmbeddedDatabase(path.join(dataDir, 'db'));
    try {
      expect(await db.select('key').from(SETTINGS_TABLE)).toEqual([]);
    } finally {
      await db.destroy();
    }
    ({ router, agent } = await start(dataDir));
    try {
      expect((await agent.get(`${url}?token=${encodeURIComponent(token)}`)).status).toBe(200);
    } finally {
      await router.close();
    }
    const other = await start(path.join(parent, 'other'));
    try {
      const created = await other.router.api.collection('vault').create({ owner: ALICE.id, scan: { name: 'scan.pdf', data: Buffer.from('%PDF-1.4 other') } }, { as: ALICE });
      expect((await other.agent.get(`/backend/api/files/vault/${created.id as string}/${created.scan as string}?token=${encodeURIComponent(token)}`)).status).toBe(401);
    } finally {
      await other.router.close();
    }
  }, 120_000);
});

describe.each(testEngines())('two routers on one database without fileTokenSecret (%s)', (engine) => {
  let database: TestDatabase;
  let parent: string;
  const routers: RecordsRouter[] = [];
  let agents: supertest.Agent[];

  beforeAll(async () => {
    database = await openTestDatabase(engine);
    parent = await fs.mkdtemp(path.join(os.tmpdir(), 'rb-secret-routers-'));
    const storage = path.join(parent, 'storage');
    for (const name of ['one', 'two']) {
      routers.push(
        createRecordsRouter({
          collections: fileCollections(),
          database: database.db,
          dataDir: path.join(parent, name), // separate dataDirs: nothing shared but the database and storage
          storage: diskStorage({ root: storage, fsync: false }),
          auth: (token) => TEST_IDENTITIES[token] ?? null,
          logger: createMemoryLogger(),
          fileSweep: false,
          thumbnailWorkers: 1,
        }),
      );
    }
    await Promise.all(routers.map((router) => router.ready));
    agents = routers.map((router) => {
      const app = express();
      app.use('/backend', router);
      return supertest.agent(app);
    });
  }, 120_000);

  afterAll(async () => {
    await Promise.all(routers.map((router) => router.close()));
    await database?.destroy();
    await fs.rm(parent, { recursive: true, force: true });
  });

  test('a file token issued by one opens a protected file through the other', async () => {
    const created = await agents[0]!
      .post('/backend/api/collections/vault/records')
      .set('Authorization', 'token-alice')
      .field('owner', ALICE.id)
      .attach('scan', Buffer.from('%PDF-1.4 scan'), { filename: 'scan.pdf', contentType: 'application/pdf' });
    expect(created.status).toBe(200);
    const url = `/backend/api/files/vault/${created.body.id}/${created.body.scan}`;
    const issued = await agents[0]!.post('/backend/api/files/token').set('Authorization', 'token-alice');
    expect(issued.status).toBe(200);
    const token = encodeURIComponent(issued.body.token as string);
    expect((await agents[1]!.get(`${url}?token=${token}`)).status).toBe(200);
    expect((await agents[0]!.get(`${url}?token=${token}`)).status).toBe(200);
    // A token signed with any other secret is refused by both.
    const forged = encodeURIComponent(createFileTokens({ secret: 'f'.repeat(64) }).sign(ALICE, { scope: 'all' }));
    expect((await agents[1]!.get(`${url}?token=${forged}`)).status).toBe(401);
  });
});
