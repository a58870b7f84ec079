import { afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { execFile } from 'node:child_process';
import http, { type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import express from 'express';
import { appServerClasses, createAppServer } from '../../lib/index.js';
import { ensureBuilt } from '../support/built-package.js';

const run = promisify(execFile);

/** Starts `server` on an ephemeral port and returns its base URL. */
async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** An app whose route answers with Express's own methods, and what a listener placed before the app saw. */
function probedApp() {
  const app = express();
  app.get('/items/:id', (req, res) => {
    res.status(201).json({ id: req.params.id, accept: req.get('accept'), query: req.query });
  });
  const seen: { requestPrototype: boolean; responsePrototype: boolean }[] = [];
  const probe = (req: IncomingMessage, res: http.ServerResponse) => {
    seen.push({ requestPrototype: Object.getPrototypeOf(req) === app.request, responsePrototype: Object.getPrototypeOf(res) === app.response });
  };
  return { app, seen, probe };
}

describe('createAppServer', () => {
  let server: Server | undefined;
  afterEach(async () => {
    if (server) await new Promise<void>((resolve) => server!.close(() => resolve()));
    server = undefined;
  });

  test('requests and responses are born with the app prototypes, before Express sees them', async () => {
    const { app, seen, probe } = probedApp();
    server = createAppServer(app);
    server.prependListener('request', probe);
    const base = await listen(server);
    const res = await fetch(`${base}/items/abc?x=1`, { headers: { accept: 'application/json' } });
    expect(res.status).toBe(201);
    expect(await res.json()).toEqual({ id: 'abc', accept: 'application/json', query: { x: '1' } });
    expect(seen).toEqual([{ requestPrototype: true, responsePrototype: true }]);
  });

  test('as Express makes the server, the prototypes are changed per request (the probe can tell)', async () => {
    const { app, seen, probe } = probedApp();
    server = http.createServer(app);
    server.prependListener('request', probe);
    const base = await listen(server);
    const res = await fetch(`${base}/items/abc`);
    expect(res.status).toBe(201);
    expect(seen).toEqual([{ requestPrototype: false, responsePrototype: false }]);
  });

  test('appServerClasses gives another server constructor the same classes', async () => {
    const { app, seen, probe } = probedApp();
    server = http.createServer({ ...appServerClasses(app), keepAlive: true }, app);
    server.prependListener('request', probe);
    const base = await listen(server);
    expect((await fetch(`${base}/items/x`)).status).toBe(201);
    expect(seen).toEqual([{ requestPrototype: true, responsePrototype: true }]);
  });

  test('server options pass through createAppServer', async () => {
    const { app } = probedApp();
    server = createAppServer(app, { maxHeaderSize: 1024 });
    const base = await listen(server);
    const status = (headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        http.get(`${base}/items/x`, { headers }, (r) => {
          r.resume();
          resolve(r.statusCode ?? 0);
        }).on('error', reject);
      });
    expect(await status({})).toBe(201);
    // A header over the server's 1 KiB is refused by Node itself.
    expect(await status({ 'x-big': 'y'.repeat(2048) })).toBe(431);
  });
});

describe('hidden classes (V8 natives, a process of its own)', () => {
  let root: string;
  beforeAll(async () => {
    root = await ensureBuilt();
  }, 120_000);

  const probe = async (mode: 'app-server' | 'listen') => {
    const { stdout } = await run(process.execPath, ['--allow-natives-syntax', join(root, 'spec/support/hidden-class-probe.mjs'), mode], { cwd: root, timeout: 30_000 });
    return JSON.parse(stdout) as { requestsShareMap: boolean; responsesShareMap: boolean };
  };

  test('through createAppServer, requests and responses share one hidden class', async () => {
    expect(await probe('app-server')).toEqual({ requestsShareMap: true, responsesShareMap: true });
  }, 40_000);

  // V8 11.3 and 12.4 (Node 20, 22) give every property added after Express's prototype change a
  // hidden class per request; V8 13.6 (Node 24) shares them, so there app.listen's requests share too.
  const listenSharesMaps = Number(process.versions.v8.split('.')[0]) >= 13;
  test(`through app.listen on V8 ${process.versions.v8}, requests ${listenSharesMaps ? 'share one hidden class' : 'each get a hidden class of their own'}`, async () => {
    expect(await probe('listen')).toEqual({ requestsShareMap: listenSharesMaps, responsesShareMap: listenSharesMaps });
  }, 40_000);
});
