import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import supertest from 'supertest';
import { createAppServer, createRecordsRouter, type RecordsRouter } from '../../lib/index.js';
import type { RecordsRouterOptions } from '../../lib/options.js';
import type { Identity } from '../../lib/auth/identity.js';
import { openTestDatabase, type TestDatabase, type TestEngine } from './test-database.js';

/** Tokens the test auth() accepts, and the identities they stand for. */
export const TEST_IDENTITIES: Record<string, Identity> = {
  'token-alice': { id: 'aliceaaaaaaaaaa', name: 'Alice', role: 'editor' },
  'token-bob': { id: 'bobbbbbbbbbbbbb', name: 'Bob', role: 'reader' },
  'token-root': { id: 'rootrrrrrrrrrrr', superuser: true },
};

/** A host app on a real listening server (createAppServer) with the router mounted under /backend. */
export interface TestApp {
  readonly database: TestDatabase;
  readonly router: RecordsRouter;
  readonly server: Server;
  readonly baseUrl: string;
  /** The router's own temporary dataDir (its storage is `dataDir/storage` unless the test passed one). */
  readonly dataDir: string;
  /** supertest bound to the listening server. */
  readonly http: supertest.Agent;
  close(): Promise<void>;
}

/** A silent logger that remembers what it was told, so tests can assert on it. */
export function createMemoryLogger() {
  const lines: string[] = [];
  const log = (message: string) => void lines.push(message);
  return { lines, error: log, warn: log, info: log };
}

/** The file-token secret of test apps (a real router without one keeps a generated one in the database). */
export const TEST_FILE_TOKEN_SECRET = 'test-file-token-secret-0123456789abcdef';

/**
 * What an engine needs of a router's options. Through the pooler (`pgbouncer`, transaction mode,
 * PgBouncer 1.18): `preparedStatements: false`, and realtime's LISTEN on the database's direct URL
 * (`realtime.listen`), unless realtime is off or the test gave a listen of its own; as
 * docs/deployment.md ("Behind a pooler") tells a host to do. Suites that start routers of their
 * own (processes: multi-instance.ts) spread it into theirs.
 */
export function engineOptions<T extends Partial<RecordsRouterOptions>>(database: TestDatabase, options: T): T {
  if (database.engine !== 'pgbouncer') return options;
  const realtime = options.realtime === false ? false : { listen: database.directUrl!, ...options.realtime };
  return { preparedStatements: false, ...options, realtime };
}

/**
 * Starts a host app for one engine: isolated database, a temporary dataDir (so the default disk
 * storage and upload spool are private to the app and removed at close), router under /backend,
 * test auth (TEST_IDENTITIES), no file sweep, listening on an ephemeral port.
 */
export async function startTestApp(engine: TestEngine, options: Omit<RecordsRouterOptions, 'database'>): Promise<TestApp> {
  const database = await openTestDatabase(engine);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'rb-app-'));
  const router = createRecordsRouter({
    auth: (token) => TEST_IDENTITIES[token] ?? null,
    logger: createMemoryLogger(),
    dataDir,
    fileSweep: false,
    fileTokenSecret: TEST_FILE_TOKEN_SECRET,
    thumbnailWorkers: 1,
    ...engineOptions(database, options),
    database: database.db,
  });
  try {
    await router.ready;
  } catch (error) {
    // The caller gets no app to close: what was opened for it goes here (on pgbouncer, a whole database).
    await router.close().catch(() => undefined);
    await database.destroy();
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
  const app = express();
  app.use('/backend', router);
  // As the docs advise a host (docs/configuration.md, "Serving the app"); startSiblingRouter keeps Express's own app.listen.
  const server = createAppServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    database,
    router,
    server,
    baseUrl,
    dataDir,
    http: supertest.agent(baseUrl),
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await router.close();
      await database.destroy();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A router started beside a test app (see startSiblingRouter). */
export interface SiblingRouter {
  readonly http: supertest.Agent;
  close(): Promise<void>;
}

/**
 * Another router on the same database and dataDir (so the same files) as `app`, with other
 * options, on its own port: how a test tries other limits without a second database.
 */
export async function startSiblingRouter(app: TestApp, options: Omit<RecordsRouterOptions, 'database' | 'dataDir'>): Promise<SiblingRouter> {
  const router = createRecordsRouter({
    auth: (token) => TEST_IDENTITIES[token] ?? null,
    logger: createMemoryLogger(),
    fileSweep: false,
    fileTokenSecret: TEST_FILE_TOKEN_SECRET,
    thumbnailWorkers: 1,
    ...engineOptions(app.database, options),
    dataDir: app.dataDir,
    database: app.database.db,
  });
  await router.ready;
  const host = express();
  host.use('/backend', router);
  const server = await new Promise<Server>((resolve) => {
    const s = host.listen(0, '127.0.0.1', () => resolve(s));
  });
  return {
    http: supertest.agent(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await router.close();
    },
  };
}
