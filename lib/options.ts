// Over 500 lines: the options table is the one place every default is written, beside the interfaces it resolves; splitting it would split that.
import os from 'node:os';
import path from 'node:path';
import type { Knex } from 'knex';
import { checkFileTokenSecret } from './auth/file-token.js';
import type { BackupSettings } from './backups/backup-service.js';
import type { AuthFunction } from './auth/identity.js';
import { diskStorage } from './files/disk-storage.js';
import type { Storage } from './files/storage.js';
import type { FileSweepOptions } from './files/sweep-files.js';
import type { ThumbnailFunction } from './files/render-thumbnail.js';
import type { Logger, RequestLogFunction } from './logger.js';
import { consoleLogger } from './logger.js';
import type { BatchSettings } from './records/run-batch.js';
import { DEFAULT_MAX_WAITING_PER_CLIENT, defaultStatementTimeoutMs } from './db/statements/statement-bounds.js';
import { checkHooks, type RecordHooks } from './records/record-hooks.js';
import type { CollectionDefinition } from './schema/definitions.js';
import { checkMigrationsOption, type MigrationsOption } from './migrations/migration-definition.js';
import type { ListenConnection } from './db/realtime/notification-listener.js';
import type { RealtimeSettings } from './realtime/realtime-hub.js';
import { checkReplicaDatabase, type ReadReplicaSettings } from './db/replica/replica-reads.js';
import { checkExcludedIps, checkRateLimitRules, type RateLimitOptions, type RateLimitSettings } from './db/rate-limits/rate-limit-settings.js';

/** Size, paging and database-time limits (docs/limits.md). */
export interface Limits {
  /** Largest single uploaded file, in bytes (413 above). Default: SERVICE_MAX_FILE_SIZE or 5 MiB. */
  maxFileSize: number;
  /** Largest request body, in bytes (413 above). Default: SERVICE_MAX_BODY_SIZE or 10 MiB. */
  maxBodySize: number;
  /** Cap on `perPage`. Default 1000. */
  maxPerPage: number;
  /**
   * Most related records `expand` may add to one response, a record counted each time it appears
   * (400 `expand_too_many_records` above). Default 10,000.
   */
  maxExpandRecords: number;
  /**
   * Most bytes (compact JSON, UTF-8) `expand` may add to one response, repeats included (400
   * `expand_too_large` above). Default 16 MiB.
   */
  maxExpandBytes: number;
  /**
   * Most groups one aggregate may have (`GET …/aggregate`, docs/search.md), counted before paging:
   * more is a 400 `aggregate_too_many_groups`, never a truncated answer. Default 1,000.
   */
  maxAggregateGroups: number;
  /** Thumbnails that may wait for their render to start; one more is a 503 `thumbnail_queue_full`. Default 100. */
  maxThumbnailQueue: number;
  /**
   * Pixels (width x height of the originals) decoded at once by all thumbnail renders together;
   * a larger original is served as it is. Bounds the renderer's memory. Default 24,000,000.
   */
  maxThumbnailPixels: number;
  /**
   * Thumbnails stored per file whose field lists no `thumbs`; further sizes are answered with the
   * original. Default 10.
   */
  maxThumbnailsPerFile: number;
  /**
   * Longest a database statement of a request may run, in milliseconds; past it the statement is
   * cancelled and the request answers 400 `statement_timeout`. Default 5000; 250 on the embedded
   * engine on disk, where a statement holds every client and stopping it restarts the engine.
   */
  statementTimeoutMs: number;
  /**
   * Longest a request waits for a database connection, in milliseconds (the pool is busy, or the
   * database does not answer); past it the request answers 503. Default 3000.
   */
  acquireTimeoutMs: number;
  /**
   * Database connections one client (one address, `req.ip`) may hold at once; its other requests
   * wait their turn behind other clients'. Default: half the pool's `max`, at least 1 (the
   * embedded engine: 1, its one connection).
   */
  maxConnectionsPerClient?: number;
  /**
   * Requests of one client that may wait for a database connection; one more is a 503
   * `database_busy` at once. Default 32.
   */
  maxWaitingPerClient: number;
}

