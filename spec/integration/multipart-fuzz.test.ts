import fc from 'fast-check';
import http from 'node:http';
import path from 'node:path';
import { fileCollections, listFilesUnder } from '../support/file-fixtures.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/** Runs per property and engine; each request must answer within REQUEST_LIMIT_MS. */
const NUM_RUNS = 120;
const REQUEST_LIMIT_MS = 2000;
const APP_START_TIMEOUT = 90_000;
const STORED_NAME = /^[a-z0-9]+(?:_[a-z0-9]+)*_[a-z0-9]{10}(?:\.[a-z0-9]{1,20})?$/;

const FIELD_NAMES = [
  'title', 'views', 'published', 'tags', 'meta', 'secret', 'code', 'cover', 'docs', 'docs+', '+docs', 'docs-', 'tags+', 'views-',
  '@jsonPayload', '__proto__', 'constructor', 'prototype', 'id', 'created', 'collectionId', 'expand', 'a[b]', 'a[0]', '[]', '',
  'title\u0000', 'ti"tle', "ti'tle", 'docs\r\nX-Evil: 1', '🔥', 'é', '%2e%2e', '../docs',
];
const FILE_NAMES = [
  'a.txt', '../../etc/passwd', '..\\..\\boot.ini', '/etc/shadow', 'C:\\Windows\\win.ini', '%2e%2e%2fsecret', '..', '.', '...', '.htaccess',
  'nul\u0000.png', 'file\u202Egnp.exe', 'Ünïcödé (1).PNG', '🔥🔥.jpeg', 'a'.repeat(600), 'x.'.repeat(100), 'CON', 'a/b/c.txt', '',
  'name with "quotes".txt', "it's.md", 'semi;colon.txt', 'new\nline.txt', 'tab\t.txt', '.tmp-x', 'thumbs_a.png',
];
const VALUES = [
  '', 'x', '12', '-1', 'true', 'false', 'null', '[]', '{}', '{"a":1}', '["a","b"]', 'a', 'b', 'c', '1e999', 'NaN',
  '\u0000', 'x'.repeat(5000), '🔥', '<script>alert(1)</script>', "' OR 1=1 --", '2024-05-01', '{"__proto__":{"x":1}}',
];

/** Quotes a header parameter the way a careless or hostile client might: sometimes not at all correctly. */
function quoteParam(value: string, style: number): string {
  if (style === 0) return `"${value.replace(/"/g, '%22')}"`;
  if (style === 1) return `"${value}"`;
  return value;
}

interface Part {
  name: string;
  file?: { name: string; bytes: Buffer };
  value?: string;
  quoteStyle: number;
}

const part: fc.Arbitrary<Part> = fc.record({
  name: fc.oneof({ weight: 5, arbitrary: fc.constantFrom(...FIELD_NAMES) }, { weight: 1, arbitrary: fc.string({ maxLength: 20, unit: 'binary' }) }),
  isFile: fc.boolean(),
  fileName: fc.oneof({ weight: 5, arbitrary: fc.constantFrom(...FILE_NAMES) }, { weight: 1, arbitrary: fc.string({ maxLength: 40, unit: 'binary' }) }),
  bytes: fc.uint8Array({ maxLength: 300 }),
  value: fc.oneof({ weight: 5, arbitrary: fc.constantFrom(...VALUES) }, { weight: 1, arbitrary: fc.string({ maxLength: 50, unit: 'binary' }) }),
  quoteStyle: fc.integer({ min: 0, max: 2 }),
}).map(({ name, isFile, fileName, bytes, value, quoteStyle }) =>
  isFile ? { name, file: { name: fileName, bytes: Buffer.from(bytes) }, quoteStyle } : { name, value, quoteStyle },
);

