import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { createAppServer } from '../../lib/index.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { createMemoryLogger, startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/**
 * Issue 41, finding 3: with Express's `trust proxy` set to trust every address, `X-Forwarded-For`
 * (which any client writes) picks each request's address, so the fairness key and realtime's
 * per-address bound are the client's choice. recordbase warns once per router, on its first
 * request, as it warns for the opposite mistake; not for a hop count, which is right or wrong
 * depending on whether clients can reach the app directly, which it cannot tell.
 */

const collections = [{ name: 'marks', fields: [{ name: 'name', type: 'text' as const }], rules: OPEN_RULES }];

describe.each(testEngines())('the trust-proxy warning on %s', (engine) => {
  const closers: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });

  /** A fresh router, mounted by a host app whose `trust proxy` is `trust`; its base URL and what its logger was told. */
  async function serveTrusting(trust: unknown): Promise<{ base: string; lines: string[] }> {
    const logger = createMemoryLogger();
    const app: TestApp = await startTestApp(engine, { collections, logger });
    closers.push(() => app.close());
    const host = express();
    host.set('trust proxy', trust);
    host.use('/backend', app.router);
    const server: Server = createAppServer(host);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}/backend`, lines: logger.lines };
  }

  const list = async (base: string, headers: Record<string, string> = {}) => {
    const res = await fetch(`${base}/api/collections/marks/records?perPage=1`, { headers });
    expect(res.status).toBe(200);
  };
  const trustWarnings = (lines: string[]) => lines.filter((line) => line.includes("'trust proxy'") && line.includes('trusts every address'));

  test.each([
    ['true', true],
    ['a function that trusts everything', () => true],
    ['subnets that cover every IPv4 address', ['0.0.0.0/1', '128.0.0.0/1']],
  ])('%s: one warning on the first request, naming the risk and the fix, none after', async (_label, trust) => {
    const { base, lines } = await serveTrusting(trust);
    await list(base);
    const warnings = trustWarnings(lines);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('X-Forwarded-For');
    expect(warnings[0]).toContain('maxClientsPerAddress');
    expect(warnings[0]).toContain("app.set('trust proxy', 1)");
    expect(warnings[0]).toContain('docs/deployment.md');
    await list(base, { 'X-Forwarded-For': '203.0.113.7' });
    await list(base, { 'X-Forwarded-For': '203.0.113.8' });
    expect(trustWarnings(lines)).toHaveLength(1);
    // Not the opposite warning: this proxy is trusted.
    expect(lines.filter((line) => line.includes('does not trust'))).toEqual([]);
  });

  test.each([
    ['a hop count', 1],
    ['loopback', 'loopback'],
    ['unset', false],
  ])('%s: no such warning', async (_label, trust) => {
    const { base, lines } = await serveTrusting(trust);
    await list(base);
    await list(base, { 'X-Forwarded-For': '203.0.113.7' });
    expect(trustWarnings(lines)).toEqual([]);
  });
});
