import express, { type ErrorRequestHandler, type NextFunction, type Request, type Response, type Router } from 'express';
import type { Knex } from 'knex';
import { createFileTokens, FILE_TOKEN_SECRET_SETTING, loadFileTokenSecret } from './auth/file-token.js';
import { UnavailableError } from './errors.js';
import { installStatementBounds } from './db/bound-statements.js';
import { checkDatabaseConnection } from './db/check-database-connection.js';
import { ClientGone } from './db/database-context.js';
import { clientKeyOfAddress } from './db/fair-gate.js';
import { setRequestDatabaseContext } from './http/request-database-context.js';
import { embeddedDatabaseDir, openEmbeddedDatabase } from './db/open-embedded-database.js';
import { RecordStore } from './db/record-store.js';
import { realtimeSchema } from './db/realtime-schema.js';
import { openSharedSetting } from './db/settings-store.js';
import { syncDatabaseSchema } from './db/sync-database-schema.js';
import { RecordFiles } from './files/record-files.js';
import { startFileSweeper } from './files/sweep-files.js';
import { createThumbnailCache } from './files/thumbnail-cache.js';
import { createThumbnailPool } from './files/thumbnail-pool.js';
import { HEADER_ONLY } from './auth/extract-token.js';
import { HEALTH_ROUTE, isApiPath, unservedPathError } from './http/api-fallback-routes.js';
import { createBatchRoutes } from './http/batch-routes.js';
import { createCallerResolver } from './http/resolve-caller.js';
import { createErrorMiddleware } from './http/error-middleware.js';
import type { Logger } from './http/logger.js';
import { createFilesRoutes } from './http/files-routes.js';
import { createMultipartReader, removeStaleSpools } from './http/read-multipart.js';
import { createOpenApiRoute } from './http/openapi-route.js';
import { createRecordsRoutes } from './http/records-routes.js';
import { createRealtimeRoutes } from './http/realtime-routes.js';
import { RouteTable, runHandlers, type Route } from './http/route-table.js';
import { RealtimeHub } from './realtime/realtime-hub.js';
import { resolveOptions, type Limits, type RecordsRouterOptions } from './options.js';
import { RecordPresenter } from './records/present-records.js';
import { RecordService } from './records/record-service.js';
import { HookRunner } from './records/record-hooks.js';
import { createRecordsApi, type RecordsApi, type RecordsApiDeps } from './records/records-api.js';
import { compileCollections } from './records/compile-collections.js';

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
   * Releases what the router owns (the embedded database, thumbnail workers, the sweep timer) and
   * ends every realtime stream. A database you passed in stays open.
   */
  close(): Promise<void>;
}

/**
 * Creates the records-and-files router (docs/configuration.md). Synchronous: invalid options or
 * collection definitions throw here; the schema sync runs behind `ready`, requests that arrive
 * earlier wait for it, and if it fails every request answers 503 with the reason.
 */