/** The options of `createRecordsRouter` (docs/configuration.md). */
export interface RecordsRouterOptions {
  /** The collections this router serves. */
  collections: CollectionDefinition[];
  /** A Knex instance for Postgres. Absent: the embedded PGlite under `dataDir/db`, owned (and closed) by the router. */
  database?: Knex;
  /** Where the embedded database (and default storage) live. Default `./rb_data`. */
  dataDir?: string;
  /** The host's authentication: token -> identity or null. Absent: everyone is a guest. */
  auth?: AuthFunction;
  limits?: Partial<Limits>;
  /** Where 500 causes and initialisation failures are reported. Default: the console. */
  logger?: Logger;
  /** Where uploaded files and thumbnails live. Default: `diskStorage({ root: dataDir + '/storage' })`. */
  storage?: Storage;
  /**
   * Called once per request the router answers, when its response ends, with what it did
   * (method, route, path without query, status, duration, collection, caller id; never a token).
   * Absent: no request log.
   */
  onRequest?: RequestLogFunction;
  /**
   * Multipart updates: `'replace'` (default, the interface's rule) clears every field the request
   * does not send; `'merge'` changes only the fields sent, like a JSON update.
   */
  multipartUpdate?: 'replace' | 'merge';
  /**
   * The secret that signs file tokens (at least 32 characters). Absent: on Postgres one is
   * generated by the first instance that starts and kept in the database (`_recordbase_settings`),
   * so every instance on the database shares it; on the embedded engine the router opens, a key
   * kept in `dataDir/file-token.key`, outside the database, so that a backup holds none
   * (docs/protected-files.md).
   */
  fileTokenSecret?: string;
  /** Makes thumbnails; replaces the built-in jimp renderer (which runs in worker threads). */
  thumbnail?: ThumbnailFunction;
  /**
   * Worker threads of the built-in thumbnail renderer, and how many originals are rendered at
   * once (also with your own `thumbnail` function). Default: one per core, at most 4.
   */
  thumbnailWorkers?: number;
  /**
   * `POST /api/batch` (docs/batch.md): at most `maxRequests` requests (default 50), given up and
   * rolled back after `timeoutMs` (default 3000), a body of at most `maxBodySize` bytes (default
   * `limits.maxBodySize`). `false` turns batches off (403).
   */
  batch?: Partial<BatchSettings> | false;
  /**
   * Hooks per collection name, or `'*'` for every collection (docs/server-api.md): `beforeCreate`,
   * `beforeUpdate`, `beforeDelete` run inside the write's transaction after the rule check and may
   * change or refuse the write; `afterCreate`, `afterUpdate`, `afterDelete` run after the commit.
   */
  hooks?: RecordHooks;
  /**
   * The periodic sweep of unreferenced files: how often it runs and how old a file must be
   * before it may go (the grace period covers uploads whose transaction is still open). `false`
   * turns it off. Default: every 6 hours, files older than 24 hours.
   */
  fileSweep?: FileSweepOptions | false;
  /**
   * Serve the OpenAPI document of the collections at `/api/openapi.json` (docs/openapi.md).
   * Default `false`: a schema is information a deployment may not want to publish.
   */
  openapi?: boolean;
  /**
   * Serve the dashboard, an admin UI for superusers, at `{mount}/_/` (docs/dashboard.md). It calls
   * the public API with the caller's own token. Default `false`: `{mount}/_/` answers 404.
   */
  dashboard?: boolean;
  /**
   * Realtime (`GET`/`POST /api/realtime`, docs/realtime.md): PocketBase's server-sent events, on
   * one instance or several on one Postgres. `false` turns it off here (the routes answer 404;
   * other instances on the database keep theirs). Default: on, with the defaults of RealtimeSettings.
   */
  realtime?: Partial<RealtimeSettings> | false;
  /**
   * Rate limits in PocketBase's shape (docs/limits.md, "Rate limits"): `rules` of `{ label,
   * maxRequests, duration, audience }`, answered 429 with Retry-After, held across instances on
   * Postgres. Default: no rules, no cost. `false`: off.
   */
  rateLimits?: RateLimitOptions | false;
  /**
   * Migrations (docs/collections.md "Changing your schema"): a folder of `.js`, `.mjs` or `.ts`
   * modules (relative to the working directory) each default-exporting `{ up, down? }`, or an
   * array of `{ name, up, down? }`. Pending ones are applied at `ready`, in name order, before the
   * schema sync. Default: none.
   */
  migrations?: MigrationsOption;
  /**
   * Backups (`records.backup()`, the backups API, docs/deployment.md): the folder they are kept in
   * (default `dataDir/backups`) and the most it may hold (default 10; one more is refused).
   */
  backups?: Partial<BackupSettings>;
  /**
   * A read replica (docs/deployment.md, "Read replicas"): a Knex for a hot standby of `database`,
   * or `{ database, maxLagMs }`. Lists and their counts, views, expands and downloads' record reads
   * go there while every commit older than `maxLagMs` (default 1000) is visible there and the
   * caller's own writes have been replayed; everything else reads the primary. Default: none.
   */
  readReplica?: Knex | { database: Knex; maxLagMs?: number } | false;
  /**
   * Whether the few statements whose text is fixed per collection are sent as named prepared
   * statements (parsed once per connection). `false` for a pooler in transaction mode that does
   * not keep them: PgBouncer before 1.21 or without `max_prepared_statements` (docs/deployment.md,
   * "Behind a pooler"). Default `true`, or the environment's RECORDBASE_PREPARED_STATEMENTS.
   */
  preparedStatements?: boolean;
  /**
   * How long `close()` lets running requests finish, in milliseconds, before it cuts them (new
   * ones are refused with 503 from its first moment; docs/deployment.md, "Rolling restarts"). Default 10,000.
   */
  drainMs?: number;
}

