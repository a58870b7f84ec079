import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { PGlite } from '@electric-sql/pglite';
import { restoreBackup } from '../../lib/backups/restore-backup.js';
import { openEmbeddedDatabase, embeddedDatabaseDir } from '../../lib/db/engine/open-embedded-database.js';
import { openSharedSetting } from '../../lib/db/schema/settings-store.js';
import { FILE_TOKEN_SECRET_SETTING, SETTINGS_TABLE } from '../../lib/db/shared-names.js';
import { syncDatabaseSchema } from '../../lib/db/schema/sync-database-schema.js';
import { createRecordsRouter } from '../../lib/index.js';
import { fileCollections } from '../support/file-fixtures.js';
import { sdkOf, serveRouter, type ServedRouter } from '../support/served-router.js';
import { createMemoryLogger, TEST_FILE_TOKEN_SECRET, TEST_IDENTITIES } from '../support/test-app.js';
import { openTestDatabase, testEngines, type Engine, type TestDatabase } from '../support/test-database.js';

/**
 * Issue 41, finding 2: a file token, or a backup, must not become permanent access. A token
 * lives no longer than its lifetime whatever `exp` it carries; the dashboard's token (in `<img
 * src>` URLs) opens files, not backups; and the signing key cannot be read from a backup.
 */

const run = promisify(execFile);
const ROOT = TEST_IDENTITIES['token-root']!;
const ALICE = TEST_IDENTITIES['token-alice']!;
const TTL_SECONDS = 180;
const TEN_YEARS_SECONDS = 10 * 365 * 86_400;
const PDF = (text: string) => Buffer.from(`%PDF-1.4 ${text}`);

/**
 * The attacker's own signer. The token format is public (lib/auth/file-token.ts): version 2 is
 * what releases before issue 41 signed, version 3 (with a scope) what they sign now. Only the
 * key is secret.
 */
function forgeFileToken(secret: string, claims: { version: 2 | 3; sub: string; superuser: boolean; exp: number }): string {
  const body: Record<string, unknown> = { v: claims.version, exp: claims.exp, sub: claims.sub };
  if (claims.version === 3) body.scope = 'all';
  if (claims.superuser) body.su = true;
  const payload = Buffer.from(JSON.stringify(body), 'utf8').toString('base64url');
  const mac = createHmac('sha256', secret).update(`recordbase-file-token:v${claims.version}:${payload}`).digest('base64url');
  return `rbft.${payload}.${mac}`;
}

/** Every token an attacker holding `secret` would try: both formats, both identities, a 10-year and an ordinary expiry. */
function forgeEveryToken(secret: string): { label: string; token: string }[] {
  const now = Math.floor(Date.now() / 1000);
  const tokens: { label: string; token: string }[] = [];
  for (const version of [2, 3] as const) {
    for (const identity of [ROOT, ALICE]) {
      for (const [when, exp] of [['10 years', now + TEN_YEARS_SECONDS], ['170 s', now + TTL_SECONDS - 10]] as const) {
        tokens.push({ label: `v${version} ${identity.id} ${when}`, token: forgeFileToken(secret, { version, sub: identity.id, superuser: identity.superuser === true, exp }) });
      }
    }
  }
  return tokens;
}

/** On PGlite the router opens the embedded engine in `dataDir` itself, as by default (what a backup copies). */
function startApp(options: { engine: Engine; dataDir: string; database?: TestDatabase; fileTokenSecret?: string }): Promise<ServedRouter> {
  return serveRouter(
    createRecordsRouter({
      collections: fileCollections(),
      dataDir: options.dataDir,
      auth: (token) => TEST_IDENTITIES[token] ?? null,
      logger: createMemoryLogger(),
      fileSweep: false,
      realtime: false,
      thumbnailWorkers: 1,
      ...(options.fileTokenSecret !== undefined ? { fileTokenSecret: options.fileTokenSecret } : {}),
      ...(options.engine === 'postgres' ? { database: options.database!.db } : {}),
    }),
  );
}

/** Alice's protected scan, stored through the server API; its URL without a token. */
async function storeAliceScan(app: ServedRouter, text: string): Promise<string> {
  const record = await app.router.api.collection('vault').create({ owner: ALICE.id, scan: { name: 'scan.pdf', data: PDF(text) } }, { as: ALICE });
  return `${app.baseUrl}/api/files/vault/${record.id as string}/${record.scan as string}`;
}

/** A GET as a browser follows a URL: status, and the body as text (the error body, or the file). */
async function download(url: string, token?: string): Promise<{ status: number; body: string }> {
  const response = await fetch(token === undefined ? url : `${url}?token=${encodeURIComponent(token)}`);
  return { status: response.status, body: Buffer.from(await response.arrayBuffer()).toString('latin1') };
}

