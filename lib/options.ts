import type { Knex } from 'knex';
import type { AuthFunction } from './auth/identity.js';
import type { Logger } from './http/logger.js';
import { consoleLogger } from './http/logger.js';
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
}

/** Options with every default filled in. */
export interface ResolvedOptions {
  collections: CollectionDefinition[];
  database?: Knex;
  dataDir: string;
  auth?: AuthFunction;
  limits: Limits;
  logger: Logger;
}

const MIB = 1024 * 1024;

function readSize(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  if (!/^\d+$/.test(raw.trim()) || Number(raw) <= 0) throw new TypeError(`${name} must be a positive number of bytes, got "${raw}"`);
  return Number(raw);
}

function checkLimit(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) throw new TypeError(`limits.${name} must be a positive integer`);
  return value;
}

/**
 * Fills in defaults. Limits come from the environment (read once, here, at router creation)
 * unless given explicitly; a malformed value throws rather than silently falling back.
 */
export function resolveOptions(options: RecordsRouterOptions, env: NodeJS.ProcessEnv = process.env): ResolvedOptions {
  if (!options || typeof options !== 'object') throw new TypeError('createRecordsRouter needs an options object');
  const limits = options.limits ?? {};
  return {
    collections: options.collections,
    database: options.database,
    dataDir: options.dataDir ?? './rb_data',
    auth: options.auth,
    logger: options.logger ?? consoleLogger,
    limits: {
      maxFileSize: checkLimit('maxFileSize', limits.maxFileSize ?? readSize(env, 'SERVICE_MAX_FILE_SIZE', 5 * MIB)),
      maxBodySize: checkLimit('maxBodySize', limits.maxBodySize ?? readSize(env, 'SERVICE_MAX_BODY_SIZE', 10 * MIB)),
      maxPerPage: checkLimit('maxPerPage', limits.maxPerPage ?? 1000),
    },
  };
}