/** Options with every default filled in. */
export interface ResolvedOptions {
  collections: CollectionDefinition[];
  database?: Knex;
  dataDir: string;
  auth?: AuthFunction;
  limits: Limits;
  logger: Logger;
  /** The given storage, or the default disk storage under `dataDir/storage` (it creates nothing until the first write). */
  storage: Storage;
  multipartUpdate: 'replace' | 'merge';
  onRequest?: RequestLogFunction;
  fileTokenSecret?: string;
  thumbnail?: ThumbnailFunction;
  thumbnailWorkers: number;
  /** The hooks given (checked against the declared collections), or none. */
  hooks: RecordHooks;
  fileSweep: Required<FileSweepOptions> | false;
  batch: BatchSettings | false;
  /** Where multipart uploads are spooled while a request runs: `dataDir/uploads-tmp`. */
  uploadTempDir: string;
  openapi: boolean;
  dashboard: boolean;
  realtime: RealtimeSettings | false;
  rateLimits: RateLimitSettings | false;
  migrations?: MigrationsOption;
  backups: BackupSettings;
  preparedStatements: boolean;
  readReplica: ReadReplicaSettings | false;
  drainMs: number;
}

/** What a default or a check may read: the options as given, and what the table resolved before it. */
export interface OptionContext {
  readonly given: RecordsRouterOptions;
  readonly resolved: Readonly<Partial<ResolvedOptions>>;
}

/**
 * One option of the table: its default (a value, or `derive`d from what is resolved before it),
 * the environment variable read when the option is absent, and the check its value passes (the
 * default's too). Without a default the option stays absent.
 */
export interface OptionEntry<T> {
  readonly default?: T;
  readonly derive?: (context: OptionContext) => T;
  /** A variable read from the environment, between the option and the default: a size in bytes, unless `readEnv` reads it. */
  readonly env?: string;
  /** How `env`'s text becomes a value (default: a size in bytes); unset or blank is absent. */
  readonly readEnv?: (name: string, raw: string) => T;
  readonly check: (path: string, value: unknown, context: OptionContext) => T;
}

