import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import type { CollectionDefinition } from '../../lib/index.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/** `GET {mount}/`: the router's own page, in place of Express's "Cannot GET" (README, "Try it"). */

const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const START_TIMEOUT = 60_000;

const collections: CollectionDefinition[] = [{ name: 'notes', fields: [{ name: 'text', type: 'text' }], rules: { list: '', view: '' } }];

/** The href of every link on a page. */
const linksOf = (html: string) => [...html.matchAll(/href="([^"]*)"/g)].map((m) => m[1]!);

/** Another host app around the same router, on its own port. */
async function listen(app: express.Express): Promise<{ url: string; server: Server }> {
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe.each(testEngines())('the page at the mount on %s', (engine) => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp(engine, { collections, dashboard: true, openapi: true });
  }, START_TIMEOUT);
  afterAll(async () => {
    await app?.close();
  });

  test('{mount} redirects to {mount}/, a text page under the strict headers whose every link answers', async () => {
    const redirect = await fetch(`${app.baseUrl}/backend?x=1`, { redirect: 'manual' });
    expect(redirect.status).toBe(308);
    expect(new URL(redirect.headers.get('location')!, `${app.baseUrl}/backend`).pathname).toBe('/backend/');

    const res = await fetch(`${app.baseUrl}/backend/`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('content-security-policy')).toBe(CSP);
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    const html = await res.text();
    expect(html).not.toMatch(/<script|<style|<img|<form|on\w+=/i);
    expect(html).toContain('<code>/backend</code>');
    expect(linksOf(html)).toEqual(['api/health', '_/', 'api/openapi.json']);
    for (const link of linksOf(html)) {
      const target = new URL(link, `${app.baseUrl}/backend/`);
      expect({ link, status: (await fetch(target)).status }).toEqual({ link, status: 200 });
    }
    expect((await fetch(`${app.baseUrl}/backend/`, { method: 'HEAD' })).status).toBe(200);
  });

  test('mounted at a parameter, the page prints the mount escaped; mounted at the root, GET / stays the host\'s', async () => {
    const tenant = express();
    tenant.use('/:tenant', app.router);
    const atRoot = express();
    atRoot.use(app.router);
    atRoot.get('/', (_req, res) => {
      res.send('the host home page');
    });
    const hosts = [await listen(tenant), await listen(atRoot)];
    try {
      const page = await fetch(`${hosts[0]!.url}/a&b'c/`);
      expect(page.status).toBe(200);
      const html = await page.text();
      expect(html).toContain('<code>/a&amp;b&#39;c</code>');
      expect(html).not.toContain("b'c");
      expect(await (await fetch(`${hosts[1]!.url}/`)).text()).toBe('the host home page');
      expect((await fetch(`${hosts[1]!.url}/api/health`)).status).toBe(200);
    } finally {
      for (const { server } of hosts) await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe.each(testEngines())('the page with the dashboard and the document off on %s', (engine) => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp(engine, { collections });
  }, START_TIMEOUT);
  afterAll(async () => {
    await app?.close();
  });

  test('links the health check only', async () => {
    const html = await (await fetch(`${app.baseUrl}/backend/`)).text();
    expect(linksOf(html)).toEqual(['api/health']);
    expect(html).not.toContain('Dashboard');
  });
});