export function createRecordsRouter(options: RecordsRouterOptions): RecordsRouter {
  const resolved = resolveOptions(options);
  const compiled = compileCollections(resolved.collections);
  const registry = compiled.registry;
  const logger = resolved.logger;
  const hooks = new HookRunner(resolved.hooks, logger);
  let apiDeps: RecordsApiDeps | undefined;
  const ownsDatabase = resolved.database === undefined;
  let database: Knex | undefined = resolved.database;
  let routes: RouteTable | undefined;
  const storage = resolved.storage;
  // Workers start on the first thumbnail, so a router that never makes one never starts them.
  const pool = resolved.thumbnail ? undefined : createThumbnailPool({ size: resolved.thumbnailWorkers });
  let sweeper: { stop(): Promise<void> } | undefined;
  let hub: RealtimeHub | undefined;

  const ready = (async () => {
    if (database) checkDatabaseConnection(database);
    // Knex's own warnings about the database the router opened go to the router's logger, not the console.
    database ??= openEmbeddedDatabase(embeddedDatabaseDir(resolved.dataDir), {
      log: { warn: (message: unknown) => logger.warn(`database: ${String(message)}`), error: (message: unknown) => logger.error(`database: ${String(message)}`), deprecate: () => undefined, debug: () => undefined },
    });
    installStatementBounds(database, { maxConnectionsPerClient: resolved.limits.maxConnectionsPerClient, maxWaitingPerClient: resolved.limits.maxWaitingPerClient });
    await syncDatabaseSchema(database, registry.collections, { additions: [realtimeSchema(resolved.realtime !== false)], logger });
    const fileTokens = createFileTokens({
      secret: await loadFileTokenSecret({
        secret: resolved.fileTokenSecret,
        shared: openSharedSetting(database, FILE_TOKEN_SECRET_SETTING),
        dataDir: resolved.dataDir,
      }),
    });
    await removeStaleSpools(resolved.uploadTempDir);
    const store = new RecordStore(database);
    const records = new RecordService(compiled, store, {
      files: new RecordFiles(storage, logger),
      multipartUpdate: resolved.multipartUpdate,
      hooks,
      logger,
      apiFor: (unit) => createRecordsApi(apiDepsAfterReady, unit),
    });
    const presenter = new RecordPresenter(registry, {
      expandLimits: { maxRecords: resolved.limits.maxExpandRecords, maxBytes: resolved.limits.maxExpandBytes },
    });
    apiDeps = {
      service: records,
      presenter,
      maxPerPage: resolved.limits.maxPerPage,
      maxFileSize: resolved.limits.maxFileSize,
      tempDir: resolved.uploadTempDir,
      bounds: { statementTimeoutMs: resolved.limits.statementTimeoutMs, acquireTimeoutMs: resolved.limits.acquireTimeoutMs },
    };
    const table: Route[] = [];
    if (resolved.openapi) table.push(createOpenApiRoute({ registry, document: { limits: resolved.limits, multipartUpdate: resolved.multipartUpdate } }));
    table.push(
      ...createRecordsRoutes({
        records,
        presenter,
        auth: resolved.auth,
        logger,
        maxBodySize: resolved.limits.maxBodySize,
        maxPerPage: resolved.limits.maxPerPage,
        readMultipart: createMultipartReader({ ...resolved.limits, tempDir: resolved.uploadTempDir }),
      }),
    );
    table.push(
      ...createFilesRoutes({
        records,
        storage,
        thumbnails: createThumbnailCache({
          storage,
          ...(pool ? { renderBatch: pool.renderBatch } : { render: resolved.thumbnail }),
          logger,
          concurrency: resolved.thumbnailWorkers,
          maxQueue: resolved.limits.maxThumbnailQueue,
          maxPixels: resolved.limits.maxThumbnailPixels,
          maxStoredPerFile: resolved.limits.maxThumbnailsPerFile,
        }),
        fileTokens,
        auth: resolved.auth,
        logger,
      }),
    );
    table.push(
      ...createBatchRoutes({
        records,
        presenter,
        resolveCaller: createCallerResolver({ auth: resolved.auth, logger, sources: HEADER_ONLY }),
        logger,
        settings: resolved.batch,
        readMultipart: createMultipartReader({
          maxFileSize: resolved.limits.maxFileSize,
          maxBodySize: resolved.batch === false ? resolved.limits.maxBodySize : resolved.batch.maxBodySize,
          tempDir: resolved.uploadTempDir,
        }),
      }),
    );
    if (resolved.realtime) {
      hub = await RealtimeHub.start({ db: database, store, registry, presenter, settings: resolved.realtime, limits: resolved.limits, logger });
      table.push(
        ...createRealtimeRoutes({
          hub,
          resolveCaller: createCallerResolver({ auth: resolved.auth, logger, sources: HEADER_ONLY }),
          maxBodySize: resolved.limits.maxBodySize,
          readMultipart: createMultipartReader({ ...resolved.limits, tempDir: resolved.uploadTempDir }),
        }),
      );
    }
    table.push(HEALTH_ROUTE);
    routes = new RouteTable(table);
    if (resolved.fileSweep) sweeper = startFileSweeper({ database, registry, storage, logger, ...resolved.fileSweep });
  })();
  let failure: Error | undefined;
  // The host may never await `ready`; a failed init must not become an unhandled rejection.
  ready.catch((err: unknown) => {
    failure = err instanceof Error ? err : new Error(String(err));
    logger.error(`initialisation failed: ${failure.message}`);
  });

  async function apiDepsAfterReady(): Promise<RecordsApiDeps> {
    try {
      await ready;
    } catch {
      throw new UnavailableError(`recordbase could not start: ${failure?.message ?? 'unknown error'}`, 'not_ready');
    }
    return apiDeps!;
  }

  const errorMiddleware = createErrorMiddleware(logger);
  let started = false;
  ready.then(() => (started = true), () => undefined);
  const serveWhenReady = async (req: Request, res: Response, next: NextFunction) => {
    try {
      await ready;
    } catch {
      errorMiddleware(new UnavailableError(`recordbase could not start: ${failure?.message ?? 'unknown error'}`, 'not_ready'), req, res, next);
      return;
    }
    serve(req, res, next);
  };
  const noticeProxy = createProxyNotice(logger);
  const serve = (req: Request, res: Response, next: NextFunction) => dispatch({ routes: routes!, limits: resolved.limits, errorMiddleware, noticeProxy }, req, res, next);
  const router = express.Router() as RecordsRouter;
  // Once ready, no await (and no promise) per request.
  router.use((req, res, next) => (started ? serve(req, res, next) : void serveWhenReady(req, res, next)));

  Object.defineProperty(router, 'ready', { value: ready, enumerable: true });
  Object.defineProperty(router, 'api', { value: createRecordsApi(apiDepsAfterReady), enumerable: true });
  let closing: Promise<void> | undefined;
  router.close = () => {
    closing ??= (async () => {
      await ready.catch(() => undefined);
      await hub?.close();
      await sweeper?.stop();
      await pool?.close();
      if (ownsDatabase && database) await database.destroy();
    })();
    return closing;
  };
  return router;
}

