import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createRecordsRouter } from '../../lib/index.js';
import type { CollectionDefinition } from '../../lib/schema/definitions.js';
import { ensureBuilt } from '../support/built-package.js';
import { startNodeUntil, stopNode } from '../support/node-process.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { createMemoryLogger, startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/**
 * What a newcomer reads while starting (issue 45): a progress line while a first start creates the
 * embedded database (10.9 s of silence before), the dashboard's address printed by `recordbase
 * serve`, and PocketBase's admin endpoints answered without "there is no admin UI" when the
 * dashboard is on.
 */

const collections: CollectionDefinition[] = [{ name: 'notes', fields: [{ name: 'text', type: 'text' }], rules: OPEN_RULES }];
const FIRST_START = /^creating the embedded database in (.+): the first start initialises a new Postgres data directory \(PGlite's initdb\), which takes several seconds/;

const scratch = mkdtempSync(path.join(os.tmpdir(), 'rb-start-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe.each(testEngines())('PocketBase\'s admin endpoints with dashboard: true on %s', (engine) => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp(engine, { collections, dashboard: true });
  }, 120_000);
  afterAll(async () => {
    await app?.close();
  });

  test.each(['/api/settings', '/api/logs', '/api/logs/stats', '/api/crons'])('GET %s is a JSON 404 that points at what serves instead, never "there is no admin UI"', async (url) => {
    const dashboard = await app.http.get('/backend/_/');
    expect(dashboard.status).toBe(200); // the dashboard is on
    const res = await app.http.get(`/backend${url}`);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ status: 404, message: expect.stringContaining("does not serve PocketBase's admin endpoints"), data: {} });
    expect(res.body.message).not.toMatch(/no admin UI/i);
    expect(res.body.message).toContain('the dashboard (dashboard: true, at {mount}/_/) works without these endpoints');
  });
});

describe('a first start of the embedded database says what takes long', () => {
  test('the router logs one progress line (info) when it creates the database, before the start is over; none when it opens it again', async () => {
    const dataDir = mkdtempSync(path.join(scratch, 'router-'));
    const first = createMemoryLogger();
    let started = false;
    const linesBeforeReady: string[] = [];
    const logger = { ...first, info: (message: string) => void (started ? first.lines : linesBeforeReady).push(message) };
    const router = createRecordsRouter({ collections, dataDir, logger, realtime: false, fileSweep: false });
    await router.ready;
    started = true;
    await router.close();
    expect(linesBeforeReady.filter((line) => FIRST_START.test(line))).toEqual([expect.stringContaining(path.join(dataDir, 'db'))]);
    expect(first.lines.filter((line) => FIRST_START.test(line))).toEqual([]);

    const again = createMemoryLogger();
    const reopened = createRecordsRouter({ collections, dataDir, logger: again, realtime: false, fileSweep: false });
    await reopened.ready;
    await reopened.close();
    expect(again.lines.filter((line) => /embedded database/.test(line))).toEqual([]);
  }, 120_000);
});

/** Starts `recordbase serve` on any free port and resolves once it printed `until`. */
const serveUntil = (cli: string, cwd: string, until: RegExp) => startNodeUntil([cli, 'serve', '--port', '0'], { cwd, until });

describe('recordbase serve', () => {
  test('with dashboard: true on a fresh dataDir: the progress line first, then the address and the dashboard\'s, which answers', async () => {
    const cli = path.join(await ensureBuilt(), 'dist/lib/cli/main.js');
    const dir = mkdtempSync(path.join(scratch, 'serve-'));
    writeFileSync(path.join(dir, 'recordbase.config.mjs'), `export default { dataDir: './data', dashboard: true, collections: ${JSON.stringify(collections)} };\n`);
    const { child, output } = await serveUntil(cli, dir, /dashboard: .*\n/);
    try {
      const lines = output().trim().split('\n');
      const progress = lines.findIndex((line) => /creating the embedded database in /.test(line));
      const listening = lines.findIndex((line) => line.startsWith('recordbase listening on '));
      expect(progress).toBeGreaterThanOrEqual(0);
      expect(lines[progress]).toContain(path.join(dir, 'data', 'db'));
      expect(listening).toBeGreaterThan(progress);
      const url = /^dashboard: (http:\/\/127\.0\.0\.1:\d+\/_\/) /.exec(lines[listening + 1]!)?.[1];
      expect(url).toBeDefined();
      const page = await fetch(url!);
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    } finally {
      await stopNode(child);
    }
  }, 120_000);

  test('recordbase migrate on a fresh dataDir prints the progress line on stderr too', async () => {
    const cli = path.join(await ensureBuilt(), 'dist/lib/cli/main.js');
    const dir = mkdtempSync(path.join(scratch, 'migrate-'));
    writeFileSync(path.join(dir, 'recordbase.config.mjs'), `export default { dataDir: './data', collections: ${JSON.stringify(collections)} };\n`);
    const { stderr } = await promisify(execFile)(process.execPath, [cli, 'migrate'], { cwd: dir });
    expect(stderr.split('\n').filter((line) => line.startsWith('recordbase: creating the embedded database in '))).toEqual([expect.stringContaining(path.join(dir, 'data', 'db'))]);
  }, 120_000);

  test('without the dashboard prints no dashboard line', async () => {
    const cli = path.join(await ensureBuilt(), 'dist/lib/cli/main.js');
    const dir = mkdtempSync(path.join(scratch, 'serve-'));
    writeFileSync(path.join(dir, 'recordbase.config.mjs'), `export default { dataDir: './data', collections: ${JSON.stringify(collections)} };\n`);
    const { child, output } = await serveUntil(cli, dir, /listening on .*\n/);
    try {
      // Anything printed right after the address would have come with it: give it a moment.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(output()).toMatch(/^recordbase listening on http/m);
      expect(output()).not.toMatch(/dashboard/);
    } finally {
      await stopNode(child);
    }
  }, 120_000);
});
