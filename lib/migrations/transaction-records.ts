import { RecordStore } from '../db/record-store.js';
import type { StatementRunner } from '../db/statements/statement-runner.js';
import type { Storage } from '../files/storage.js';
import type { Logger } from '../logger.js';
import type { CompiledCollections } from '../records/compile-collections.js';
import { createRecordsApi, type RecordsApiDeps } from '../records/create-records-api.js';
import { createRecordsRuntime } from '../records/records-runtime.js';
import type { ActAs, CollectionApi, RecordsApi } from '../records/records-api.js';
import { WriteUnit } from '../records/write-unit.js';

/** What the server API of a migration is built from: the router's collections, storage and limits. */
export interface MigrationServices {
  readonly compiled: CompiledCollections;
  readonly storage: Storage;
  readonly logger: Logger;
  readonly limits: { readonly maxPerPage: number; readonly maxFileSize: number; readonly maxExpandRecords: number; readonly maxExpandBytes: number; readonly maxAggregateGroups: number };
  /** Where streamed file inputs are spooled. */
  readonly tempDir: string;
}

/** Never used inside a unit (its store carries no bounds: a migration runs unbounded), but the API's type asks for it. */
const UNBOUNDED = { statementTimeoutMs: 2 ** 31 - 1, acquireTimeoutMs: 2 ** 31 - 1 };

/** The server API of one migration, and what ends it once the migration's transaction is over. */
export interface TransactionRecords {
  collection(name: string): CollectionApi;
  /** Removes the files written for the migration if it rolled back, or the files it replaced once it committed; then refuses further calls. */
  finish(outcome: 'committed' | 'rolled-back'): Promise<void>;
}

/**
 * The server API (docs/server-api.md) bound to a migration's transaction: every call joins it,
 * as a superuser unless it says `as`, through the same validation and file handling as HTTP.
 * Hooks do not run: they belong to the app serving, and may reach outside the transaction.
 * `prepare` runs once, before the first call (the migration adds the declared columns there).
 */
export function createTransactionRecords(trx: StatementRunner, options: { services: MigrationServices; prepare(): Promise<void> }): TransactionRecords {
  const { compiled, storage, logger, limits, tempDir } = options.services;
  const store = RecordStore.on(trx);
  const unit = new WriteUnit(store);
  const scope = { open: true };
  let api: RecordsApi;
  const { apiDeps: deps } = createRecordsRuntime({ compiled, store, storage, hooks: {}, logger, limits, multipartUpdate: 'merge', tempDir, bounds: UNBOUNDED, apiFor: () => api });
  let prepared: Promise<RecordsApiDeps> | undefined;
  api = createRecordsApi(() => (prepared ??= options.prepare().then(() => deps)), unit, scope);
  return {
    collection: (name) => asSuperuserByDefault(api.collection(name)),
    async finish(outcome) {
      scope.open = false;
      await unit.settle(outcome, logger);
    },
  };
}

/** The calls of `api` acting as a superuser unless their options say `as`. */
function asSuperuserByDefault(api: CollectionApi): CollectionApi {
  const withDefault = <T extends { as?: ActAs }>(options?: T): T => ({ as: 'superuser', ...options }) as T;
  return {
    getList: (page, perPage, options) => api.getList(page, perPage, withDefault(options)),
    getFullList: (options) => api.getFullList(withDefault(options)),
    getFirstListItem: (filter, options) => api.getFirstListItem(filter, withDefault(options)),
    getOne: (id, options) => api.getOne(id, withDefault(options)),
    create: (body, options) => api.create(body, withDefault(options)),
    update: (id, body, options) => api.update(id, body, withDefault(options)),
    delete: (id, options) => api.delete(id, withDefault(options)),
    aggregate: (options) => api.aggregate(withDefault(options)),
  };
}