/**
 * Warns once when requests come through a proxy (they carry `X-Forwarded-For`) that Express does
 * not trust: `req.ip` is then the proxy's address for every client, and the per-client shares
 * of the database (and other per-address limits) are one share for everyone.
 */
function createProxyNotice(logger: Logger): (req: Request) => void {
  let warned = false;
  return (req) => {
    if (warned || req.headers['x-forwarded-for'] === undefined) return;
    const trusts = req.app.get('trust proxy fn') as ((address: string | undefined, hop: number) => boolean) | undefined;
    if (trusts?.(req.socket.remoteAddress, 0)) return;
    warned = true;
    logger.warn(
      `requests arrive through a proxy (X-Forwarded-For) that Express does not trust, so every client has the proxy's address ${req.socket.remoteAddress ?? ''} and shares one client's part of the database; set app.set('trust proxy', ...) on the host app (docs/limits.md, "A fair share per client")`,
    );
  };
}

/**
 * Answers one request: the route the table finds gets a database context
 * (lib/db/database-context.ts, request-database-context.ts), which its handlers pass to the
 * record service, so its statements are bounded by the limits and cancelled once the client has
 * gone (the response closed before it was finished), and take turns with other clients' (the
 * client is the request's address, `req.ip`, which honours the host's `trust proxy`). A path
 * under `/api/` that no route serves is the JSON 404 (OPTIONS: the methods served there); any
 * other path goes on to the host's next handler, whose own statements recordbase leaves alone.
 */
function dispatch(
  options: { routes: RouteTable; limits: Limits; errorMiddleware: ErrorRequestHandler; noticeProxy: (req: Request) => void },
  req: Request,
  res: Response,
  next: NextFunction,
): void {
  const { routes, limits, errorMiddleware } = options;
  const path = req.path;
  let match;
  try {
    match = routes.find(req.method, path);
  } catch (err) {
    // A path parameter with a malformed %-escape: the client's 400.
    errorMiddleware(err, req, res, next);
    return;
  }
  if (!match) {
    if (!isApiPath(path)) {
      next();
      return;
    }
    const methods = req.method === 'OPTIONS' ? routes.methodsAt(path) : [];
    if (methods.length > 0) {
      res.setHeader('Allow', methods.join(', '));
      res.send(methods.join(', '));
      return;
    }
    errorMiddleware(unservedPathError(path), req, res, next);
    return;
  }
  req.params = match.params;
  const gone = new ClientGone();
  res.once('close', () => {
    if (!res.writableFinished) gone.abort();
  });
  options.noticeProxy(req);
  setRequestDatabaseContext(req, { statementTimeoutMs: limits.statementTimeoutMs, acquireTimeoutMs: limits.acquireTimeoutMs, signal: gone, client: clientKeyOfAddress(req.ip) });
  const done = (err: unknown) => errorMiddleware(err ?? unservedPathError(path), req, res, next);
  runHandlers(match.route.handlers, req, res, done);
}
