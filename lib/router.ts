import express, { type Router } from 'express';
import type { Knex } from 'knex';
import { DOWNLOAD_SOURCES, HEADER_ONLY } from './auth/extract-token.js';
import { createFileTokens, loadFileTokenSecret, type FileTokens } from './auth/file-token.js';
import { configureSendPath } from './db/statements/statement-bounds.js';
import { checkDatabaseConnection, checkPrimaryServer } from './db/engine/check-database-connection.js';
import { embeddedDatabaseDir, openEmbeddedDatabase } from './db/engine/open-embedded-database.js';
import { realtimeSchema } from './db/realtime/realtime-schema.js';
import { RecordStore } from './db/record-store.js';
import { ReplicaReads, type ReplicaStatus } from './db/replica/replica-reads.js';
import { openSharedSetting } from './db/schema/settings-store.js';
import { FILE_TOKEN_SECRET_SETTING } from './db/shared-names.js';
import { syncDatabaseSchema } from './db/schema/sync-database-schema.js';
import { startFileSweeper } from './files/sweep-files.js';
import { createThumbnailCache, type ThumbnailCache } from './files/thumbnail-cache.js';
import { createThumbnailPool, type ThumbnailPool } from './files/thumbnail-pool.js';
import { createHealthRoute } from './http/api-fallback-routes.js';
import { DrainGate, refuseNewCallsWhenClosing } from './http/drain-gate.js';
import { DatabaseHealth } from './http/health-check.js';
import { migrateAtStart } from './migrations/run-migrations.js';
import { createBatchRoutes } from './http/batch-routes.js';
import { createDashboardRoutes } from './http/dashboard-routes.js';
import { createDispatch } from './http/dispatch.js';
import { createErrorMiddleware } from './http/error-middleware.js';
import { createFilesRoutes } from './http/files-routes.js';
import { createLandingPage } from './http/landing-page.js';
import { createOpenApiRoute } from './http/openapi-route.js';
import { createMultipartReader, removeStaleSpools } from './http/read-multipart.js';
import { createRealtimeRoutes } from './http/realtime-routes.js';
import { rateLimitsAdditions, startRateLimits, type RateLimits } from './http/rate-limits/start-rate-limits.js';
import { createRequestLog } from './http/request-log.js';
import { createRecordsRoutes } from './http/records-routes.js';
import { createAggregateRoutes } from './http/aggregate-routes.js';
import { createCallerResolver } from './http/resolve-caller.js';
import { createDownloadCallerResolver } from './http/resolve-download-caller.js';
import { RouteTable, type Route } from './http/route-table.js';
import { describeStartFailure, serveWhenReady } from './http/serve-when-ready.js';
import type { Logger } from './logger.js';
import { resolveOptions, type RecordsRouterOptions, type ResolvedOptions } from './options.js';
import { RealtimeHub } from './realtime/realtime-hub.js';
import { loadTelemetry } from './telemetry/telemetry-api.js';
import { registerGaugeSource } from './telemetry/telemetry-metrics.js';
import { traceStorage } from './telemetry/trace-storage.js';
import { createBackupService, type BackupService, type CreatedBackup } from './backups/backup-service.js';
import { createBackupRoutes } from './http/backup-routes.js';
import { compileCollections, completeCollections, type CompiledCollections } from './records/compile-collections.js';
import { createRecordsApi, type RecordsApiDeps } from './records/create-records-api.js';
import { createRecordsRuntime } from './records/records-runtime.js';
import type { RecordService, RecordServiceOptions } from './records/record-service.js';
import type { RecordsApi } from './records/records-api.js';

/** The router returned by createRecordsRouter: mount it anywhere, await `ready`, `close()` at shutdown. */
export interface RecordsRouter extends Router {
  /** Resolves once the schema is synced; rejects with the reason if initialisation failed. */
  readonly ready: Promise<void>;
  /**
   * The server API (docs/server-api.md): your own code reads and writes records through the same
   * rules, validation, files and hooks as HTTP. Calls made before `ready` wait for it.
   */
  readonly api: RecordsApi;
  /**
   * Writes a backup (docs/deployment.md, "Backups"): one `.tar.gz` in `backups.dir` with a
   * consistent snapshot of the embedded database and the storage's files (a storage that offers
   * `localPath`, as disk storage does); resolves with its key, size and manifest. One at a time;
   * waits for `ready`.
   */
  backup(options?: { name?: string }): Promise<CreatedBackup>;
  /**
   * Where reads go with `readReplica` (docs/deployment.md, "Read replicas"): the replica's state,
   * its lag's upper bound, the callers fenced to the primary, and reads counted by where they
   * went. Undefined without a replica, and before `ready`.
   */
  replicaStatus(): ReplicaStatus | undefined;
  /**
   * Drains, then releases what the router owns (docs/deployment.md, "Rolling restarts"): from its
   * first moment new requests (and server-API calls) answer 503 `draining` and the health check
   * 503; running requests get `drainMs` to finish, then are cut; then every realtime stream ends
   * and the embedded database, thumbnail workers and sweep timer are released. A database you
   * passed in stays open.
   */
  close(): Promise<void>;
}

