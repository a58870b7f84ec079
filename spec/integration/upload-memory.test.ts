import http from 'node:http';
import path from 'node:path';
import { fileCollections, listFilesUnder } from '../support/file-fixtures.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';
import { measurePeakGrowth } from '../support/measure-peak-growth.js';

const MIB = 1024 * 1024;
const APP_START_TIMEOUT = 90_000;

/**
 * Sends a multipart body of `files` file parts of `fileSize` bytes each, generated chunk by chunk
 * with backpressure, so the client side never holds a file either; resolves with the status and body.
 */
function uploadGenerated(app: TestApp, options: { files: number; fileSize: number }): Promise<{ status: number; body: string }> {
  const boundary = 'memoryboundary';
  const chunk = Buffer.alloc(64 * 1024, 0x61);
  return new Promise((resolve, reject) => {
    const req = http.request(`${app.baseUrl}/backend/api/collections/albums/records`, {
      method: 'POST',
      headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Transfer-Encoding': 'chunked' },
    });
    req.on('response', (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    async function write() {
      const send = (data: Buffer | string) => (req.write(data) ? Promise.resolve() : new Promise<void>((r) => req.once('drain', () => r())));
      for (let f = 0; f < options.files; f++) {
        await send(`--${boundary}\r\nContent-Disposition: form-data; name="docs"; filename="big${f}.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`);
        for (let sent = 0; sent < options.fileSize; sent += chunk.length) await send(chunk.subarray(0, Math.min(chunk.length, options.fileSize - sent)));
        await send('\r\n');
      }
      await send(`--${boundary}--\r\n`);
      req.end();
    }
    write().catch(reject);
  });
}

describe.each(testEngines())('uploads stream on %s: memory stays flat', (engine) => {
  let app: TestApp;

  beforeAll(async () => {
    const collections = fileCollections();
    // large, many files for this suite
    const albums = collections.find((c) => c.name === 'albums')!;
    albums.fields = albums.fields!.map((f) => (f.name === 'docs' ? { ...f, maxSelect: 50 } : f));
    app = await startTestApp(engine, { collections, limits: { maxFileSize: 200 * MIB, maxBodySize: 400 * MIB } });
  }, APP_START_TIMEOUT);
  afterAll(async () => {
    await app?.close();
  });

  test('one 160 MiB file and forty 4 MiB files each grow the process by far less than their size', async () => {
    let result = { status: 0, body: '' };
    const oneBig = await measurePeakGrowth(async () => {
      result = await uploadGenerated(app, { files: 1, fileSize: 160 * MIB });
    });
    expect(result.status).toBe(200);
    const many = await measurePeakGrowth(async () => {
      result = await uploadGenerated(app, { files: 40, fileSize: 4 * MIB });
    });
    expect(result.status).toBe(200);
    expect(JSON.parse(result.body).docs).toHaveLength(40);
    // Both bodies are 160 MiB; buffering either would grow the process by at least that.
    expect(oneBig).toBeLessThan(64 * MIB);
    expect(many).toBeLessThan(64 * MIB);
    const stored = listFilesUnder(path.join(app.dataDir, 'storage'));
    expect(stored).toHaveLength(41);
  }, 120_000);
});
