import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import http from 'node:http';
import { OPEN_RULES } from '../support/open-rules.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/**
 * One client's volume degrades that client only (issue 41, finding 5): while four guest loops
 * from one address send batches of 50 creates as fast as they are answered, an honest client
 * from another address creates a record and its own subscriber receives it within a second
 * (over 10 s two rounds ago, 0.3-1.9 s in the last round's probe), on both engines.
 */

const ATTACKER = '127.0.0.1';
const HONEST = '127.0.0.2';

interface Answer {
  status: number;
  body: string;
}

function send(base: string, options: { method: string; path: string; body?: unknown; from: string }): Promise<Answer> {
  const url = new URL(base + options.path);
  const data = options.body === undefined ? undefined : JSON.stringify(options.body);
  return new Promise((resolve) => {
    const req = http.request(
      { host: url.hostname, port: url.port, path: url.pathname + url.search, method: options.method, localAddress: options.from, agent: false, headers: data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {} },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', (error) => resolve({ status: 0, body: String(error) }));
    req.end(data);
  });
}

/** A realtime stream from `from`: its clientId, and the time each `posts` message arrived. */
async function openStream(base: string, from: string): Promise<{ clientId: string; arrivals: number[]; close(): void }> {
  const url = new URL(`${base}/api/realtime`);
  const arrivals: number[] = [];
  let clientId = '';
  const req = http.get({ host: url.hostname, port: url.port, path: url.pathname, localAddress: from, headers: { accept: 'text/event-stream' } }, (res) => {
    res.setEncoding('utf8');
    let buffered = '';
    res.on('data', (chunk: string) => {
      buffered += chunk;
      for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
        const message = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        if (message.includes('event:PB_CONNECT')) clientId = /id:(\S+)/.exec(message)![1]!;
        else if (message.includes('event:posts')) arrivals.push(Date.now());
      }
    });
  });
  req.on('error', () => undefined);
  const until = Date.now() + 10_000;
  while (clientId === '' && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 10));
  return { clientId, arrivals, close: () => req.destroy() };
}

describe.each(testEngines())('realtime delivery beside guest batch loops on %s', (engine) => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp(engine, { collections: [{ name: 'posts', fields: [{ name: 'title', type: 'text' }, { name: 'body', type: 'text' }], rules: OPEN_RULES }] });
  });
  afterAll(async () => {
    await app?.close();
  });

  test("an honest client's create reaches its own subscriber within a second while four batch loops run", async () => {
    const base = `${app.baseUrl}/backend`;
    const stream = await openStream(base, HONEST);
    const subscription = `posts/*?options=${encodeURIComponent(JSON.stringify({ query: { filter: "title = 'honest'" } }))}`;
    expect((await send(base, { method: 'POST', path: '/api/realtime', body: { clientId: stream.clientId, subscriptions: [subscription] }, from: HONEST })).status).toBe(204);

    const batch = { requests: Array.from({ length: 50 }, () => ({ method: 'POST', url: '/api/collections/posts/records', body: { title: 'load', body: 'x'.repeat(2000) } })) };
    let stop = false;
    let batches = 0;
    const loops = Array.from({ length: 4 }, async () => {
      while (!stop) {
        const answer = await send(base, { method: 'POST', path: '/api/batch', body: batch, from: ATTACKER });
        expect(answer.status).not.toBe(500);
        batches++;
      }
    });
    try {
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const delays: number[] = [];
      for (let i = 0; i < 6; i++) {
        const before = stream.arrivals.length;
        const started = Date.now();
        const created = await send(base, { method: 'POST', path: '/api/collections/posts/records', body: { title: 'honest' }, from: HONEST });
        expect(created.status).toBe(200);
        while (stream.arrivals.length === before && Date.now() - started < 15_000) await new Promise((resolve) => setTimeout(resolve, 5));
        expect(stream.arrivals.length).toBe(before + 1);
        delays.push(stream.arrivals[before]! - started);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      delays.sort((a, b) => a - b);
      // The median within the goal; every one within a few times it on a loaded 2-core machine.
      expect(delays[Math.floor(delays.length / 2)]).toBeLessThan(1_000);
      expect(delays[delays.length - 1]).toBeLessThan(3_000);
      expect(batches).toBeGreaterThan(4);
    } finally {
      stop = true;
      await Promise.all(loops);
      stream.close();
    }
  }, 90_000);
});