/**
 * Creates the records-and-files router (docs/configuration.md). Synchronous: invalid options or
 * collection definitions throw here; the runtime opens behind `ready` (database, schema sync,
 * services), requests that arrive earlier wait for it, and if it fails every request answers 503
 * with the reason. The composition only: each part is built where its module says.
 */
export function createRecordsRouter(options: RecordsRouterOptions): RecordsRouter {
  const resolved = withTracedStorage(resolveOptions(options));
  const compiled = compileCollections(resolved.collections);
  const { logger } = resolved;
  const owned = new OwnedResources(resolved);
  const errorMiddleware = createErrorMiddleware(logger);
  const started = (async () => {
    const runtime = await openRuntime({ resolved, compiled, owned, apiFor: (unit) => createRecordsApi(depsOnceStarted, unit) });
    const routes = new RouteTable(buildRoutes(runtime, resolved));
    return { runtime, dispatch: createDispatch({ routes, limits: resolved.limits, errorMiddleware, logger, collectionName: (nameOrId) => runtime.compiled.registry.get(nameOrId)?.name }) };
  })();
  const ready = started.then(() => undefined);
  // The host may never await `ready`; a failed start must not become an unhandled rejection.
  ready.catch((err: unknown) => logger.error(`initialisation failed: ${err instanceof Error ? err.message : String(err)}`));

  const gate = new DrainGate();
  async function depsOnceStarted(): Promise<RecordsApiDeps> {
    try {
      return (await started).runtime.apiDeps;
    } catch (err) {
      throw describeStartFailure(err);
    }
  }

  const router = express.Router() as RecordsRouter;
  if (resolved.onRequest) router.use(createRequestLog(resolved.onRequest, logger));
  router.use(gate.handle);
  router.use(serveWhenReady(started.then((s) => s.dispatch), errorMiddleware));
  router.get('/', createLandingPage({ dashboard: resolved.dashboard, openapi: resolved.openapi, atAppRoot: 'next' }));
  Object.defineProperty(router, 'ready', { value: ready, enumerable: true });
  Object.defineProperty(router, 'api', { value: refuseNewCallsWhenClosing(createRecordsApi(depsOnceStarted), gate), enumerable: true });
  Object.defineProperty(router, 'replicaStatus', { value: () => owned.replica?.status(), enumerable: true });
  Object.defineProperty(router, 'backup', { value: (request?: { name?: string }) => started.then((s) => s.runtime.backups.create(request), (err: unknown) => Promise.reject(describeStartFailure(err))), enumerable: true });
  let closing: Promise<void> | undefined;
  router.close = () => {
    gate.refuse();
    return (closing ??= ready.catch(() => undefined).then(() => gate.drain(resolved.drainMs)).then(() => owned.release()));
  };
  return router;
}

/**
 * What the router owns and releases at close(): thumbnail workers (started on the first
 * thumbnail), the embedded database when it opened one, realtime and the sweep timer. Each is
 * recorded as the start opens it, so a start that failed half-way releases what it got to; a
 * database the host passed in stays open.
 */
class OwnedResources {
  readonly pool: ThumbnailPool | undefined;
  database?: Knex;
  hub?: RealtimeHub;
  sweeper?: { stop(): Promise<void> };
  replica?: ReplicaReads;
  rateLimits?: RateLimits;
  /** Removes this router's observable gauges (telemetry-metrics.ts). */
  stopGauges?: () => void;

  constructor(resolved: ResolvedOptions) {
    this.pool = resolved.thumbnail ? undefined : createThumbnailPool({ size: resolved.thumbnailWorkers });
  }

  async release(): Promise<void> {
    this.stopGauges?.();
    await this.rateLimits?.close();
    await this.hub?.close();
    await this.sweeper?.stop();
    await this.replica?.close();
    await this.pool?.close();
    await this.database?.destroy();
  }
}

