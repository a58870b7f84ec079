import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { promises as fs, readdirSync, readlinkSync, realpathSync } from 'node:fs';
import http, { type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import express from 'express';
import supertest from 'supertest';
import { diskStorage, type DiskStorage } from '../../lib/files/disk-storage.js';
import type { ByteRange, Storage } from '../../lib/files/storage.js';
import { createErrorMiddleware } from '../../lib/http/error-middleware.js';
import { formatContentDisposition, sendStoredFile, STORED_FILE_CSP } from '../../lib/http/send-stored-file.js';
import type { Logger } from '../../lib/logger.js';

const CACHE_CONTROL = 'public, max-age=604800';
/** 1000 bytes covering every byte value, so an off-by-one in a range shows in the content. */
const SAMPLE = Buffer.from(Array.from({ length: 1000 }, (_, i) => (i * 7 + 3) % 256));
const BIG_SIZE = 20 * 1024 * 1024;

let parent: string;
let storage: DiskStorage;
let server: Server;
let baseUrl: string;
/**
 * The same silent, remembering logger as createMemoryLogger (spec/support/test-app.ts), defined
 * here because importing test-app.ts pulls in the whole router, and this suite tests one function.
 */
const logger = ((): Logger & { lines: string[] } => {
  const lines: string[] = [];
  const log = (message: string) => void lines.push(message);
  return { lines, error: log, warn: log, info: log };
})();
/** Every `read` the served storage was asked for, and the streams it returned. */
const reads: Array<{ key: string; range?: ByteRange; stream: Readable }> = [];
/** What `onBodyError` was told. */
const bodyErrors: unknown[] = [];

type Mode = 'record' | 'reject' | 'break-mid-body' | 'longer' | 'shorter';
/** Chunks of 1,000 bytes the `longer` source produced before it was stopped (it would go on for 10 MB). */
let longerChunksPushed = 0;

/** Wraps the disk storage so tests can see which streams were opened, or make reads fail. */
function wrapStorage(mode: Mode): Storage {
  return {
    ...storage,
    async read(key: string, range?: ByteRange): Promise<Readable> {
      if (mode === 'reject') throw new Error('EIO: the disk is on fire (secret detail)');
      if (mode === 'longer' || mode === 'shorter') {
        // An adapter whose object changed between stat and read: endless bytes, or too few.
        longerChunksPushed = 0;
        const stream = new Readable({
          read() {
            if (mode === 'shorter') {
              this.push(SAMPLE.subarray(0, 10));
              this.push(null);
              return;
            }
            longerChunksPushed += 1;
            this.push(SAMPLE);
            if (longerChunksPushed > 10_000) this.push(null);
          },
        });
        reads.push({ key, range, stream });
        return stream;
      }
      if (mode === 'break-mid-body') {
        let sent = false;
        const stream = new Readable({
          read() {
            if (sent) return;
            sent = true;
            this.push(SAMPLE.subarray(0, 100));
            setTimeout(() => this.destroy(new Error('disk vanished mid-read')), 20);
          },
        });
        reads.push({ key, range, stream });
        return stream;
      }
      const stream = await storage.read(key, range);
      reads.push({ key, range, stream });
      return stream;
    },
  };
}

async function writeObject(key: string, bytes: Buffer): Promise<void> {
  await storage.write(key, Readable.from([bytes]));
}

beforeAll(async () => {
  parent = await fs.mkdtemp(path.join(os.tmpdir(), 'rb-send-file-'));
  storage = diskStorage({ root: path.join(parent, 'files'), fsync: false });
  await writeObject('c/r/sample.bin', SAMPLE);
  await writeObject('c/r/empty.bin', Buffer.alloc(0));
  for (const name of ['photo.png', 'doc.pdf', 'icon.svg', 'page.html', 'notes.txt', 'README', 'song.mp3', 'clip.mp4', 'data.xml', 'app.js']) {
    await writeObject(`c/r/${name}`, SAMPLE.subarray(0, 10));
  }
  await writeObject('c/r/big.bin', randomBytes(BIG_SIZE));

  const app = express();
  app.get('/:mode/:name', async (req, res) => {
    const mode = req.params.mode as Mode;
    const name = typeof req.query.name === 'string' ? req.query.name : req.params.name!;
    await sendStoredFile(req, res, {
      storage: wrapStorage(mode),
      key: `c/r/${req.params.name}`,
      fileName: name,
      contentType: typeof req.query.type === 'string' ? req.query.type : undefined,
      download: req.query.download === '1',
      cacheControl: CACHE_CONTROL,
      onBodyError: (error) => void bodyErrors.push(error),
    });
  });
  app.use(createErrorMiddleware(logger));
  server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await fs.rm(parent, { recursive: true, force: true });
});

afterEach(() => {
  reads.length = 0;
  bodyErrors.length = 0;
});

/** Collects the body as raw bytes whatever the Content-Type, so binary content compares exactly. */
function collectBytes(response: unknown, callback: (err: Error | null, body: Buffer) => void): void {
  const res = response as IncomingMessage; // superagent hands the Node response to a custom parser
  const chunks: Buffer[] = [];
  res.on('data', (chunk: Buffer) => chunks.push(chunk));
  res.on('end', () => callback(null, Buffer.concat(chunks)));
}

async function fetchFile(url: string, options: { method?: 'get' | 'head'; headers?: Record<string, string> } = {}) {
  let request = supertest(baseUrl)[options.method ?? 'get'](url);
  for (const [name, value] of Object.entries(options.headers ?? {})) request = request.set(name, value);
  const res = await request.buffer(true).parse(collectBytes);
  // superagent skips the parser when there is no body to read (HEAD, 304).
  const body = Buffer.isBuffer(res.body) ? res.body : Buffer.alloc(0);
  return { status: res.status, headers: res.headers as Record<string, string | undefined>, body };
}

/** Error bodies may carry Express's own weak ETag of the JSON, but never the file's (strong) one. */
function expectNoFileValidators(headers: Record<string, string | undefined>): void {
  expect(headers.etag ?? '').not.toMatch(/^"/);
  expect(headers['last-modified']).toBeUndefined();
}

function readJson(body: Buffer): unknown {
  return JSON.parse(body.toString('utf8'));
}

describe('full responses', () => {
  test('GET sends the exact bytes with type, length, validators and security headers', async () => {
    const info = (await storage.stat('c/r/sample.bin'))!;
    const res = await fetchFile('/record/sample.bin');
    expect(res.status).toBe(200);
    expect(res.body.equals(SAMPLE)).toBe(true);
    expect(res.headers['content-type']).toBe('application/octet-stream');
    expect(res.headers['content-length']).toBe('1000');
    expect(res.headers['accept-ranges']).toBe('bytes');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['content-security-policy']).toBe(STORED_FILE_CSP);
    expect(STORED_FILE_CSP).toContain("default-src 'none'");
    expect(STORED_FILE_CSP).toContain('sandbox');
    expect(res.headers['cache-control']).toBe(CACHE_CONTROL);
    expect(res.headers['last-modified']).toBe(info.modified.toUTCString());
    expect(res.headers.etag).toMatch(/^"3e8-[0-9a-f]+-[A-Za-z0-9_-]{12}"$/);
    expect(res.headers['content-disposition']).toBe('attachment; filename="sample.bin"');
    expect(res.headers['content-range']).toBeUndefined();
    expect(reads).toHaveLength(1);
  });

  test('the ETag differs between keys and changes when the object is replaced', async () => {
    await writeObject('c/r/replaced.bin', Buffer.from('first version'));
    const first = await fetchFile('/record/replaced.bin', { method: 'head' });
    const other = await fetchFile('/record/sample.bin', { method: 'head' });
    await new Promise((resolve) => setTimeout(resolve, 15));
    await writeObject('c/r/replaced.bin', Buffer.from('second version, longer'));
    const second = await fetchFile('/record/replaced.bin');
    expect(first.headers.etag).not.toBe(other.headers.etag);
    expect(second.headers.etag).not.toBe(first.headers.etag);
    expect(second.body.toString()).toBe('second version, longer');
  });

  test('HEAD answers the same headers with no body and never opens the object', async () => {
    const get = await fetchFile('/record/sample.bin');
    reads.length = 0;
    const head = await fetchFile('/record/sample.bin', { method: 'head' });
    expect(head.status).toBe(200);
    expect(head.body.length).toBe(0);
    for (const name of ['content-type', 'content-length', 'etag', 'last-modified', 'cache-control', 'content-disposition', 'content-security-policy', 'x-content-type-options', 'accept-ranges']) {
      expect([name, head.headers[name]]).toEqual([name, get.headers[name]]);
    }
    expect(reads).toHaveLength(0);
  });

  test('HEAD with a Range answers 206 headers without a body', async () => {
    const res = await fetchFile('/record/sample.bin', { method: 'head', headers: { Range: 'bytes=10-19' } });
    expect(res.status).toBe(206);
    expect(res.headers['content-range']).toBe('bytes 10-19/1000');
    expect(res.headers['content-length']).toBe('10');
    expect(res.body.length).toBe(0);
    expect(reads).toHaveLength(0);
  });

  test('an empty file is a 200 with Content-Length 0; a Range on it is a 416', async () => {
    const res = await fetchFile('/record/empty.bin');
    expect(res.status).toBe(200);
    expect(res.headers['content-length']).toBe('0');
    expect(res.body.length).toBe(0);
    const ranged = await fetchFile('/record/empty.bin', { headers: { Range: 'bytes=0-' } });
    expect(ranged.status).toBe(416);
    expect(ranged.headers['content-range']).toBe('bytes */0');
    const suffix = await fetchFile('/record/empty.bin', { headers: { Range: 'bytes=-10' } });
    expect(suffix.status).toBe(416);
  });

  test('a missing key is a 404 with the JSON error body and no file headers', async () => {
    const res = await fetchFile('/record/nope.png');
    expect(res.status).toBe(404);
    expect(readJson(res.body)).toEqual({ status: 404, message: "The requested file wasn't found.", data: {} });
    expect(res.headers['content-disposition']).toBeUndefined();
    expect(res.headers['cache-control']).toBeUndefined();
    expectNoFileValidators(res.headers);
  });
});

describe('ranges', () => {
  test.each([
    ['bytes=0-99', 0, 99],
    ['bytes=900-', 900, 999],
    ['bytes=-100', 900, 999],
    ['bytes=0-0', 0, 0],
    ['bytes=999-999', 999, 999],
    ['bytes=990-5000', 990, 999],
    ['bytes=-5000', 0, 999], // a suffix longer than the file is the whole file (RFC 9110)
    ['bytes=0-99999999999999999999999999', 0, 999],
    [`bytes=0-${Number.MAX_SAFE_INTEGER}`, 0, 999],
    ['BYTES = 5 - 9', 5, 9],
  ])('%s is a 206 with bytes %i-%i', async (range, start, end) => {
    const res = await fetchFile('/record/sample.bin', { headers: { Range: range } });
    expect(res.status).toBe(206);
    expect(res.headers['content-range']).toBe(`bytes ${start}-${end}/1000`);
    expect(res.headers['content-length']).toBe(String(end - start + 1));
    expect(res.body.equals(SAMPLE.subarray(start, end + 1))).toBe(true);
    expect(res.headers.etag).toBeDefined();
    expect(res.headers['cache-control']).toBe(CACHE_CONTROL);
  });

  test.each([
    'bytes=1000-',
    'bytes=1000-2000',
    'bytes=-0',
    `bytes=${Number.MAX_SAFE_INTEGER}-`,
    'bytes=99999999999999999999999999-',
  ])('%s is a 416 with Content-Range and the JSON error body', async (range) => {
    const res = await fetchFile('/record/sample.bin', { headers: { Range: range } });
    expect(res.status).toBe(416);
    expect(res.headers['content-range']).toBe('bytes */1000');
    expect(readJson(res.body)).toEqual({ status: 416, message: 'The requested range is not satisfiable.', data: {} });
    expect(res.headers['cache-control']).toBeUndefined();
    expectNoFileValidators(res.headers);
    expect(res.headers['content-disposition']).toBeUndefined();
    expect(reads).toHaveLength(0);
  });

  test('numbers too long for a double (Infinity) neither crash nor mislead', async () => {
    const nines = '9'.repeat(400);
    const suffix = await fetchFile('/record/sample.bin', { headers: { Range: `bytes=-${nines}` } });
    expect(suffix.status).toBe(206);
    expect(suffix.headers['content-range']).toBe('bytes 0-999/1000');
    expect(suffix.body.equals(SAMPLE)).toBe(true);
    const open = await fetchFile('/record/sample.bin', { headers: { Range: `bytes=10-${nines}` } });
    expect(open.status).toBe(206);
    expect(open.headers['content-range']).toBe('bytes 10-999/1000');
    const past = await fetchFile('/record/sample.bin', { headers: { Range: `bytes=${nines}-${nines}9` } });
    expect(past.status).toBe(416);
    expect(past.headers['content-range']).toBe('bytes */1000');
  });

  test.each([
    'bytes=abc',
    'bytes=',
    'bytes=-',
    'bytes=5-2',
    'bytes=1-2-3',
    'bytes=0x10-20',
    'bytes=-1-5',
    'items=0-5',
    'bytes 0-5',
    '0-5',
    'bytes=0-1,5-6',
    'bytes=0-1, 1000-2000',
    'bytes=0-99,-100',
  ])('%s is ignored: 200 with the whole file', async (range) => {
    const res = await fetchFile('/record/sample.bin', { headers: { Range: range } });
    expect(res.status).toBe(200);
    expect(res.headers['content-range']).toBeUndefined();
    expect(res.body.equals(SAMPLE)).toBe(true);
  });
});

describe('conditional requests', () => {
  let etag: string;
  let lastModified: string;

  beforeAll(async () => {
    const res = await fetchFile('/record/sample.bin', { method: 'head' });
    etag = res.headers.etag!;
    lastModified = res.headers['last-modified']!;
  });

  test.each([
    ['the exact ETag', () => etag],
    ['a list holding it', () => `"nope", ${etag},"other"`],
    ['a list without spaces', () => `"nope",${etag}`],
    ['*', () => '*'],
    ['its weak form', () => `W/${etag}`],
  ])('If-None-Match with %s is a 304 with no body', async (_label, value) => {
    const res = await fetchFile('/record/sample.bin', { headers: { 'If-None-Match': value() } });
    expect(res.status).toBe(304);
    expect(res.body.length).toBe(0);
    expect(res.headers.etag).toBe(etag);
    expect(res.headers['cache-control']).toBe(CACHE_CONTROL);
    expect(reads).toHaveLength(0);
  });

  test('If-None-Match with other tags is a 200', async () => {
    const res = await fetchFile('/record/sample.bin', { headers: { 'If-None-Match': '"nope", W/"other"' } });
    expect(res.status).toBe(200);
    expect(res.body.equals(SAMPLE)).toBe(true);
  });

  test('If-Modified-Since at or after Last-Modified is a 304; before is a 200', async () => {
    const same = await fetchFile('/record/sample.bin', { headers: { 'If-Modified-Since': lastModified } });
    expect(same.status).toBe(304);
    expect(same.body.length).toBe(0);
    const later = await fetchFile('/record/sample.bin', { headers: { 'If-Modified-Since': new Date(Date.parse(lastModified) + 60_000).toUTCString() } });
    expect(later.status).toBe(304);
    const earlier = await fetchFile('/record/sample.bin', { headers: { 'If-Modified-Since': new Date(Date.parse(lastModified) - 60_000).toUTCString() } });
    expect(earlier.status).toBe(200);
    expect(earlier.body.equals(SAMPLE)).toBe(true);
    const garbage = await fetchFile('/record/sample.bin', { headers: { 'If-Modified-Since': 'not a date' } });
    expect(garbage.status).toBe(200);
  });

  test('If-None-Match takes precedence over If-Modified-Since', async () => {
    const res = await fetchFile('/record/sample.bin', { headers: { 'If-None-Match': '"nope"', 'If-Modified-Since': lastModified } });
    expect(res.status).toBe(200);
  });

  test('a 304 wins over a Range', async () => {
    const res = await fetchFile('/record/sample.bin', { headers: { 'If-None-Match': etag, Range: 'bytes=5000-' } });
    expect(res.status).toBe(304);
  });

  test('If-Range with the current ETag or date applies the Range', async () => {
    const byTag = await fetchFile('/record/sample.bin', { headers: { Range: 'bytes=0-9', 'If-Range': etag } });
    expect(byTag.status).toBe(206);
    expect(byTag.body.equals(SAMPLE.subarray(0, 10))).toBe(true);
    const byDate = await fetchFile('/record/sample.bin', { headers: { Range: 'bytes=0-9', 'If-Range': lastModified } });
    expect(byDate.status).toBe(206);
  });

  test.each([
    ['another ETag', () => '"other"'],
    ['the weak form of the ETag', () => `W/${etag}`],
    ['an older date', () => new Date(Date.parse(lastModified) - 1000).toUTCString()],
    ['garbage', () => 'yesterday'],
  ])('If-Range with %s sends the whole file (200)', async (_label, value) => {
    const res = await fetchFile('/record/sample.bin', { headers: { Range: 'bytes=0-9', 'If-Range': value() } });
    expect(res.status).toBe(200);
    expect(res.headers['content-range']).toBeUndefined();
    expect(res.body.equals(SAMPLE)).toBe(true);
  });

  test('If-Range also voids an unsatisfiable Range', async () => {
    const res = await fetchFile('/record/sample.bin', { headers: { Range: 'bytes=5000-', 'If-Range': '"other"' } });
    expect(res.status).toBe(200);
  });
});

describe('Content-Type and Content-Disposition', () => {
  test.each([
    ['photo.png', 'image/png', 'inline'],
    ['doc.pdf', 'application/pdf', 'inline'],
    ['song.mp3', 'audio/mpeg', 'inline'],
    ['clip.mp4', 'video/mp4', 'inline'],
    ['icon.svg', 'image/svg+xml', 'attachment'],
    ['page.html', 'text/html', 'attachment'],
    ['data.xml', 'text/xml', 'attachment'],
    ['app.js', 'text/javascript', 'attachment'],
    ['notes.txt', 'text/plain', 'attachment'],
    ['README', 'application/octet-stream', 'attachment'],
  ])('%s is served as %s, %s', async (name, type, disposition) => {
    const res = await fetchFile(`/record/${name}`);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe(type);
    expect(res.headers['content-disposition']).toBe(`${disposition}; filename="${name}"`);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['content-security-policy']).toBe(STORED_FILE_CSP);
  });

  test('the type comes from the name, never from the bytes', async () => {
    await writeObject('c/r/looks-like-html.png', Buffer.from('<html><script>alert(1)</script></html>'));
    const res = await fetchFile('/record/looks-like-html.png');
    expect(res.headers['content-type']).toBe('image/png');
  });

  test('download=1 forces attachment for an inline type', async () => {
    const res = await fetchFile('/record/photo.png?download=1');
    expect(res.headers['content-disposition']).toBe('attachment; filename="photo.png"');
    expect(res.headers['content-type']).toBe('image/png');
  });

  test('an explicit contentType (thumbnails) wins over the extension and decides the disposition', async () => {
    const webp = await fetchFile('/record/photo.png?type=image/webp');
    expect(webp.headers['content-type']).toBe('image/webp');
    expect(webp.headers['content-disposition']).toBe('inline; filename="photo.png"');
    const html = await fetchFile('/record/photo.png?type=text/html');
    expect(html.headers['content-disposition']).toBe('attachment; filename="photo.png"');
  });

  test('a non-ASCII name gets an ASCII fallback and an RFC 5987 filename*', async () => {
    const name = 'résumé 日本.pdf';
    const res = await fetchFile(`/record/doc.pdf?name=${encodeURIComponent(name)}`);
    const header = res.headers['content-disposition']!;
    expect(header).toBe(`inline; filename="r_sum_ __.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%E6%97%A5%E6%9C%AC.pdf`);
    expect(decodeURIComponent(header.split("UTF-8''")[1]!)).toBe(name);
  });

  test('quotes, backslashes, percent signs and CR/LF cannot break the header', async () => {
    const name = 'a"b\\c%41\r\nX-Injected: 1\r\n.txt';
    const res = await fetchFile(`/record/notes.txt?name=${encodeURIComponent(name)}`);
    expect(res.status).toBe(200);
    expect(res.headers['x-injected']).toBeUndefined();
    const header = res.headers['content-disposition']!;
    expect(header).toBe(`attachment; filename="a_b_c_41X-Injected: 1.txt"; filename*=UTF-8''a%22b%5Cc%2541X-Injected%3A%201.txt`);
    expect(decodeURIComponent(header.split("UTF-8''")[1]!)).toBe('a"b\\c%41X-Injected: 1.txt');
  });

  test('formatContentDisposition never throws and never emits a bare quote or control character', () => {
    const names = ['', '\r\n', '"', '\\', '\ud800lone.png', "it's (1).png", '\u0085next', 'x'.repeat(300)];
    for (const fileName of names) {
      const value = formatContentDisposition({ type: 'attachment', fileName });
      expect(value).toMatch(/^attachment; filename="[\x20\x21\x23-\x5b\x5d-\x7e]+"(; filename\*=UTF-8''[A-Za-z0-9!#$&+\-.^_`|~%]+)?$/);
    }
    expect(formatContentDisposition({ type: 'inline', fileName: '' })).toBe('inline; filename="file"');
    expect(formatContentDisposition({ type: 'inline', fileName: "it's (1).png" })).toBe(`inline; filename="it's (1).png"`);
    expect(formatContentDisposition({ type: 'inline', fileName: '\ud800.png' })).toBe(`inline; filename="_.png"; filename*=UTF-8''%EF%BF%BD.png`);
  });
});

describe('failures while sending', () => {
  test('a storage read that rejects before the headers is a generic 500 JSON body, logged', async () => {
    logger.lines.length = 0;
    const res = await fetchFile('/reject/sample.bin');
    expect(res.status).toBe(500);
    expect(readJson(res.body)).toEqual({ status: 500, message: 'Something went wrong while processing your request.', data: {} });
    expect(res.body.toString()).not.toContain('on fire');
    expect(res.headers['content-disposition']).toBeUndefined();
    expect(res.headers['cache-control']).toBeUndefined();
    expectNoFileValidators(res.headers);
    // Logged by method and route, never the path (here no route of the router's dispatch matched it).
    expect(logger.lines).toContain('GET (no route) failed');
    expect(logger.lines.some((line) => line.includes('/reject/sample.bin'))).toBe(false);
  });

  test('a small object (up to 64 KiB, read whole before sending) whose read fails midway is a 500 JSON body, logged, not a cut connection', async () => {
    logger.lines.length = 0;
    const res = await fetchFile('/break-mid-body/sample.bin');
    expect(res.status).toBe(500);
    expect(readJson(res.body)).toEqual({ status: 500, message: 'Something went wrong while processing your request.', data: {} });
    expect(res.headers['content-disposition']).toBeUndefined();
    expectNoFileValidators(res.headers);
    expect(logger.lines).toContain('GET (no route) failed');
    expect(reads[0]!.stream.destroyed).toBe(true);
  });

  test('a small object whose storage delivers more or fewer bytes than stat said is a 500, and no more than its size is read', async () => {
    for (const mode of ['longer', 'shorter']) {
      logger.lines.length = 0;
      reads.length = 0;
      const res = await fetchFile(`/${mode}/sample.bin`);
      expect(res.status).toBe(500);
      expect(readJson(res.body)).toEqual({ status: 500, message: 'Something went wrong while processing your request.', data: {} });
      expectNoFileValidators(res.headers);
      expect(logger.lines).toContain('GET (no route) failed');
      // The long source was stopped soon after it went past the 1,000 bytes stat reported
      // (a few chunks of read-ahead), not read to its 10 MB end.
      if (mode === 'longer') expect(longerChunksPushed).toBeLessThan(50);
    }
  });

  test('a storage stream error mid-body of a large object cuts the connection, is reported, and the server keeps serving', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const outcome = await new Promise<{ status: number; received: number; complete: boolean }>((resolve, reject) => {
        const req = http.get(`${baseUrl}/break-mid-body/big.bin`, (res) => {
          let received = 0;
          res.on('data', (chunk: Buffer) => (received += chunk.length));
          res.on('error', () => undefined);
          res.on('close', () => resolve({ status: res.statusCode!, received, complete: res.complete }));
        });
        req.on('error', reject);
      });
      expect(outcome.status).toBe(200);
      expect(outcome.received).toBe(100);
      expect(outcome.complete).toBe(false);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(bodyErrors).toHaveLength(1);
      expect((bodyErrors[0] as Error).message).toBe('disk vanished mid-read');
      expect(reads[0]!.stream.destroyed).toBe(true);

      const next = await fetchFile('/record/sample.bin');
      expect(next.status).toBe(200);
      expect(next.body.equals(SAMPLE)).toBe(true);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  test('a client aborting a 20 MB download releases the storage stream and its file handle', async () => {
    const file = realpathSync(path.join(storage.root, 'c', 'r', 'big.bin'));
    const baseline = countOpenHandles(file);
    expect(baseline).toBe(0);
    let openWhileDownloading = -1;
    let contentLength: string | undefined;
    await new Promise<void>((resolve, reject) => {
      const req = http.get(`${baseUrl}/record/big.bin`, (res) => {
        contentLength = res.headers['content-length'];
        res.once('data', () => {
          openWhileDownloading = countOpenHandles(file);
          req.destroy();
          resolve();
        });
      });
      req.on('error', (error) => {
        if (openWhileDownloading < 0) reject(error);
      });
    });
    expect(contentLength).toBe(String(BIG_SIZE));
    // The handle was really open (the test measures something), then goes away.
    expect(openWhileDownloading).toBe(1);
    await waitFor(() => reads[0]?.stream.destroyed === true && countOpenHandles(file) === 0);
    expect(reads[0]!.stream.destroyed).toBe(true);
    expect(countOpenHandles(file)).toBe(0);
    expect(bodyErrors).toEqual([]); // a client leaving is not a storage error

    const next = await fetchFile('/record/sample.bin', { headers: { Range: 'bytes=0-1' } });
    expect(next.status).toBe(206);
  });
});

/** How many of this process's file descriptors point at `file` (Linux /proc). */
function countOpenHandles(file: string): number {
  let count = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`) === file) count++;
    } catch {
      // closed while we looked
    }
  }
  return count;
}

async function waitFor(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
