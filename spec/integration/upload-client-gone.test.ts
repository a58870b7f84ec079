/**
 * A create with a file whose client leaves while the file is being stored: the insert is then
 * refused before it is sent (the request's statements stop once its client has gone), so nothing
 * was written and the stored file is removed at once. It used to be kept "for the sweep to
 * decide" with a warning that the commit's outcome was unknown (the bench saw dozens of those at
 * the end of each upload cell, and the files stayed until a sweep).
 */
import http from 'node:http';
import path from 'node:path';
import { diskStorage, type Storage } from '../../lib/index.js';
import { listFilesUnder, makePng } from '../support/file-fixtures.js';
import { createMemoryLogger, startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/** The disk storage, each write held once it is done (the file is stored) until the test lets it go. */
function gatedStorage(root: string) {
  const inner = diskStorage({ root });
  let entered!: () => void;
  const writing = new Promise<void>((resolve) => (entered = resolve));
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const storage: Storage = {
    ...inner,
    write: async (key, source, options) => {
      const result = await inner.write(key, source, options);
      entered();
      await released;
      return result;
    },
    adopt: async (key, file, options) => {
      const result = await inner.adopt!(key, file, options);
      entered();
      await released;
      return result;
    },
    read: (key, range) => inner.read(key, range),
    stat: (key) => inner.stat(key),
    delete: (key) => inner.delete(key),
    deletePrefix: (prefix) => inner.deletePrefix(prefix),
    list: (prefix) => inner.list(prefix),
  };
  return { storage, writing, release };
}

describe.each(testEngines())('a client that leaves while its upload is stored (%s)', (engine) => {
  let app: TestApp;
  let gate: ReturnType<typeof gatedStorage>;
  const logger = createMemoryLogger();

  beforeAll(async () => {
    const root = path.join(process.env.TMPDIR ?? '/tmp', `rb-gone-${process.pid}-${engine}`);
    gate = gatedStorage(root);
    app = await startTestApp(engine, {
      // No create rule: the create is the one autocommit insert, after the files are stored.
      collections: [{ name: 'docs', fields: [{ name: 'title', type: 'text' }, { name: 'cover', type: 'file', maxSelect: 1 }], rules: { list: '', view: '', create: '' } }],
      storage: gate.storage,
      logger,
    });
  }, 60_000);

  afterAll(async () => {
    await app?.close();
  });

  test('the insert is never sent, the stored file is removed and no unknown outcome is reported', async () => {
    const boundary = 'rbgoneboundary';
    const png = makePng(8, 8);
    const body = Buffer.concat([
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="title"\r\n\r\nleft early\r\n`),
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="cover"; filename="c.png"\r\nContent-Type: image/png\r\n\r\n`),
      png,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]);
    const request = http.request(`${app.baseUrl}/backend/api/collections/docs/records`, {
      method: 'POST',
      headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Content-Length': body.length, Authorization: 'token-alice' },
    });
    request.on('error', () => undefined);
    request.end(body);
    await gate.writing;
    request.destroy();
    // The server sees the close, then the write goes on and the insert is refused.
    await new Promise((resolve) => setTimeout(resolve, 200));
    gate.release();
    const deadline = Date.now() + 5_000;
    const storageRoot = path.join(process.env.TMPDIR ?? '/tmp', `rb-gone-${process.pid}-${engine}`);
    while (Date.now() < deadline && listFilesUnder(storageRoot).length > 0) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(listFilesUnder(storageRoot)).toEqual([]);
    const list = await app.http.get('/backend/api/collections/docs/records').set('Authorization', 'token-root');
    expect(list.status).toBe(200);
    expect(list.body.items.filter((item: { title?: string }) => item.title === 'left early')).toEqual([]);
    expect(logger.lines.filter((line) => line.includes('unknown outcome'))).toEqual([]);
  });
});
