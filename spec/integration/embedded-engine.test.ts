/**
 * Issue 10, embedded side: PGlite runs in a worker thread, so a slow statement never stalls the
 * event loop, and a statement over the timeout is stopped (on disk: its worker is terminated and
 * replaced, the data intact) or at least answered (in memory). And the data folder belongs to
 * one process and one router at a time.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import express from 'express';
import type { Knex } from 'knex';
import { createRecordsRouter, type RecordsRouter } from '../../lib/index.js';
import type { RecordsRouterOptions } from '../../lib/options.js';
import { acquireDataDirLock, LOCK_EXPIRES_MS } from '../../lib/db/engine/data-dir-lock.js';
import { embeddedDatabaseDir, openEmbeddedDatabase, openMemoryDatabase } from '../../lib/db/engine/open-embedded-database.js';
import { ensureBuilt } from '../support/built-package.js';
import { createMemoryLogger } from '../support/test-app.js';
import { testKnexLog } from '../support/test-database.js';

const collections = [{ name: 'notes', fields: [{ name: 'text', type: 'text' as const }], rules: { list: '', view: '', create: '' } }];
/** 150 substring tests per row: on PGlite about 1.7 ms per 1 KB row here. */
const SLOW_FILTER = Array.from({ length: 150 }, (_, i) => `text ~ 'zq${i}'`).join(' || ');
const SLOW_LIST = `/api/collections/notes/records?skipTotal=1&filter=${encodeURIComponent(SLOW_FILTER)}`;
const LIST = '/api/collections/notes/records?skipTotal=1&perPage=5';

async function seedNotes(db: Knex, rows: number): Promise<void> {
  await db.raw(
    `INSERT INTO notes (id, text, created, updated)
     SELECT substr(md5(i::text), 1, 15), repeat(md5(i::text), 32), now(), now() FROM generate_series(1, ?::int) AS i`,
    [rows],
  );
}

async function serve(options: RecordsRouterOptions): Promise<{ router: RecordsRouter; base: string; close(): Promise<void> }> {
  const router = createRecordsRouter({ fileSweep: false, logger: createMemoryLogger(), ...options });
  const app = express();
  app.use('/backend', router);
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  return {
    router,
    base: `http://127.0.0.1:${(server.address() as { port: number }).port}/backend`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await router.close();
    },
  };
}

/**
 * Measures the event loop while `work` runs: the largest delay of a 10 ms timer. A statement on
 * the main thread would show here as its whole duration.
 */
async function measureLag<T>(work: () => Promise<T>): Promise<{ result: T; maxLagMs: number }> {
  let maxLagMs = 0;
  let last = performance.now();
  const probe = setInterval(() => {
    const now = performance.now();
    maxLagMs = Math.max(maxLagMs, now - last - 10);
    last = now;
  }, 10);
  try {
    return { result: await work(), maxLagMs };
  } finally {
    clearInterval(probe);
  }
}

/**
 * Runs `work` under the lag probe and asserts the event loop stayed free (largest lag under
 * 100 ms), checking `work`'s result each time. Up to two attempts: on this shared two-core
 * machine the scheduler alone sometimes delays a 10 ms timer by 70 to 100 ms (seen with nothing
 * at all on the event loop), whereas a statement on the event loop delays it by its whole
 * duration, seconds, in every attempt.
 */
async function expectEventLoopFree<T>(work: () => Promise<T>, check: (result: T) => void): Promise<void> {
  const lags: number[] = [];
  for (let attempt = 0; attempt < 2; attempt++) {
    const { result, maxLagMs } = await measureLag(work);
    check(result);
    lags.push(Math.round(maxLagMs));
    if (maxLagMs < 100) return;
  }
  throw new Error(`the event loop stalled: largest lag ${lags.join(' ms, then ')} ms`);
}

async function timedGet(url: string): Promise<{ status: number; body: { status: number; message: string; data: object; items?: unknown[] }; ms: number }> {
  const started = Date.now();
  const res = await fetch(url);
  return { status: res.status, body: (await res.json()) as never, ms: Date.now() - started };
}