/** `POST /api/files/token` with a JSON body, as a caller other than the SDK (the dashboard) sends it. */
async function requestFileToken(app: ServedRouter, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${app.baseUrl}/api/files/token`, { method: 'POST', headers: { Authorization: 'token-root', 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const temporary: string[] = [];
async function tempDir(prefix: string): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
  temporary.push(dir);
  return dir;
}
afterAll(async () => {
  for (const dir of temporary) await fs.rm(dir, { recursive: true, force: true });
});

describe.each(testEngines())('file tokens on %s: no longer than their lifetime, and the dashboard\'s opens no backup', (engine) => {
  let database: TestDatabase | undefined;
  let app: ServedRouter;
  let scanUrl: string;
  let backupUrl: string;

  beforeAll(async () => {
    if (engine === 'postgres') database = await openTestDatabase('postgres');
    // The live secret is known here, so that tokens can be signed with it as an insider (or a leak) would.
    app = await startApp({ engine, dataDir: await tempDir('rb-token-attacks-'), database, fileTokenSecret: TEST_FILE_TOKEN_SECRET });
    scanUrl = await storeAliceScan(app, 'alice only');
    backupUrl = `${app.baseUrl}/api/backups/${(await app.router.backup({ name: 'held.tar.gz' })).key}`;
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await database?.destroy();
  });

  test('a token signed with the live secret whose exp lies beyond the lifetime is refused (401), whatever its format', async () => {
    const now = Math.floor(Date.now() / 1000);
    for (const version of [2, 3] as const) {
      for (const ahead of [TEN_YEARS_SECONDS, TTL_SECONDS + 60]) {
        const token = forgeFileToken(TEST_FILE_TOKEN_SECRET, { version, sub: ROOT.id, superuser: true, exp: now + ahead });
        for (const url of [scanUrl, backupUrl]) {
          const answer = await download(url, token);
          expect({ version, ahead, url, status: answer.status }).toEqual({ version, ahead, url, status: 401 });
          expect(JSON.parse(answer.body)).toEqual({ status: 401, message: expect.stringMatching(/file token/), data: {} });
        }
      }
      // The same signer within the lifetime (a few seconds of clock skew allowed) is accepted: the refusal above is the expiry's.
      const fair = forgeFileToken(TEST_FILE_TOKEN_SECRET, { version, sub: ROOT.id, superuser: true, exp: now + TTL_SECONDS + 2 });
      expect({ version, status: (await download(scanUrl, fair)).status }).toEqual({ version, status: 200 });
      expect({ version, status: (await download(backupUrl, fair)).status }).toEqual({ version, status: 200 });
    }
  }, 60_000);

  test('the dashboard\'s token (scope "files") opens a protected file but no backup: 403 in the error body', async () => {
    const issued = await requestFileToken(app, { scope: 'files' });
    expect(issued.status).toBe(200);
    const token = issued.body.token as string;
    expect(await download(scanUrl, token)).toEqual({ status: 200, body: PDF('alice only').toString('latin1') });
    const refused = await download(backupUrl, token);
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.body)).toEqual({ status: 403, message: expect.stringMatching(/protected files only/), data: {} });
    const head = await fetch(`${backupUrl}?token=${encodeURIComponent(token)}`, { method: 'HEAD' });
    expect(head.status).toBe(403);
    // The same request through the SDK, as docs/protected-files.md shows it for image URLs.
    const imageToken = await sdkOf(app, 'token-root').files.getToken({ body: { scope: 'files' } });
    expect((await download(scanUrl, imageToken)).status).toBe(200);
    expect((await download(backupUrl, imageToken)).status).toBe(403);
  }, 60_000);

  test('the SDK\'s token (no body: PocketBase\'s) downloads a backup, as pb.backups.getDownloadURL builds it, and opens protected files', async () => {
    const root = sdkOf(app, 'token-root');
    const token = await root.files.getToken();
    const archive = await fetch(root.backups.getDownloadURL(token, 'held.tar.gz'));
    expect(archive.status).toBe(200);
    expect(Buffer.from(await archive.arrayBuffer()).subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
    expect((await download(scanUrl, token)).status).toBe(200);
    const explicit = await requestFileToken(app, { scope: 'all' });
    expect(explicit.status).toBe(200);
    expect((await download(backupUrl, explicit.body.token as string)).status).toBe(200);
  }, 60_000);

  test('a scope the server does not know, or a body that is not JSON, is a 400 and no token', async () => {
    for (const scope of ['backups', 'FILES', '', 5, null, ['files']]) {
      const answer = await requestFileToken(app, { scope });
      expect({ scope, status: answer.status }).toEqual({ scope, status: 400 });
      expect(answer.body).toEqual({ status: 400, message: expect.stringMatching(/"scope"/), data: {} });
    }
    const malformed = await fetch(`${app.baseUrl}/api/files/token`, { method: 'POST', headers: { Authorization: 'token-root', 'Content-Type': 'application/json' }, body: '{"scope":' });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ status: 400, data: {} });
    // A guest is told to sign in first, whatever it asks for.
    const guest = await fetch(`${app.baseUrl}/api/files/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ scope: 'files' }) });
    expect(guest.status).toBe(401);
  }, 60_000);
});