type Entries<T> = { readonly [K in keyof T]-?: OptionEntry<T[K]> };
/** The options of the top level that the table resolves (the groups below have tables of their own). */
type TopLevelOptions = Omit<ResolvedOptions, 'limits' | 'batch' | 'realtime' | 'rateLimits' | 'fileSweep' | 'uploadTempDir' | 'backups' | 'readReplica'>;

/**
 * A group of settings under one key (`limits`, `batch`, ...): its table, and whether `false`
 * turns the feature off. `message` is the error for a value that is neither an object nor false.
 */
export interface OptionGroup<T> {
  readonly entries: Entries<T>;
  readonly canBeOff: boolean;
  readonly message: string;
}

/** The shape of OPTION_TABLE: the top level's options, then each group under its key. */
export interface OptionTable {
  readonly options: Entries<TopLevelOptions>;
  readonly groups: {
    readonly limits: OptionGroup<Limits>;
    readonly batch: OptionGroup<BatchSettings>;
    readonly realtime: OptionGroup<RealtimeSettings>;
    readonly rateLimits: OptionGroup<RateLimitSettings>;
    readonly fileSweep: OptionGroup<Required<FileSweepOptions>>;
    readonly backups: OptionGroup<BackupSettings>;
    readonly readReplica: OptionGroup<ReadReplicaSettings>;
  };
}

const MIB = 1024 * 1024;
const HOUR = 60 * 60 * 1000;
/** Each worker may hold a decoded original (hundreds of MB): a 64-core host must not start 64 by default. */
const MAX_DEFAULT_THUMBNAIL_WORKERS = 4;
/** Node's timers take at most 2^31-1 ms (about 24.8 days); a longer one fires after 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

function checkPositiveInteger(path: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) throw new TypeError(`${path} must be a positive integer`);
  return value;
}

/** A duration that becomes a timer: a positive integer of milliseconds Node's timers can hold. */
function checkDuration(path: string, value: unknown): number {
  const ms = checkPositiveInteger(path, value);
  if (ms > MAX_TIMER_MS) throw new TypeError(`${path} must be at most ${MAX_TIMER_MS} milliseconds`);
  return ms;
}

function checkOneOf<const T extends string>(values: readonly T[]): (path: string, value: unknown) => T {
  return (path, value) => {
    if (!(values as readonly unknown[]).includes(value)) throw new TypeError(`${path} must be ${values.map((v) => JSON.stringify(v)).join(' or ')}, got ${JSON.stringify(value)}`);
    return value as T;
  };
}

function checkFunction<T extends (...args: never[]) => unknown>(path: string, value: unknown): T {
  if (typeof value !== 'function') throw new TypeError(`${path} must be a function`);
  return value as T;
}

function checkBoolean(path: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw new TypeError(`${path} must be true or false`);
  return value;
}

/** A switch from the environment: `true`/`false` (or `1`/`0`); anything else throws rather than falling back. */
function readBooleanEnv(name: string, raw: string): boolean {
  const text = raw.trim().toLowerCase();
  if (text === 'true' || text === '1') return true;
  if (text === 'false' || text === '0') return false;
  throw new TypeError(`${name} must be true or false, got "${raw}"`);
}

function checkString(path: string, value: unknown): string {
  if (typeof value !== 'string') throw new TypeError(`${path} must be a string`);
  return value;
}

/** `realtime.listen`: what node-postgres connects with (a URL or its client settings), or a function making a `pg.Client`. */
function checkListenConnection(path: string, value: unknown): ListenConnection {
  if (typeof value === 'string' || typeof value === 'function' || (typeof value === 'object' && value !== null && !Array.isArray(value))) return value as ListenConnection;
  throw new TypeError(`${path} must be a connection string, node-postgres client settings, or a function returning a new pg.Client`);
}

function checkLogger(path: string, value: unknown): Logger {
  const logger = value as Partial<Logger> | null;
  if (typeof logger !== 'object' || logger === null || ['error', 'warn', 'info'].some((name) => typeof logger[name as keyof Logger] !== 'function')) {
    throw new TypeError(`${path} must be an object with error, warn and info functions`);
  }
  return value as Logger;
}

