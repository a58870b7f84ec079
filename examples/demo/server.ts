/**
 * The demo host app: an Express app that mounts recordbase under /backend, on the embedded
 * database in ./rb_data (no server needed), with the dashboard at /backend/_/. `npm start` runs it.
 */
import type { AddressInfo } from 'node:net';
import express from 'express';
import { createAppServer, createRecordsRouter, type BeforeCreateEvent, type Identity } from '../../lib/index.js';
import { demoCollections } from './collections.js';

// A stand-in for the host's real authentication: two fixed tokens, for local use only.
const demoTokens: Record<string, Identity> = {
  'demo-admin': { id: 'demoadmin000000', superuser: true },
  'demo-alice': { id: 'demoalice000000', name: 'Alice' },
};

/** A post's or comment's author is whoever creates it: clients cannot write in someone else's name. */
function makeCallerTheAuthor(e: BeforeCreateEvent): void {
  if (!e.identity?.superuser) e.data.author = e.identity?.id ?? '';
}

const app = express();
const records = createRecordsRouter({
  collections: demoCollections,
  dataDir: process.env.RB_DATA_DIR ?? './rb_data',
  auth: (token) => demoTokens[token] ?? null,
  dashboard: true,
  hooks: { posts: { beforeCreate: makeCallerTheAuthor }, comments: { beforeCreate: makeCallerTheAuthor } },
});
app.use('/backend', records);
app.get('/', (_req, res) => res.redirect('/backend/')); // the router's own page: what is where

const port = Number(process.env.PORT ?? 8090);
// Made by createAppServer rather than app.listen: requests carry the app's prototypes from the
// start (docs/configuration.md). A listen error (a port in use) fails the demo.
const server = createAppServer(app);
const failToListen = async (error: Error) => {
  console.error(`recordbase demo: cannot listen on 127.0.0.1:${port}: ${error.message}`);
  await records.close();
  process.exit(1);
};
server.once('error', failToListen);
server.listen(port, '127.0.0.1', async () => {
  server.off('error', failToListen);
  await records.ready; // listening first makes a taken port fail at once; requests wait for ready
  const address = server.address() as AddressInfo;
  const base = `http://${address.address}:${address.port}/backend`;
  await seedAlice(base); // Alice exists as a user record, so posts can point at her
  console.log(`recordbase demo listening on ${base}`);
  console.log(`Dashboard: ${base}/_/ (sign in with the superuser token demo-admin; local use only)`);
  console.log('Try:');
  console.log(`  curl -X POST ${base}/api/collections/posts/records -H 'Authorization: demo-alice' -H 'Content-Type: application/json' -d '{"title":"Hello"}'`);
  console.log(`  curl '${base}/api/collections/posts/records?perPage=10'`);
});

async function seedAlice(base: string): Promise<void> {
  const res = await fetch(`${base}/api/collections/users/records/demoalice000000`);
  if (res.status === 404) {
    await fetch(`${base}/api/collections/users/records`, {
      method: 'POST',
      headers: { Authorization: 'demo-admin', 'Content-Type': 'application/json' },
      body: JSON.stringify({ id: 'demoalice000000', name: 'Alice', email: 'alice@example.com' }),
    });
  }
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    server.close();
    void records.close().then(() => process.exit(0));
  });
}