describe('the embedded engine on disk', () => {
  let dir: string;
  let db: Knex;
  let app: Awaited<ReturnType<typeof serve>>;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'rb-embedded-'));
    db = openEmbeddedDatabase(embeddedDatabaseDir(dir), { log: testKnexLog });
    app = await serve({ collections, database: db, dataDir: dir, limits: { statementTimeoutMs: 1500, acquireTimeoutMs: 10_000 } });
    await app.router.ready;
    await seedNotes(db, 5_000);
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await db?.destroy();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  test('a slow statement runs off the event loop and is stopped at the statement timeout; the next request finds the data intact', async () => {
    const created = await fetch(`${app.base}/api/collections/notes/records`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: 'committed before' }) });
    expect(created.status).toBe(200);
    await expectEventLoopFree(
      () => timedGet(app.base + SLOW_LIST),
      (res) => {
        expect(res.status).toBe(400);
        expect(res.body).toEqual({ status: 400, message: expect.stringContaining('statement timeout (1500 ms, limits.statementTimeoutMs)'), data: {} });
        expect(res.ms).toBeLessThan(3_500); // about 8 s if it ran to its end
      },
    );
    // a fresh worker opened the folder again: committed data is there
    const view = await timedGet(`${app.base}/api/collections/notes/records/${((await created.json()) as { id: string }).id}`);
    expect(view.status).toBe(200);
    expect(view.body).toMatchObject({ text: 'committed before' });
    expect(Number((await db.raw('SELECT count(*)::int AS n FROM notes')).rows[0].n)).toBe(5_001);
  }, 60_000);

  test('requests queued behind a slow statement wait for it, with the event loop free meanwhile', async () => {
    await expectEventLoopFree(
      () => Promise.all([timedGet(app.base + SLOW_LIST), timedGet(app.base + LIST), timedGet(app.base + LIST)]),
      (result) => expect(result.map((r) => r.status).sort()).toEqual([200, 200, 400]),
    );
  }, 60_000);
});

describe('the embedded engine in memory', () => {
  test('a slow statement is answered at the timeout without stalling the event loop (it cannot be stopped, and runs on)', async () => {
    const db = openMemoryDatabase({ log: testKnexLog });
    const app = await serve({ collections, database: db, dataDir: mkdtempSync(path.join(os.tmpdir(), 'rb-embedded-mem-')), limits: { statementTimeoutMs: 1000 } });
    try {
      await app.router.ready;
      await seedNotes(db, 2_000); // about 3.5 s for the slow filter
      await expectEventLoopFree(
        () => timedGet(app.base + SLOW_LIST),
        (res) => {
          expect(res.status).toBe(400);
          expect(res.body.message).toContain('statement timeout (1000 ms, limits.statementTimeoutMs)');
          expect(res.ms).toBeLessThan(2_500);
        },
      );
      // the database is still there once the statement has ended
      let list = await timedGet(app.base + LIST);
      for (let i = 0; i < 20 && list.status !== 200; i++) list = await timedGet(app.base + LIST);
      expect(list.status).toBe(200);
      expect(list.body.items).toHaveLength(5);
    } finally {
      await app.close();
      await db.destroy();
    }
  }, 60_000);
});