function checkStorage(path: string, value: unknown): Storage {
  if (typeof value !== 'object' || value === null) throw new TypeError(`${path} must be a Storage object (docs/storage.md)`);
  return value as Storage;
}

/** For what another check owns: the definitions (compileCollections) and the Knex (checked at `ready`). */
function keepAsGiven<T>(_path: string, value: unknown): T {
  return value as T;
}

/** A value a default is derived from (`dataDir` for `storage`, `limits` for `batch`), which the table resolves before it. */
function resolvedBefore<K extends 'dataDir' | 'limits'>(context: OptionContext, key: K): ResolvedOptions[K] {
  const value = context.resolved[key];
  if (value === undefined) throw new Error(`the options table must resolve ${key} first`);
  return value as ResolvedOptions[K];
}

/** A group that `false` turns off (the feature, on this instance). */
function switchable<T>(message: string, entries: Entries<T>): OptionGroup<T> {
  return { entries, canBeOff: true, message };
}

/** Whether a hook's key names a declared collection; collections that are not an array are compileCollections' to refuse. */
function isDeclaredIn(collections: unknown): (name: string) => boolean {
  if (!Array.isArray(collections)) return () => true;
  return (name) => collections.some((c: unknown) => typeof c === 'object' && c !== null && (c as { name?: unknown }).name === name);
}

/**
 * Every option with its default, environment variable and check, in the order they resolve
 * (`dataDir` before `storage`, `limits` before `batch`): the one place a default is written.
 * Factories take the resolved values and default nothing. docs/limits.md and
 * docs/configuration.md quote these defaults (spec/unit/options-docs.test.ts compares them).
 */
