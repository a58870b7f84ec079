/**
 * The gallery example: an Express app that mounts recordbase under /backend on the embedded
 * database, and serves one plain HTML page at / that uploads photos with fetch + FormData and
 * shows them as a grid of thumbnails.
 *
 *   npm run build && node dist/examples/gallery/server.js
 *
 * Environment: PORT (default 8091), RB_DATA_DIR (default ./rb_data_gallery).
 */
import type { AddressInfo } from 'node:net';
import express from 'express';
import { createAppServer, createRecordsRouter } from '../../lib/index.js';
import { galleryCollections } from './collections.js';

const MOUNT = '/backend';

const app = express();
app.disable('x-powered-by');
const records = createRecordsRouter({
  collections: galleryCollections,
  dataDir: process.env.RB_DATA_DIR ?? './rb_data_gallery',
});
app.use(MOUNT, records);
app.get('/', (_req, res) => {
  res.type('html').send(renderPage(`${MOUNT}/api`));
});

const port = Number(process.env.PORT ?? 8091);
// Made by createAppServer rather than app.listen: requests carry the app's prototypes from the
// start (docs/configuration.md). A listen error (a port in use) fails the gallery.
const server = createAppServer(app);
const failToListen = async (error: Error) => {
  console.error(`recordbase gallery: cannot listen on 127.0.0.1:${port}: ${error.message}`);
  await records.close();
  process.exit(1);
};
server.once('error', failToListen);
server.listen(port, '127.0.0.1', async () => {
  server.off('error', failToListen);
  await records.ready; // listening first makes a taken port fail at once; requests wait for ready
  const address = server.address() as AddressInfo;
  const base = `http://${address.address}:${address.port}`;
  console.log(`recordbase gallery on ${base}/ (API under ${base}${MOUNT}/api)`);
});

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    server.close();
    void records.close().then(() => process.exit(0));
  });
}

/**
 * The whole front end: no build step, no external scripts or styles. Record values are put in
 * the page with textContent and URL-encoded in links, never as HTML.
 */
function renderPage(api: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>recordbase gallery</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; padding: 0 1rem; color: #222; }
  form { display: flex; gap: .5rem; flex-wrap: wrap; align-items: center; margin-bottom: 1rem; }
  #status { min-height: 1.5em; color: #555; }
  #status.error { color: #b00020; }
  #grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(120px, 1fr)); gap: 1rem; }
  figure { margin: 0; text-align: center; }
  figure img { width: 100px; height: 100px; object-fit: cover; border-radius: 4px; background: #eee; }
  figcaption { font-size: .85rem; overflow-wrap: anywhere; }
</style>
</head>
<body>
<h1>Gallery</h1>
<form id="upload">
  <input name="title" placeholder="Title" maxlength="200">
  <input name="image" type="file" accept="image/png,image/jpeg,image/webp,image/gif" required>
  <button>Upload</button>
</form>
<p id="status"></p>
<div id="grid"></div>
<script>
  const api = ${JSON.stringify(api)};
  const form = document.getElementById('upload');
  const statusLine = document.getElementById('status');
  const grid = document.getElementById('grid');

  function fileUrl(record, query) {
    return api + '/files/' + encodeURIComponent(record.collectionId) + '/' + encodeURIComponent(record.id) + '/' +
      encodeURIComponent(record.image) + (query || '');
  }

  function showStatus(text, isError) {
    statusLine.textContent = text;
    statusLine.className = isError ? 'error' : '';
  }

  // Every error has the body {status, message, data}; a 422 names the failing fields in data.
  function describeError(body) {
    const fields = Object.keys(body.data || {}).map(function (name) { return name + ': ' + body.data[name].message; });
    return [body.message].concat(fields).join(' ');
  }

  function renderCard(record) {
    const link = document.createElement('a');
    link.href = fileUrl(record);
    const img = document.createElement('img');
    img.src = fileUrl(record, '?thumb=100x100');
    img.alt = record.title || record.image;
    img.loading = 'lazy';
    link.appendChild(img);
    const caption = document.createElement('figcaption');
    caption.textContent = record.title || '(untitled)';
    const figure = document.createElement('figure');
    figure.append(link, caption);
    return figure;
  }

  async function loadPhotos() {
    const res = await fetch(api + '/collections/photos/records?perPage=100&sort=-created');
    const body = await res.json();
    if (!res.ok) return showStatus(describeError(body), true);
    if (body.items.length === 0) {
      const empty = document.createElement('p');
      empty.textContent = 'No photos yet: upload one above.';
      return grid.replaceChildren(empty);
    }
    grid.replaceChildren.apply(grid, body.items.map(renderCard));
  }

  form.addEventListener('submit', async function (event) {
    event.preventDefault();
    showStatus('Uploading...', false);
    // One part per field: "title" as text, "image" as the file.
    const res = await fetch(api + '/collections/photos/records', { method: 'POST', body: new FormData(form) });
    const body = await res.json();
    if (!res.ok) return showStatus(describeError(body), true);
    form.reset();
    showStatus('Stored as ' + body.image, false);
    await loadPhotos();
  });

  loadPhotos().catch(function (err) { showStatus(String(err), true); });
</script>
</body>
</html>
`;
}
