import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import type { CollectionDefinition } from '../../lib/index.js';
import { builtDashboardDir } from '../../lib/http/dashboard-routes.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/** The dashboard as HTTP serves it (docs/dashboard.md): the page, its assets, headers and the two dashboard endpoints. */

const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const BUDGET_GZIPPED = 60 * 1024;
const START_TIMEOUT = 60_000;

const collections: CollectionDefinition[] = [
  {
    name: 'posts',
    fields: [
      { name: 'title', type: 'text', required: true, presentable: true, help: 'What the post is called' },
      { name: 'secret', type: 'text', hidden: true },
      { name: 'tags', type: 'select', values: ['a', 'b'], maxSelect: 2 },
    ],
    rules: { list: '', view: '', create: '@request.auth.id != ""', update: null, delete: null },
    indexes: [{ fields: ['title'], unique: true }],
  },
];

const built = builtDashboardDir();
const indexHtml = () => readFileSync(path.join(built, 'index.html'), 'utf8');
/** The asset URLs (relative to the page) that index.html loads. */
const referencedAssets = () => [...indexHtml().matchAll(/(?:src|href)="(assets\/[^"]+)"/g)].map((m) => m[1]!);

function expectDashboardHeaders(headers: Record<string, string>): void {
  expect(headers['content-security-policy']).toBe(CSP);
  expect(headers['x-frame-options']).toBe('DENY');
  expect(headers['x-content-type-options']).toBe('nosniff');
  expect(headers['referrer-policy']).toBe('no-referrer');
}

describe('the built dashboard', () => {
  test(`its JavaScript and CSS together are under ${BUDGET_GZIPPED / 1024} KB gzipped`, () => {
    const assets = readdirSync(path.join(built, 'assets'));
    expect(assets.some((name) => name.endsWith('.js'))).toBe(true);
    expect(assets.some((name) => name.endsWith('.css'))).toBe(true);
    const gzipped = assets.reduce((sum, name) => sum + gzipSync(readFileSync(path.join(built, 'assets', name)), { level: 9 }).length, 0);
    expect(gzipped).toBeLessThan(BUDGET_GZIPPED);
  });

  test('index.html loads hashed assets only: no inline script, style or handler', () => {
    const page = indexHtml();
    const assets = referencedAssets();
    expect(assets.length).toBe(2);
    for (const asset of assets) expect(asset).toMatch(/^assets\/[a-z]+-[A-Z0-9]{8}\.(js|css)$/);
    for (const [, attributes, body] of page.matchAll(/<script([^>]*)>([\s\S]*?)<\/script>/g)) {
      expect(attributes).toMatch(/\ssrc="/);
      expect(body!.trim()).toBe('');
    }
    expect(page).not.toMatch(/<style|\sstyle=|\son[a-z]+=|javascript:/i);
  });
});

test("a field type's dashboard behaviour is one entry of dashboard/src/field-kinds.ts: no other module switches on a field's type", () => {
  const sources = fileURLToPath(new URL('../../dashboard/src/', import.meta.url));
  const switching = readdirSync(sources).filter(
    (name) => name !== 'field-kinds.ts' && /switch\s*\(\s*[\w.]*\.type\s*\)/.test(readFileSync(path.join(sources, name), 'utf8')),
  );
  expect(readFileSync(path.join(sources, 'field-kinds.ts'), 'utf8')).toMatch(/const FIELD_KINDS = new Map/);
  expect(switching).toEqual([]);
});

test('off by default: every dashboard path is the router\'s JSON 404', async () => {
  const app = await startTestApp('pglite', { collections });
  try {
    for (const p of ['/backend/_', '/backend/_/', '/backend/_/assets/dashboard-AAAAAAAA.js', '/backend/_/api/whoami', '/backend/_/api/collections']) {
      const res = await app.http.get(p).set('Authorization', 'token-root');
      expect(res.status).toBe(404);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.body).toEqual({ status: 404, message: expect.stringContaining('dashboard: true'), data: {} });
    }
  } finally {
    await app.close();
  }
}, START_TIMEOUT);