describe('the data folder belongs to one process and one router', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'rb-lock-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const folder = () => path.join(dir, 'db');
  const lockFile = () => `${folder()}.lock`;

  test('a second router on the same dataDir fails at ready, naming the folder and this process; close() releases the folder', async () => {
    const first = createRecordsRouter({ collections, dataDir: dir, logger: createMemoryLogger(), fileSweep: false });
    await first.ready;
    const second = await serve({ collections, dataDir: dir });
    await expect(second.router.ready).rejects.toThrow(
      `The embedded database folder ${folder()} is in use by this process (pid ${process.pid} on ${os.hostname()}: another router or command opened it first)`,
    );
    const res = await timedGet(second.base + LIST);
    expect(res.status).toBe(503);
    expect(res.body.message).toContain(`recordbase could not start: The embedded database folder ${folder()} is in use`);
    await second.close();
    expect(existsSync(lockFile())).toBe(true); // the refused router did not remove the first one's lock

    await first.close();
    expect(existsSync(lockFile())).toBe(false);
    const third = createRecordsRouter({ collections, dataDir: dir, logger: createMemoryLogger(), fileSweep: false });
    await expect(third.ready).resolves.toBeUndefined();
    await third.close();
  }, 60_000);

  test('another process holding the folder is named (pid and host); once it is killed, its stale lock is taken over', async () => {
    const root = await ensureBuilt();
    const script = `
      const { createRecordsRouter } = await import(${JSON.stringify(path.join(root, 'dist/lib/index.js'))});
      const router = createRecordsRouter({ collections: ${JSON.stringify(collections)}, dataDir: ${JSON.stringify(dir)}, fileSweep: false });
      await router.ready;
      console.log('ready');
      setInterval(() => undefined, 1000);`;
    const child: ChildProcess = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      await new Promise<void>((resolve, reject) => {
        let stderr = '';
        child.stderr!.on('data', (chunk) => (stderr += chunk));
        child.stdout!.on('data', (chunk) => String(chunk).includes('ready') && resolve());
        child.once('exit', (code) => reject(new Error(`the child exited (${code}): ${stderr}`)));
      });
      const refused = createRecordsRouter({ collections, dataDir: dir, logger: createMemoryLogger(), fileSweep: false });
      await expect(refused.ready).rejects.toThrow(`The embedded database folder ${folder()} is in use by process ${child.pid} on host ${os.hostname()}`);
      await refused.close();
    } finally {
      child.kill('SIGKILL');
      await new Promise((resolve) => (child.exitCode === null && child.signalCode === null ? child.once('exit', resolve) : resolve(undefined)));
    }
    // the killed process left its lock behind
    expect(JSON.parse(readFileSync(lockFile(), 'utf8'))).toMatchObject({ pid: child.pid });
    const taker = await serve({ collections, dataDir: dir });
    await expect(taker.router.ready).resolves.toBeUndefined();
    expect(JSON.parse(readFileSync(lockFile(), 'utf8'))).toMatchObject({ pid: process.pid, host: os.hostname() });
    const created = await fetch(`${taker.base}/api/collections/notes/records`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: 'after takeover' }) });
    expect(created.status).toBe(200);
    await taker.close();
    expect(existsSync(lockFile())).toBe(false);
  }, 90_000);

  test('a lock from another host is refused while its holder refreshes it, and taken over once it has expired', () => {
    mkdirSync(dir, { recursive: true });
    writeFileSync(lockFile(), JSON.stringify({ pid: 1, host: 'elsewhere', since: '2026-01-01T00:00:00.000Z', token: 'theirs' }));
    expect(() => openEmbeddedDatabase(folder())).toThrow(
      `The embedded database folder ${folder()} is in use by process 1 on host elsewhere, since 2026-01-01T00:00:00.000Z; the lock is ${lockFile()}, and expires 60 s after its holder stops refreshing it.`,
    );
    // a previous container of the app (another hostname) that was killed: its lock stops being refreshed
    const lastRefresh = new Date(Date.now() - LOCK_EXPIRES_MS - 1000);
    utimesSync(lockFile(), lastRefresh, lastRefresh);
    const lock = acquireDataDirLock(folder());
    expect(JSON.parse(readFileSync(lockFile(), 'utf8'))).toMatchObject({ pid: process.pid, host: os.hostname() });
    lock.release();
    expect(existsSync(lockFile())).toBe(false);
  });

  test('the lock file names pid, host and start time, and sits beside the folder (PGlite needs the folder to itself)', async () => {
    const db = openEmbeddedDatabase(folder());
    try {
      expect(JSON.parse(readFileSync(lockFile(), 'utf8'))).toEqual({ pid: process.pid, host: os.hostname(), since: expect.any(String), token: expect.any(String) });
      expect(() => openEmbeddedDatabase(folder())).toThrow(/is in use by this process/);
    } finally {
      await db.destroy();
    }
    expect(existsSync(lockFile())).toBe(false);
  });
});

// The worker's entry point is loaded from dist/ under Jest: make sure it is the current build.
beforeAll(async () => {
  await ensureBuilt();
  expect(existsSync(fileURLToPath(new URL('../../dist/lib/db/engine/embedded-worker.js', import.meta.url)))).toBe(true);
}, 120_000);
