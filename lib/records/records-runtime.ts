import type { RecordStore } from '../db/record-store.js';
import type { ReplicaReads } from '../db/replica/replica-reads.js';
import { RecordFiles } from '../files/record-files.js';
import type { Storage } from '../files/storage.js';
import type { Logger } from '../logger.js';
import type { CompiledCollections } from './compile-collections.js';
import type { RecordsApiDeps } from './create-records-api.js';
import { HookRunner, type RecordHooks } from './record-hooks.js';
import { RecordService, type RecordServiceOptions } from './record-service.js';

/** What the records stack is built from: once for the router, once for each migration (on its transaction). */
export interface RecordsRuntimeOptions {
  readonly compiled: CompiledCollections;
  /** The store every operation reads and writes through: the pool's, or a migration's transaction's. */
  readonly store: RecordStore;
  readonly storage: Storage;
  /** The hooks to run (a migration runs none: they belong to the app serving). */
  readonly hooks: RecordHooks;
  readonly logger: Logger;
  readonly limits: { readonly maxPerPage: number; readonly maxFileSize: number; readonly maxExpandRecords: number; readonly maxExpandBytes: number; readonly maxAggregateGroups: number };
  readonly multipartUpdate: 'replace' | 'merge';
  /** Where streamed file inputs are spooled. */
  readonly tempDir: string;
  /** What bounds a server-API call's statements (RecordsApiDeps's `bounds`). */
  readonly bounds: RecordsApiDeps['bounds'];
  /** The server API bound to a write unit: what hooks receive as `api`. */
  readonly apiFor: RecordServiceOptions['apiFor'];
  /** The read replica (the router's `readReplica`; a migration has none): where the service's reads may go (read-routing.ts). */
  readonly replica?: ReplicaReads;
}

/** The records stack: the service (with its presenter), and what the server API works through. */
export interface RecordsRuntime {
  readonly service: RecordService;
  readonly apiDeps: RecordsApiDeps;
}

/**
 * Builds the records stack in one place, so that the router and a migration's server API run the
 * same service over the same parts (files, hooks, the presenter and its expand limits, paging
 * and upload limits) and can never be wired apart.
 */
export function createRecordsRuntime(options: RecordsRuntimeOptions): RecordsRuntime {
  const { logger, limits } = options;
  const service = new RecordService(options.compiled, options.store, {
    files: new RecordFiles(options.storage, logger),
    multipartUpdate: options.multipartUpdate,
    hooks: new HookRunner(options.hooks, logger),
    logger,
    expandLimits: { maxRecords: limits.maxExpandRecords, maxBytes: limits.maxExpandBytes },
    apiFor: options.apiFor,
    replica: options.replica,
  });
  return { service, apiDeps: { service, maxPerPage: limits.maxPerPage, maxAggregateGroups: limits.maxAggregateGroups, maxFileSize: limits.maxFileSize, tempDir: options.tempDir, bounds: options.bounds } };
}
