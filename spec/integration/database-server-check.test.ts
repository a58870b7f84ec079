/**
 * Issue 43, part A, step 5: a hot standby given as `database` is refused at start with a message
 * that says so (before, `ready` rejected with the first write's driver error), while its primary
 * starts. The servers are a throwaway primary and a streaming replica (spec/support/replica.ts).
 * Citus is not installable here: its refusal is decided by refusalOfServer alone
 * (spec/unit/db/engine/check-database-connection.test.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import knexFactory, { type Knex } from 'knex';
import { createRecordsRouter, type RecordsRouter } from '../../lib/index.js';
import { startPrimaryWithReplica, type PrimaryWithReplica } from '../support/replica.js';

const TIMEOUT_MS = 90_000;
const collections = [{ name: 'notes', fields: [{ name: 'text', type: 'text' as const }] }];

let servers: PrimaryWithReplica;
const opened: { db: Knex; router: RecordsRouter; dataDir: string }[] = [];

beforeAll(async () => {
  servers = await startPrimaryWithReplica();
}, TIMEOUT_MS);

afterAll(async () => {
  for (const { db, router, dataDir } of opened) {
    await router.close();
    await db.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  }
  await servers?.destroy();
}, TIMEOUT_MS);

function routerOn(url: string): RecordsRouter {
  const db = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: 2 } });
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'rb-server-check-'));
  const router = createRecordsRouter({ collections, database: db, dataDir, fileSweep: false, realtime: false, logger: { error: () => undefined, warn: () => undefined, info: () => undefined } });
  opened.push({ db, router, dataDir });
  return router;
}

test('a hot standby as `database`: ready rejects saying it is a read-only standby; the primary starts', async () => {
  await expect(routerOn(servers.replica.url).ready).rejects.toThrow(/^The database given is a read-only standby \(pg_is_in_recovery\(\) is true\).*`database` must reach the primary/);
  await expect(routerOn(servers.primary.url).ready).resolves.toBeUndefined();
}, TIMEOUT_MS);