describe('a backup of the embedded engine holds no key that signs file tokens, for the live instance or a restored one', () => {
  const OLD_SECRET = 'a1'.repeat(32);
  let dataDir: string;
  let app: ServedRouter;

  beforeAll(async () => {
    dataDir = path.join(await tempDir('rb-backup-leak-'), 'data');
    // A data dir an earlier release ran on: it kept its generated secret in the database (and so in every backup it made).
    const older = openEmbeddedDatabase(embeddedDatabaseDir(dataDir));
    try {
      await syncDatabaseSchema(older, []);
      await openSharedSetting(older, FILE_TOKEN_SECRET_SETTING).claim(OLD_SECRET);
    } finally {
      await older.destroy();
    }
    // No fileTokenSecret: the default, a generated secret.
    app = await startApp({ engine: 'pglite', dataDir });
  }, 120_000);
  afterAll(async () => {
    await app?.close();
  });

  /** What an attacker extracts from an archive: the settings row read with SQL, and every 64-hex string anywhere in the database's files (dead rows and the log included). */
  async function extractSecrets(archive: Buffer): Promise<{ rows: unknown[]; candidates: Set<string> }> {
    const folder = await tempDir('rb-attacker-');
    await fs.writeFile(path.join(folder, 'stolen.tar.gz'), archive);
    await run('tar', ['-xzf', 'stolen.tar.gz'], { cwd: folder });
    const candidates = new Set<string>();
    for (const entry of await fs.readdir(path.join(folder, 'db'), { recursive: true, withFileTypes: true })) {
      if (!entry.isFile()) continue;
      const text = (await fs.readFile(path.join(entry.parentPath, entry.name))).toString('latin1');
      for (const match of text.matchAll(/[0-9a-f]{64}/g)) candidates.add(match[0]);
    }
    const pg = new PGlite(path.join(folder, 'db'));
    try {
      const { rows } = await pg.query<{ value: string }>(`SELECT value FROM ${SETTINGS_TABLE} WHERE key = $1`, [FILE_TOKEN_SECRET_SETTING]);
      for (const row of rows) candidates.add(row.value);
      return { rows, candidates };
    } finally {
      await pg.close();
    }
  }

  test('the secret read from a stolen backup (and the one an earlier release kept) signs nothing the live or a restored instance accepts', async () => {
    const firstScan = await storeAliceScan(app, 'before the backup');
    // The backup, downloaded as the SDK does (and as the dashboard's token could before).
    const root = sdkOf(app, 'token-root');
    await root.backups.create('stolen.tar.gz');
    const stolen = await fetch(root.backups.getDownloadURL(await root.files.getToken(), 'stolen.tar.gz'));
    expect(stolen.status).toBe(200);
    const archive = Buffer.from(await stolen.arrayBuffer());

    const { rows, candidates } = await extractSecrets(archive);
    candidates.add(OLD_SECRET); // what the backups of the earlier release held

    // Written after the backup: a file and a later backup.
    const laterScan = await storeAliceScan(app, 'after the backup');
    await root.backups.create('later.tar.gz');
    const laterBackup = `${app.baseUrl}/api/backups/later.tar.gz`;

    // The backup restored into a new data dir, as an operator would, and served.
    const restoredDir = path.join(await tempDir('rb-restored-'), 'data');
    const archiveFile = `${restoredDir}-archive.tar.gz`;
    await fs.writeFile(archiveFile, archive);
    await restoreBackup({ file: archiveFile, dataDir: restoredDir });
    const restored = await startApp({ engine: 'pglite', dataDir: restoredDir });
    try {
      const restoredScan = firstScan.replace(app.baseUrl, restored.baseUrl);
      const restoredBackup = `${restored.baseUrl}/api/backups/restored.tar.gz`;
      await restored.router.backup({ name: 'restored.tar.gz' });

      for (const secret of candidates) {
        for (const { label, token } of forgeEveryToken(secret)) {
          for (const url of [firstScan, laterScan, laterBackup, restoredScan, restoredBackup]) {
            expect({ label, url, status: (await download(url, token)).status }).toEqual({ label, url, status: 401 });
          }
        }
      }

      // The honest ways in still work, on both.
      for (const target of [app, restored]) {
        const pb = sdkOf(target, 'token-root');
        const token = await pb.files.getToken();
        expect((await download(pb.backups.getDownloadURL(token, target === app ? 'later.tar.gz' : 'restored.tar.gz'))).status).toBe(200);
        expect(await download(target === app ? laterScan : restoredScan, token)).toMatchObject({ status: 200 });
      }
    } finally {
      await restored.close();
    }
    expect(rows).toEqual([]); // the archive holds no signing secret at all
  }, 240_000);
});
