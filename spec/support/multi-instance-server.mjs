// One recordbase instance of the multi-instance test, run as its own process by
// spec/support/multi-instance.ts: the built package (dist/) mounted at /backend on 127.0.0.1:0,
// as a host app would run it. Plain JavaScript so that it starts in a fraction of a second
// without a TypeScript toolchain.
//
// Its whole configuration comes as JSON in RB_INSTANCE_CONFIG:
// { databaseUrl, schema?, dataDir, collections, identities: {token: identity},
//   storage: { kind: 'disk', root } | { kind: 's3', bucket, prefix, client },
//   realtime?: the router's `realtime` option, passed through (left out: the default),
//   preparedStatements?: the router's option, passed through (left out: the default),
//   drainMs?: the router's option, passed through (left out: the default) }
// Without a schema the Knex sets no search_path (behind a pooler in transaction mode it would not
// follow the client anyway).
// No fileTokenSecret: instances must agree on the one kept in the database.
// Sends {port} over IPC once `ready` resolved, {error} if it rejected; exits when the parent goes.
// On the IPC message {shutdown: true} it stops as docs/deployment.md ("Rolling restarts") tells a
// host to: records.close() (refuse, drain, end the streams), then its own Knex destroyed (nothing
// of recordbase's runs on it any more), then server.close(), then exit 0.
import express from 'express';
import knex from 'knex';
import { createRecordsRouter, diskStorage } from '../../dist/lib/index.js';

const config = JSON.parse(process.env.RB_INSTANCE_CONFIG ?? 'null');
if (!config) throw new Error('RB_INSTANCE_CONFIG is not set');

async function openStorage(settings) {
  if (settings.kind === 'disk') return diskStorage({ root: settings.root });
  const { s3Storage } = await import('../../dist/lib/files/s3-storage.js');
  return s3Storage({ bucket: settings.bucket, prefix: settings.prefix, client: settings.client });
}

const database = knex({ client: 'pg', connection: config.databaseUrl, ...(config.schema ? { searchPath: [config.schema] } : {}), pool: { min: 0, max: 10 } });
const router = createRecordsRouter({
  collections: config.collections,
  database,
  dataDir: config.dataDir,
  storage: await openStorage(config.storage),
  auth: (token) => config.identities[token] ?? null,
  logger: { error: (...args) => console.error('[instance]', ...args), warn: () => undefined, info: () => undefined },
  fileSweep: false,
  thumbnailWorkers: 1,
  ...(config.realtime === undefined ? {} : { realtime: config.realtime }),
  ...(config.preparedStatements === undefined ? {} : { preparedStatements: config.preparedStatements }),
  ...(config.drainMs === undefined ? {} : { drainMs: config.drainMs }),
  ...(config.rateLimits === undefined ? {} : { rateLimits: config.rateLimits }),
});

try {
  await router.ready;
} catch (error) {
  process.send?.({ error: String(error?.message ?? error) });
  process.exit(1);
}
const app = express();
app.use('/backend', router);
const server = app.listen(0, '127.0.0.1', () => process.send?.({ port: server.address().port }));
process.on('disconnect', () => process.exit(0));
process.on('message', (message) => {
  if (message?.shutdown !== true) return;
  void (async () => {
    await router.close();
    await database.destroy();
    server.close(() => process.exit(0));
  })();
});