/** What the routes are built on, once the runtime is open. */
interface Runtime {
  readonly compiled: CompiledCollections;
  readonly records: RecordService;
  readonly fileTokens: FileTokens;
  readonly thumbnails: ThumbnailCache;
  readonly hub?: RealtimeHub;
  /** The rate limits' counters, when `rateLimits` has rules: every route is guarded (docs/limits.md). */
  readonly rateLimits?: RateLimits;
  readonly backups: BackupService;
  /** What the server API works through (create-records-api.ts). */
  readonly apiDeps: RecordsApiDeps;
  /** What `GET /api/health` asks whether the database answers. */
  readonly health: DatabaseHealth;
}

/**
 * Opens the runtime, in order: the database (the host's, checked, or the embedded one), its
 * statement bounds, the pending migrations, the schema sync (realtime's objects with it), which also gives the view
 * collections their fields (the collections are then complete, and their rules compiled against
 * them), the file-token secret, stale upload spools removed, then the store and the services over
 * it, realtime and the file sweep.
 */
async function openRuntime(options: { resolved: ResolvedOptions; compiled: CompiledCollections; owned: OwnedResources; apiFor: RecordServiceOptions['apiFor'] }): Promise<Runtime> {
  const { resolved, owned } = options;
  const { logger, limits, storage } = resolved;
  await loadTelemetry();
  if (resolved.database) checkDatabaseConnection(resolved.database);
  if (resolved.database) await checkPrimaryServer(resolved.database);
  const database = resolved.database ?? (owned.database = openEmbeddedDatabase(embeddedDatabaseDir(resolved.dataDir), { log: createKnexLog(logger), onCreate: (message) => logger.info(message) }));
  configureSendPath(database, { fairness: { maxConnectionsPerClient: limits.maxConnectionsPerClient, maxWaitingPerClient: limits.maxWaitingPerClient }, preparedStatements: resolved.preparedStatements });
  if (resolved.migrations !== undefined) {
    await migrateAtStart(database, { option: resolved.migrations, services: { compiled: options.compiled, storage, logger, limits, tempDir: resolved.uploadTempDir } });
  }
  const synced = await syncDatabaseSchema(database, options.compiled.registry.collections, { additions: [realtimeSchema(resolved.realtime !== false), ...rateLimitsAdditions(resolved.rateLimits, resolved.database)], logger });
  const compiled = completeCollections(options.compiled, synced.views);
  const registry = compiled.registry;
  const secret = await loadFileTokenSecret({ secret: resolved.fileTokenSecret, shared: openSharedSetting(database, FILE_TOKEN_SECRET_SETTING), dataDir: resolved.dataDir, keyInDataDir: owned.database !== undefined });
  await removeStaleSpools(resolved.uploadTempDir);
  const store = new RecordStore(database);
  if (resolved.readReplica) {
    const replica = resolved.readReplica.database;
    checkDatabaseConnection(replica);
    configureSendPath(replica, { fairness: { maxConnectionsPerClient: limits.maxConnectionsPerClient, maxWaitingPerClient: limits.maxWaitingPerClient }, preparedStatements: resolved.preparedStatements });
    owned.replica = await ReplicaReads.start({ primary: database, settings: resolved.readReplica, logger });
  }
  const { service: records, apiDeps } = createRecordsRuntime({
    compiled,
    store,
    storage,
    hooks: resolved.hooks,
    logger,
    limits,
    multipartUpdate: resolved.multipartUpdate,
    tempDir: resolved.uploadTempDir,
    bounds: { statementTimeoutMs: limits.statementTimeoutMs, acquireTimeoutMs: limits.acquireTimeoutMs },
    apiFor: options.apiFor,
    replica: owned.replica,
  });
  const thumbnails = createThumbnailCache({
    storage,
    ...(owned.pool ? { renderBatch: owned.pool.renderBatch } : { render: resolved.thumbnail }),
    logger,
    concurrency: resolved.thumbnailWorkers,
    maxQueue: limits.maxThumbnailQueue,
    maxPixels: limits.maxThumbnailPixels,
    maxStoredPerFile: limits.maxThumbnailsPerFile,
  });
  if (resolved.realtime) owned.hub = await RealtimeHub.start({ db: database, store, registry, presenter: records.presenter, settings: resolved.realtime, limits, logger });
  owned.stopGauges = registerGaugeSource({ streams: () => owned.hub?.streamCount ?? 0, outboxDepth: () => owned.hub?.countUnreadChanges(), replicaLagMs: () => owned.replica?.status().lagMs ?? undefined, thumbnailQueue: () => thumbnails.queued() });
  owned.rateLimits = startRateLimits({ settings: resolved.rateLimits, shared: resolved.database, limits, logger });
  if (resolved.fileSweep) owned.sweeper = startFileSweeper({ database, registry, storage, logger, ...resolved.fileSweep });
  return {
    compiled,
    records,
    fileTokens: createFileTokens({ secret }),
    thumbnails,
    hub: owned.hub,
    rateLimits: owned.rateLimits,
    backups: createBackupService({ database, embeddedDirectory: owned.database && embeddedDatabaseDir(resolved.dataDir), storage, ...resolved.backups, logger }),
    apiDeps,
    health: new DatabaseHealth({ database, logger, limits }),
  };
}

