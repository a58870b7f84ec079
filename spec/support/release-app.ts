import type { AddressInfo } from 'node:net';
import express from 'express';
import supertest from 'supertest';
import { createAppServer, createRecordsRouter, type RecordsRouter } from '../../lib/index.js';
import type { RecordsRouterOptions } from '../../lib/options.js';
import { createMemoryLogger, TEST_FILE_TOKEN_SECRET } from './test-app.js';
import type { TestDatabase } from './test-database.js';

/** One release's router on a database it shares with the releases before and after it. */
export interface StartedRelease {
  readonly router: RecordsRouter;
  /** Requests to the listening server; the router is mounted at `/backend`. */
  readonly http: supertest.Agent;
  readonly logger: ReturnType<typeof createMemoryLogger>;
  /** Stops the server, then closes the router. */
  close(): Promise<void>;
}

/**
 * A router of one release on the shared database and data folder, behind a listening server,
 * not awaited: the migration suites check that `ready` rejects as often as that it resolves.
 */
export async function startRelease(db: TestDatabase, dataDir: string, options: Omit<RecordsRouterOptions, 'database' | 'dataDir'>): Promise<StartedRelease> {
  const logger = createMemoryLogger();
  const router = createRecordsRouter({ logger, fileSweep: false, fileTokenSecret: TEST_FILE_TOKEN_SECRET, thumbnailWorkers: 1, ...options, dataDir, database: db.db });
  const app = express();
  app.use('/backend', router);
  const server = createAppServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    router,
    logger,
    http: supertest.agent(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await router.close();
    },
  };
}

/** The columns of `table` in the test's schema, name to information_schema data_type. */
export async function columnsOf(db: TestDatabase, table: string): Promise<Record<string, string>> {
  const rows: { column_name: string; data_type: string }[] = await db.db.select('column_name', 'data_type').from('information_schema.columns').whereRaw('table_schema = current_schema()').where({ table_name: table });
  return Object.fromEntries(rows.map((row) => [row.column_name, row.data_type]));
}
