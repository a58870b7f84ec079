// A smoke of the SDK client suite for runtimes other than Node (issue 45): .ci/run runs it on Bun
// and Deno after the whole suite ran on Node 20 and 24. Plain JavaScript against the built
// package (dist/), as a host app on that runtime would run it: the embedded engine in a fresh
// dataDir, createAppServer, and the pocketbase SDK for a
// create, a list, a realtime event, a multipart upload, its download byte for byte and a
// thumbnail of the asked size. Exit code 0 and one line naming the runtime and every check, or an
// error naming the check that failed.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import PocketBase from 'pocketbase';
import { createAppServer, createRecordsRouter } from '../../dist/lib/index.js';
import { ThumbnailJimp } from '../../dist/lib/files/thumbnail-jimp.js';

// Node has no global EventSource (README); Deno has one; the README's fix for the others.
globalThis.EventSource ??= (await import('eventsource')).EventSource;

const runtime = globalThis.Bun ? `Bun ${globalThis.Bun.version}` : globalThis.Deno ? `Deno ${globalThis.Deno.version.deno}` : `Node ${process.version}`;
const passed = [];
function check(name, ok, detail) {
  if (!ok) throw new Error(`${runtime}: ${name} failed: ${detail}`);
  passed.push(name);
}
function within(ms, promise, what) {
  let timer;
  return Promise.race([promise, new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`${runtime}: ${what} did not happen within ${ms} ms`)), ms)))]).finally(() => clearTimeout(timer));
}

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'rb-runtime-smoke-'));
const records = createRecordsRouter({
  dataDir,
  collections: [{ name: 'notes', fields: [{ name: 'title', type: 'text' }, { name: 'cover', type: 'file' }], rules: { list: '', view: '', create: '', update: '', delete: '' } }],
  logger: { error: console.error, warn: console.warn, info() {} },
  fileSweep: false,
  thumbnailWorkers: 1,
});
const app = express();
app.use('/backend', records);
// As the docs advise every host. On Bun, createAppServer is http.createServer (its response
// classes broke realtime's stream there: lib/http/create-app-server.ts).
const server = createAppServer(app);
try {
  await within(120_000, records.ready, 'the embedded start');
  check('embedded engine', true);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const pb = new PocketBase(`http://127.0.0.1:${server.address().port}/backend`);

  let onEvent;
  const event = new Promise((resolve) => (onEvent = resolve));
  const unsubscribe = await pb.collection('notes').subscribe('*', (e) => onEvent(e));
  const created = await pb.collection('notes').create({ title: 'smoke' });
  check('create', created.title === 'smoke' && /^[a-z0-9]{15}$/.test(created.id), JSON.stringify(created));
  const seen = await within(15_000, event, 'the realtime create event');
  check('realtime event', seen.action === 'create' && seen.record.id === created.id, JSON.stringify(seen));
  await unsubscribe();

  const list = await pb.collection('notes').getList(1, 10);
  check('list', list.totalItems === 1 && list.items[0].id === created.id, JSON.stringify(list));

  const png = Buffer.from(await new ThumbnailJimp({ width: 64, height: 48, color: 0x3366ccff }).getBuffer('image/png'));
  const withFile = await pb.collection('notes').create({ title: 'file', cover: new File([png], 'cover.png', { type: 'image/png' }) });
  check('multipart create', /^cover_[a-z0-9]+\.png$/.test(withFile.cover), JSON.stringify(withFile));
  const download = await fetch(pb.files.getURL(withFile, withFile.cover));
  check('download', download.status === 200 && Buffer.from(await download.arrayBuffer()).equals(png), `status ${download.status}`);
  const thumb = await fetch(pb.files.getURL(withFile, withFile.cover, { thumb: '32x24' }));
  const image = thumb.status === 200 ? await ThumbnailJimp.read(Buffer.from(await thumb.arrayBuffer())) : undefined;
  check('thumbnail', image?.width === 32 && image?.height === 24, `status ${thumb.status}, ${image?.width}x${image?.height}`);
} finally {
  await new Promise((resolve) => (server.listening ? server.close(resolve) : resolve()));
  await records.close();
  rmSync(dataDir, { recursive: true, force: true });
}
console.log(`${runtime}: ${passed.join(', ')}: ok`);