describe.each(testEngines())('dashboard: true on %s', (engine) => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp(engine, { collections, dashboard: true });
  }, START_TIMEOUT);
  afterAll(async () => {
    await app?.close();
  });

  test('{mount}/_ redirects to {mount}/_/, which is index.html, revalidated on every load, under the strict headers', async () => {
    const redirect = await app.http.get('/backend/_');
    expect([301, 308]).toContain(redirect.status);
    expect(new URL(redirect.headers.location!, `${app.baseUrl}/backend/_`).pathname).toBe('/backend/_/');
    expectDashboardHeaders(redirect.headers);

    const res = await app.http.get('/backend/_/');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.headers['cache-control']).toBe('no-cache');
    expectDashboardHeaders(res.headers);
    expect(res.text).toBe(indexHtml());
  });

  test('the assets are served as built, cached for good under their hashed names', async () => {
    for (const asset of referencedAssets()) {
      const res = await app.http.get(`/backend/_/${asset}`).buffer(true).parse((r, done) => {
        const chunks: Buffer[] = [];
        r.on('data', (c: Buffer) => chunks.push(c));
        r.on('end', () => done(null, Buffer.concat(chunks)));
      });
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe(asset.endsWith('.js') ? 'text/javascript; charset=utf-8' : 'text/css; charset=utf-8');
      expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable');
      expectDashboardHeaders(res.headers);
      expect((res.body as Buffer).equals(readFileSync(path.join(built, asset)))).toBe(true);
      const head = await app.http.head(`/backend/_/${asset}`);
      expect(head.status).toBe(200);
    }
  });

  test('an unknown asset or page is a JSON 404 under the same headers, and no path leaves the built folder', async () => {
    for (const p of ['/backend/_/assets/dashboard-AAAAAAAA.js', '/backend/_/assets/..%2Findex.html', '/backend/_/assets/..%2F..%2F..%2Fpackage.json', '/backend/_/index.html', '/backend/_/nothing']) {
      const res = await app.http.get(p);
      expect(res.status).toBe(404);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.body).toMatchObject({ status: 404, data: {} });
      expectDashboardHeaders(res.headers);
    }
  });

  test('whoami: 401 for a guest or an unknown token, the identity\'s id and superuser flag otherwise', async () => {
    for (const token of [undefined, 'token-nobody']) {
      const req = app.http.get('/backend/_/api/whoami');
      const res = token ? await req.set('Authorization', token) : await req;
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ status: 401, data: {} });
    }
    const alice = await app.http.get('/backend/_/api/whoami').set('Authorization', 'token-alice');
    expect(alice.status).toBe(200);
    expect(alice.body).toEqual({ superuser: false, id: 'aliceaaaaaaaaaa' });
    const root = await app.http.get('/backend/_/api/whoami').set('Authorization', 'Bearer token-root');
    expect(root.body).toEqual({ superuser: true, id: 'rootrrrrrrrrrrr' });
    expect(root.headers['cache-control']).toBe('no-store');
  });

  test('whoami reads the Authorization header only: not ?token= nor the pb_session cookie', async () => {
    const byQuery = await app.http.get('/backend/_/api/whoami?token=token-root');
    expect(byQuery.status).toBe(401);
    const byCookie = await app.http.get('/backend/_/api/whoami').set('Cookie', 'pb_session=token-root');
    expect(byCookie.status).toBe(401);
  });

  test('collections: the schema for a superuser, 403 for anyone else, 401 for a guest', async () => {
    const guest = await app.http.get('/backend/_/api/collections');
    expect(guest.status).toBe(401);
    const alice = await app.http.get('/backend/_/api/collections').set('Authorization', 'token-alice');
    expect(alice.status).toBe(403);
    expect(JSON.stringify(alice.body)).not.toContain('secret');

    const root = await app.http.get('/backend/_/api/collections').set('Authorization', 'token-root');
    expect(root.status).toBe(200);
    const [posts] = root.body as Record<string, unknown>[];
    expect(posts).toMatchObject({
      name: 'posts',
      type: 'base',
      id: expect.stringMatching(/^pbc_/),
      rules: { list: '', view: '', create: '@request.auth.id != ""', update: null, delete: null },
      indexes: [{ unique: true, columns: [{ column: 'title', descending: false }] }],
    });
    const fields = posts!.fields as Record<string, unknown>[];
    expect(fields.map((f) => f.name)).toEqual(['id', 'created', 'updated', 'title', 'secret', 'tags']);
    expect(fields.find((f) => f.name === 'id')).toMatchObject({ system: true, presentable: false, help: '' });
    expect(fields.find((f) => f.name === 'title')).toMatchObject({ type: 'text', required: true, presentable: true, help: 'What the post is called', system: false });
    expect(fields.find((f) => f.name === 'secret')).toMatchObject({ hidden: true });
    expect(fields.find((f) => f.name === 'tags')).toMatchObject({ type: 'select', values: ['a', 'b'], maxSelect: 2, multiple: true });
  });

  test('collections: automaticIndexes lists the indexes the sync made without asking; with the declared ones, they are every index the table has', async () => {
    const root = await app.http.get('/backend/_/api/collections').set('Authorization', 'token-root');
    const [posts] = root.body as { indexes: { name: string }[]; automaticIndexes: unknown[] }[];
    expect(posts!.automaticIndexes).toEqual([
      { name: 'idx_posts_created', unique: false, method: 'btree', columns: [{ column: 'created', descending: false }, { column: 'id', descending: false }] },
      { name: 'idx_posts_tags_gin', unique: false, method: 'gin', columns: [{ column: 'tags', descending: false }] },
    ]);
    const listed = [...posts!.indexes, ...(posts!.automaticIndexes as { name: string }[])].map((index) => index.name).sort();
    const rows: { indexname: string }[] = await app.database.db.select('indexname').from('pg_indexes').whereRaw('schemaname = current_schema()').where({ tablename: 'posts' });
    expect(listed).toEqual(rows.map((r) => r.indexname).filter((name) => !name.endsWith('_pkey')).sort());
  });
});