export const OPTION_TABLE: OptionTable = {
  options: {
    collections: { check: keepAsGiven<CollectionDefinition[]> },
    database: { check: keepAsGiven<Knex | undefined> },
    dataDir: { default: './rb_data', check: checkString },
    logger: { default: consoleLogger, check: checkLogger },
    storage: { derive: (context) => diskStorage({ root: path.join(resolvedBefore(context, 'dataDir'), 'storage') }), check: checkStorage },
    auth: { check: checkFunction<AuthFunction> },
    onRequest: { check: checkFunction<RequestLogFunction> },
    multipartUpdate: { default: 'replace', check: checkOneOf(['replace', 'merge']) },
    fileTokenSecret: { check: checkFileTokenSecret },
    thumbnail: { check: checkFunction<ThumbnailFunction> },
    thumbnailWorkers: { derive: () => Math.min(os.availableParallelism(), MAX_DEFAULT_THUMBNAIL_WORKERS), check: checkPositiveInteger },
    hooks: { derive: () => ({}), check: (_path, value, { given }) => checkHooks(value, isDeclaredIn(given.collections)) },
    openapi: { default: false, check: checkBoolean },
    dashboard: { default: false, check: checkBoolean },
    migrations: { check: checkMigrationsOption },
    // Off for a pooler in transaction mode without prepared-statement support (lib/db/statements/statement-bounds.ts).
    preparedStatements: { default: true, env: 'RECORDBASE_PREPARED_STATEMENTS', readEnv: readBooleanEnv, check: checkBoolean },
    drainMs: { default: 10_000, check: checkDuration },
  },
  groups: {
    limits: {
      canBeOff: false,
      message: 'limits must be an object of limits',
      entries: {
        maxFileSize: { default: 5 * MIB, env: 'SERVICE_MAX_FILE_SIZE', check: checkPositiveInteger },
        maxBodySize: { default: 10 * MIB, env: 'SERVICE_MAX_BODY_SIZE', check: checkPositiveInteger },
        maxPerPage: { default: 1000, check: checkPositiveInteger },
        maxExpandRecords: { default: 10_000, check: checkPositiveInteger },
        maxExpandBytes: { default: 16 * MIB, check: checkPositiveInteger },
        maxAggregateGroups: { default: 1000, check: checkPositiveInteger },
        maxThumbnailQueue: { default: 100, check: checkPositiveInteger },
        maxThumbnailPixels: { default: 24_000_000, check: checkPositiveInteger },
        maxThumbnailsPerFile: { default: 10, check: checkPositiveInteger },
        statementTimeoutMs: { derive: ({ given }) => defaultStatementTimeoutMs(given.database), check: checkDuration },
        acquireTimeoutMs: { default: 3000, check: checkDuration },
        // Absent: half the pool's max, which only the pool knows (lib/db/statements/statement-bounds.ts).
        maxConnectionsPerClient: { check: checkPositiveInteger },
        maxWaitingPerClient: { default: DEFAULT_MAX_WAITING_PER_CLIENT, check: checkPositiveInteger },
      },
    },
    batch: switchable('batch must be an object of limits or false', {
      maxRequests: { default: 50, check: checkPositiveInteger },
      timeoutMs: { default: 3000, check: checkDuration },
      maxBodySize: { derive: (context) => resolvedBefore(context, 'limits').maxBodySize, check: checkPositiveInteger },
    }),
    realtime: switchable('realtime must be an object of settings or false', {
      heartbeatMs: { default: 25_000, check: checkDuration },
      maxClients: { default: 10_000, check: checkPositiveInteger },
      maxClientsPerAddress: { default: 100, check: checkPositiveInteger },
      maxClientsPerIdentity: { default: 50, check: checkPositiveInteger },
      instanceHeartbeatMs: { default: 5_000, check: checkDuration },
      outboxRetentionMs: { default: 10 * 60 * 1000, check: checkDuration },
      maxClientBufferBytes: { default: 4 * MIB, check: checkPositiveInteger },
      // Far below a request's own bound: a check runs for every change (the embedded engine's 250 ms, there).
      checkTimeoutMs: { derive: (context) => Math.min(500, resolvedBefore(context, 'limits').statementTimeoutMs), check: checkDuration },
      // On for PocketBase parity; docs/realtime.md says when to turn it off.
      subscriptionHeaders: { default: true, check: checkBoolean },
      // Absent: the Knex's own settings (notification-listener.ts).
      listen: { check: checkListenConnection },
      listenCheckMs: { default: 2_000, check: checkDuration },
      // Three default instance heartbeats; false: never sleeps (docs/realtime.md, "Idle mode").
      idleAfterMs: { default: 15_000, check: (path, value): number | false => (value === false ? false : checkDuration(path, value)) },
    }),
    rateLimits: switchable('rateLimits must be an object { rules, excludedIps, maxTrackedKeys } or false', {
      rules: { derive: () => [], check: (path, value, { given }) => checkRateLimitRules(path, value, isDeclaredIn(given.collections)) },
      excludedIps: { derive: () => [], check: checkExcludedIps },
      maxTrackedKeys: { default: 100_000, check: checkPositiveInteger },
    }),
    fileSweep: switchable('fileSweep must be an object of settings or false', {
      intervalMs: { default: 6 * HOUR, check: checkDuration },
      // An age compared with files' times, never a timer: a grace period of 30 days is fair.
      minAgeMs: { default: 24 * HOUR, check: checkPositiveInteger },
    }),
    backups: {
      canBeOff: false,
      message: 'backups must be an object of settings',
      entries: {
        dir: { derive: (context) => path.join(resolvedBefore(context, 'dataDir'), 'backups'), check: checkString },
        maxCount: { default: 10, check: checkPositiveInteger },
      },
    },
    readReplica: switchable('readReplica must be a Knex instance, { database, maxLagMs } or false', {
      database: { derive: () => checkReplicaDatabase('readReplica.database', undefined, undefined), check: (path, value, { given }) => checkReplicaDatabase(path, value, given.database) },
      // A second: a list may lag a write by that much; lower costs more lag samples (a tenth of it apart).
      maxLagMs: { default: 1000, check: checkDuration },
    }),
  },
};

/** A size in bytes from the environment; unset or blank is absent, anything malformed throws. */
function readByteSize(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return undefined;
  if (!/^\d+$/.test(raw.trim()) || Number(raw) <= 0) throw new TypeError(`${name} must be a positive number of bytes, got "${raw}"`);
  return Number(raw);
}