/** Builds the raw body, byte for byte, so the fuzzer controls what no well-behaved client would send. */
function buildBody(parts: readonly Part[], boundary: string): Buffer {
  const chunks: Buffer[] = [];
  for (const p of parts) {
    let disposition = `Content-Disposition: form-data; name=${quoteParam(p.name, p.quoteStyle)}`;
    if (p.file) disposition += `; filename=${quoteParam(p.file.name, p.quoteStyle)}`;
    chunks.push(Buffer.from(`--${boundary}\r\n${disposition}\r\n${p.file ? 'Content-Type: application/octet-stream\r\n' : ''}\r\n`, 'utf8'));
    chunks.push(p.file ? p.file.bytes : Buffer.from(p.value ?? '', 'utf8'));
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(chunks);
}

/** Sends raw bytes; resolves with status, parsed body and the time it took. */
function send(app: TestApp, options: { method: string; path: string; body: Buffer; boundary: string }): Promise<{ status: number; body: unknown; ms: number }> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const req = http.request(`${app.baseUrl}${options.path}`, {
      method: options.method,
      headers: { 'Content-Type': `multipart/form-data; boundary=${options.boundary}`, 'Content-Length': options.body.length },
    });
    req.on('response', (res) => {
      const data: Buffer[] = [];
      res.on('data', (d: Buffer) => data.push(d));
      res.on('end', () => {
        const text = Buffer.concat(data).toString();
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // asserted below: every answer is JSON
        }
        resolve({ status: res.statusCode ?? 0, body, ms: Date.now() - started });
      });
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

describe.each(testEngines())('multipart fuzzing on %s', (engine) => {
  let app: TestApp;
  let existingId: string;

  beforeAll(async () => {
    app = await startTestApp(engine, { collections: fileCollections(), limits: { maxFileSize: 100_000, maxBodySize: 200_000 } });
    const created = await app.http.post('/backend/api/collections/albums/records').field('title', 'seed').attach('docs', Buffer.from('seed'), 'seed.txt');
    existingId = created.body.id;
  }, APP_START_TIMEOUT);
  afterAll(async () => {
    await app?.close();
  });

  /** Every stored file sits at storage/{collectionId}/{recordId}/{stored name}, and nothing else was written. */
  function expectStorageIntact(): void {
    for (const file of listFilesUnder(app.dataDir)) {
      const [top, collectionId, recordId, name, ...rest] = file.split(path.sep);
      expect(top).toBe('storage');
      expect(collectionId).toBe('pbc_albums01');
      expect(recordId).toMatch(/^[a-z0-9]{15}$/);
      expect(name).toMatch(STORED_NAME);
      expect(rest).toEqual([]);
    }
  }

  test.each([
    ['create', () => ({ method: 'POST', path: '/backend/api/collections/albums/records' })],
    ['update', () => ({ method: 'PATCH', path: `/backend/api/collections/albums/records/${existingId}` })],
  ])('%s with arbitrary parts: never a 500, always the JSON error body, always in time, no file outside its record folder', async (_label, target) => {
    await fc.assert(
      fc.asyncProperty(fc.array(part, { maxLength: 8 }), fc.constantFrom('b0undary', 'x', '----WebKitFormBoundary7MA4YWxkTrZu0gW'), async (parts, boundary) => {
        const res = await send(app, { ...target(), body: buildBody(parts, boundary), boundary });
        expect([200, 400, 404, 413, 422]).toContain(res.status);
        expect(res.ms).toBeLessThan(REQUEST_LIMIT_MS);
        expect(typeof res.body).toBe('object');
        if (res.status !== 200) expect(res.body).toEqual({ status: res.status, message: expect.any(String), data: expect.any(Object) });
        else {
          const record = res.body as { cover: string; docs: string[] };
          for (const name of [record.cover, ...record.docs].filter(Boolean)) expect(name).toMatch(STORED_NAME);
        }
      }),
      { numRuns: NUM_RUNS },
    );
    expectStorageIntact();
    expect(listFilesUnder(path.join(app.dataDir, 'uploads-tmp'))).toEqual([]);
  }, 240_000);
});
