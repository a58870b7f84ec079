/**
 * The host app of the shared config: the router made from the very options module the
 * `recordbase` commands read (recordbase.config.ts), plus what only the app has (its own routes).
 * Run: npm run build && node dist/examples/shared-config/server.js   (PORT overrides 8092)
 */
import type { AddressInfo } from 'node:net';
import express from 'express';
import { createAppServer, createRecordsRouter } from '../../lib/index.js';
import options from './recordbase.config.js';

const app = express();
const records = createRecordsRouter(options);
app.use('/backend', records);
app.get('/', (_req, res) => res.redirect('/backend/'));

const server = createAppServer(app);
server.listen(Number(process.env.PORT ?? 8092), '127.0.0.1', async () => {
  await records.ready;
  const { port } = server.address() as AddressInfo;
  console.log(`shared-config example listening on http://127.0.0.1:${port}/backend`);
});

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    server.close();
    void records.close().then(() => process.exit(0));
  });
}
