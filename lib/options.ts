import os from 'node:os';
import path from 'node:path';
import type { Knex } from 'knex';
import type { AuthFunction } from './auth/identity.js';
import { diskStorage } from './files/disk-storage.js';
import type { Storage } from './files/storage.js';
import type { ThumbnailFunction } from './files/render-thumbnail.js';
import type { Logger } from './http/logger.js';
import { consoleLogger } from './http/logger.js';
import type { BatchSettings } from './http/batch-routes.js';
import type { RecordHooks } from './records/record-hooks.js';
import type { CollectionDefinition } from './schema/definitions.js';

/** Size and paging limits. */
export interface Limits {
  /** Largest single uploaded file, in bytes (413 above). Default: SERVICE_MAX_FILE_SIZE or 5 MiB. */
  maxFileSize: number;
  /** Largest request body, in bytes (413 above). Default: SERVICE_MAX_BODY_SIZE or 10 MiB. */
  maxBodySize: number;
  /** Cap on `perPage`. Default 1000. */
  maxPerPage: number;
}

/** The options of `createRecordsRouter` (DESIGN.md section 1). */
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
   * Multipart updates: `'replace'` (default, the interface's rule) clears every field the request
   * does not send; `'merge'` changes only the fields sent, like a JSON update.
   */
  multipartUpdate?: 'replace' | 'merge';
  /**
   * The secret that signs file tokens (at least 32 characters). Absent: one is generated and kept
   * in `dataDir/file-token.secret`. Instances behind one load balancer must share it.
   */
  fileTokenSecret?: string;
  /** Makes thumbnails; replaces the built-in jimp renderer (which runs in worker threads). */
  thumbnail?: ThumbnailFunction;
  /** Worker threads of the built-in thumbnail renderer. Default: one per core. */
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
}

/** When the sweep of unreferenced files runs, and which files it may remove. */
export interface FileSweepOptions {
  /** Milliseconds between sweeps. Default 6 hours. */
  intervalMs?: number;
  /** Minimum age in milliseconds of a file the sweep may remove. Default 24 hours. */
  minAgeMs?: number;
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
  fileTokenSecret?: string;
  thumbnail?: ThumbnailFunction;
  thumbnailWorkers: number;
  fileSweep: Required<FileSweepOptions> | false;
  batch: BatchSettings | false;
  /** Where multipart uploads are spooled while a request runs: `dataDir/uploads-tmp`. */
  uploadTempDir: string;
}

const MIB = 1024 * 1024;
const HOUR = 60 * 60 * 1000;

function readSize(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  if (!/^\d+$/.test(raw.trim()) || Number(raw) <= 0) throw new TypeError(`${name} must be a positive number of bytes, got "${raw}"`);
  return Number(raw);
}

function checkPositiveInteger(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) throw new TypeError(`${name} must be a positive integer`);
  return value;
}

/**
 * Fills in defaults. Limits come from the environment (read once, here, at router creation)
 * unless given explicitly; a malformed value throws rather than silently falling back.
 */
export function resolveOptions(options: RecordsRouterOptions, env: NodeJS.ProcessEnv = process.env): ResolvedOptions {
  if (!options || typeof options !== 'object') throw new TypeError('createRecordsRouter needs an options object');
  const limits = options.limits ?? {};
  const dataDir = options.dataDir ?? './rb_data';
  if (options.multipartUpdate !== undefined && options.multipartUpdate !== 'replace' && options.multipartUpdate !== 'merge') {
    throw new TypeError(`multipartUpdate must be "replace" or "merge", got ${JSON.stringify(options.multipartUpdate)}`);
  }
  if (options.fileTokenSecret !== undefined && (typeof options.fileTokenSecret !== 'string' || options.fileTokenSecret.length < 32)) {
    throw new TypeError('fileTokenSecret must be a string of at least 32 characters');
  }
  if (options.thumbnail !== undefined && typeof options.thumbnail !== 'function') throw new TypeError('thumbnail must be a function');
  const sweep = options.fileSweep ?? {};
  const maxBodySize = checkPositiveInteger('limits.maxBodySize', limits.maxBodySize ?? readSize(env, 'SERVICE_MAX_BODY_SIZE', 10 * MIB));
  return {
    collections: options.collections,
    database: options.database,
    dataDir,
    auth: options.auth,
    logger: options.logger ?? consoleLogger,
    storage: options.storage ?? diskStorage({ root: path.join(dataDir, 'storage') }),
    multipartUpdate: options.multipartUpdate ?? 'replace',
    fileTokenSecret: options.fileTokenSecret,
    thumbnail: options.thumbnail,
    thumbnailWorkers: checkPositiveInteger('thumbnailWorkers', options.thumbnailWorkers ?? os.availableParallelism()),
    fileSweep:
      sweep === false
        ? false
        : { intervalMs: checkPositiveInteger('fileSweep.intervalMs', sweep.intervalMs ?? 6 * HOUR), minAgeMs: checkPositiveInteger('fileSweep.minAgeMs', sweep.minAgeMs ?? 24 * HOUR) },
    uploadTempDir: path.join(dataDir, 'uploads-tmp'),
    batch: resolveBatch(options.batch, maxBodySize),
    limits: {
      maxFileSize: checkPositiveInteger('limits.maxFileSize', limits.maxFileSize ?? readSize(env, 'SERVICE_MAX_FILE_SIZE', 5 * MIB)),
      maxBodySize,
      maxPerPage: checkPositiveInteger('limits.maxPerPage', limits.maxPerPage ?? 1000),
    },
  };
}

/** The batch settings with defaults; `false` stays off. */
function resolveBatch(batch: Partial<BatchSettings> | false | undefined, maxBodySize: number): BatchSettings | false {
  if (batch === false) return false;
  if (batch !== undefined && (batch === null || typeof batch !== 'object')) throw new TypeError('batch must be an object of limits or false');
  return {
    maxRequests: checkPositiveInteger('batch.maxRequests', batch?.maxRequests ?? 50),
    timeoutMs: checkPositiveInteger('batch.timeoutMs', batch?.timeoutMs ?? 3000),
    maxBodySize: checkPositiveInteger('batch.maxBodySize', batch?.maxBodySize ?? maxBodySize),
  };
}
