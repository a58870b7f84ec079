#!/usr/bin/env node
import { parseArgs } from 'node:util';
import express from 'express';
import { createRecordsRouter } from '../router.js';
import { embeddedDatabaseDir, openEmbeddedDatabase } from '../db/open-embedded-database.js';
import { resolveOptions } from '../options.js';
import { planDatabaseSync, syncDatabaseSchema } from '../db/sync-database-schema.js';
import { buildSchemaRegistry } from '../schema/collection-schema.js';
import { loadConfig } from './load-config.js';

const USAGE = `Usage:
  recordbase serve   [--config recordbase.config.js] [--port 8090]
  recordbase migrate [--config recordbase.config.js] [--dry-run]

The config file is a JavaScript module whose default export is the options object of
createRecordsRouter (see docs/configuration.md).`;

async function serve(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { config: { type: 'string' }, port: { type: 'string', default: process.env.PORT ?? '8090' } } });
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`--port must be a port number, got "${values.port}"`);
  const router = createRecordsRouter(await loadConfig(values.config));
  await router.ready;
  const app = express();
  app.disable('x-powered-by');
  app.use('/', router);
  const server = app.listen(port, () => {
    const address = server.address();
    const actual = typeof address === 'object' && address ? address.port : port;
    console.log(`recordbase listening on http://127.0.0.1:${actual}/api/collections/{collection}/records`);
  });
  const stop = () => {
    server.close();
    void router.close().then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

async function migrate(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { config: { type: 'string' }, 'dry-run': { type: 'boolean', default: false } } });
  const options = resolveOptions(await loadConfig(values.config));
  const collections = buildSchemaRegistry(options.collections).collections;
  const db = options.database ?? openEmbeddedDatabase(embeddedDatabaseDir(options.dataDir));
  try {
    const plan = values['dry-run'] ? await planDatabaseSync(db, collections) : await syncDatabaseSchema(db, collections);
    if (plan.statements.length === 0) console.log('-- the database is up to date');
    for (const statement of plan.statements) console.log(`${statement};`);
    if (!values['dry-run'] && plan.statements.length > 0) console.log(`-- applied ${plan.statements.length} statement(s)`);
  } finally {
    await db.destroy();
  }
}

/** The `recordbase` executable (DESIGN.md section 8). */
async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command === 'serve') return serve(rest);
  if (command === 'migrate') return migrate(rest);
  console.error(USAGE);
  process.exitCode = command === undefined || command === '--help' || command === '-h' ? 0 : 2;
}

main(process.argv.slice(2)).catch((err: unknown) => {
  console.error(`recordbase: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
});