/** An entry's value from the environment: its own reader, else a size in bytes; unset or blank is absent. */
function readEnvValue<T>(env: NodeJS.ProcessEnv, entry: OptionEntry<T>): unknown {
  if (entry.readEnv === undefined) return readByteSize(env, entry.env!);
  const raw = env[entry.env!];
  return raw === undefined || raw.trim() === '' ? undefined : entry.readEnv(entry.env!, raw);
}

/** Fills `into` with the entries' values in table order: given, else the environment, else the default; each checked. */
function resolveEntries<T>(entries: Entries<T>, options: { prefix: string; given: Partial<T>; into: Partial<T>; context: OptionContext; env: NodeJS.ProcessEnv }): T {
  for (const key of Object.keys(entries) as (keyof T & string)[]) {
    const entry: OptionEntry<T[typeof key]> = entries[key];
    let value: unknown = options.given[key];
    if (value === undefined && entry.env !== undefined) value = readEnvValue(options.env, entry);
    if (value === undefined) value = entry.derive ? entry.derive(options.context) : entry.default;
    if (value !== undefined) options.into[key] = entry.check(options.prefix + key, value, options.context);
  }
  return options.into as T;
}

/** A group's settings with defaults; `false` stays off where the group allows it. */
function resolveGroup<T>(key: string, group: OptionGroup<T>, options: { given: unknown; context: OptionContext; env: NodeJS.ProcessEnv }): T | false {
  if (options.given === false && group.canBeOff) return false;
  if (options.given !== undefined && (options.given === null || typeof options.given !== 'object' || Array.isArray(options.given))) throw new TypeError(group.message);
  const given = (options.given ?? {}) as Partial<T>;
  // A key the group does not have is a typo or a setting of another version: refused, never ignored.
  const known = Object.keys(group.entries);
  const unknown = Object.keys(given).find((name) => !known.includes(name));
  if (unknown !== undefined) throw new TypeError(`${key}.${unknown} is not an option (${key} takes ${known.join(', ')})`);
  return resolveEntries(group.entries, { prefix: `${key}.`, given, into: {}, context: options.context, env: options.env });
}

/**
 * Resolves the options once, from OPTION_TABLE: the router and every command of the executable
 * call it, then compileCollections, so both refuse the same mistakes at once. Limits come from
 * the environment (read here, once) unless given; a malformed value throws rather than silently
 * falling back.
 */
export function resolveOptions(options: RecordsRouterOptions, env: NodeJS.ProcessEnv = process.env): ResolvedOptions {
  if (!options || typeof options !== 'object') throw new TypeError('createRecordsRouter needs an options object');
  const resolved: Partial<ResolvedOptions> = {};
  const context: OptionContext = { given: options, resolved };
  resolveEntries(OPTION_TABLE.options, { prefix: '', given: options, into: resolved, context, env });
  const { groups } = OPTION_TABLE;
  resolved.limits = resolveGroup('limits', groups.limits, { given: options.limits, context, env }) as Limits; // never off: canBeOff is false
  resolved.batch = resolveGroup('batch', groups.batch, { given: options.batch, context, env });
  resolved.realtime = resolveGroup('realtime', groups.realtime, { given: options.realtime, context, env });
  resolved.rateLimits = resolveGroup('rateLimits', groups.rateLimits, { given: options.rateLimits, context, env });
  resolved.fileSweep = resolveGroup('fileSweep', groups.fileSweep, { given: options.fileSweep, context, env });
  resolved.backups = resolveGroup('backups', groups.backups, { given: options.backups, context, env }) as BackupSettings; // never off: canBeOff is false
  // Absent is none; a Knex alone is `{ database }` (checkReplicaDatabase requires one).
  const replica = options.readReplica === undefined ? false : typeof options.readReplica === 'function' ? { database: options.readReplica } : options.readReplica;
  resolved.readReplica = resolveGroup('readReplica', groups.readReplica, { given: replica, context, env });
  resolved.uploadTempDir = path.join(resolvedBefore(context, 'dataDir'), 'uploads-tmp');
  return resolved as ResolvedOptions;
}