/**
 * The route table. Every route group gets its readers the same way, each made once here: one
 * caller resolver per token source (the Authorization header; downloads also read `?token=`), the
 * one download-caller resolver over them that checks file tokens for files and backups, and one
 * multipart reader per body limit (a request's; a batch's own).
 */
function buildRoutes(runtime: Runtime, resolved: ResolvedOptions): Route[] {
  const { auth, logger, limits } = resolved;
  const { records } = runtime;
  const headerCaller = createCallerResolver({ auth, logger, sources: HEADER_ONLY });
  const guard = runtime.rateLimits?.guardWith(headerCaller);
  const resolveCaller = guard?.resolveCaller ?? headerCaller;
  const resolveDownloadCaller = createDownloadCallerResolver({
    fileTokens: runtime.fileTokens,
    callers: { header: resolveCaller, download: createCallerResolver({ auth, logger, sources: DOWNLOAD_SOURCES }) },
  });
  const readMultipart = createMultipartReader({ ...limits, tempDir: resolved.uploadTempDir });
  const batchBodySize = resolved.batch === false ? limits.maxBodySize : resolved.batch.maxBodySize;
  const readBatchMultipart = createMultipartReader({ maxFileSize: limits.maxFileSize, maxBodySize: batchBodySize, tempDir: resolved.uploadTempDir });
  const routes: Route[] = [];
  if (resolved.openapi) routes.push(createOpenApiRoute({ registry: runtime.compiled.registry, document: { limits, multipartUpdate: resolved.multipartUpdate } }));
  routes.push(...createRecordsRoutes({ records, resolveCaller, readMultipart, maxBodySize: limits.maxBodySize, maxPerPage: limits.maxPerPage }));
  routes.push(...createAggregateRoutes({ records, resolveCaller, maxPerPage: limits.maxPerPage, maxAggregateGroups: limits.maxAggregateGroups }));
  routes.push(...createFilesRoutes({ records, storage: resolved.storage, thumbnails: runtime.thumbnails, fileTokens: runtime.fileTokens, resolveCaller, resolveDownloadCaller, logger }));
  routes.push(...createBatchRoutes({ records, resolveCaller, readMultipart: readBatchMultipart, logger, settings: resolved.batch, checkRequests: guard?.checkBatch }));
  if (runtime.hub) routes.push(...createRealtimeRoutes({ hub: runtime.hub, resolveCaller, readMultipart, maxBodySize: limits.maxBodySize }));
  routes.push(...createBackupRoutes({ backups: runtime.backups, resolveCaller, resolveDownloadCaller, logger }));
  routes.push(...createDashboardRoutes({ enabled: resolved.dashboard, registry: runtime.compiled.registry, resolveCaller }));
  routes.push(createHealthRoute(runtime.health));
  return guard ? guard.guard(routes) : routes;
}

/** Knex's own warnings about the database the router opened go to the router's logger, not the console. */
function createKnexLog(logger: Logger): Knex.Config['log'] {
  return {
    warn: (message: unknown) => logger.warn(`database: ${String(message)}`),
    error: (message: unknown) => logger.error(`database: ${String(message)}`),
    deprecate: () => undefined,
    debug: () => undefined,
  };
}

/**
 * The options with the storage adapter seen through spans (lib/telemetry/trace-storage.ts), once,
 * so every part of the router (files, sweep, backups, migrations) calls it the same way; the
 * host's adapter itself is not changed.
 */
function withTracedStorage(resolved: ResolvedOptions): ResolvedOptions {
  return { ...resolved, storage: traceStorage(resolved.storage) };
}
