import type { Knex } from 'knex';
import { runWithTryAdvisoryLock } from '../db/statements/advisory-lock.js';
import { RecordStore } from '../db/record-store.js';
import { StatementRunner } from '../db/statements/statement-runner.js';
import { FILE_SWEEP_LOCK_KEY } from '../db/shared-names.js';
import { hasUndeclaredColumns } from '../db/schema/sync-database-schema.js';
import type { Logger } from '../logger.js';
import { isSafeRecordId } from '../schema/record-id.js';
import type { CollectionSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { isStoredFileName } from './file-names.js';
import { listFileNames } from './record-files.js';
import type { Storage, StoredObject } from './storage.js';

/** Old enough candidates looked up per round trip: bounds memory and statement size on large stores. */
const BATCH_SIZE = 500;
/** How often (in listed objects) `onProgress` hears from a long walk, between batches. */
const PROGRESS_EVERY = 100;

/** Counts of one sweep; with `dryRun`, `removed` and `bytesFreed` are what would have gone. */
export interface SweepReport {
  /** Objects listed in storage. */
  scanned: number;
  /** Unreferenced objects older than the grace period, removed (or, dry run, that would be). */
  removed: number;
  /** Bytes of the removed objects (their size as listed). */
  bytesFreed: number;
  /**
   * Objects left alone because their key is not ours to judge: it does not parse as a file or
   * thumbnail key, or it names a collection id that is not declared (a collection taken out of
   * the code may come back, with its files), or it belongs to a record whose table has columns no
   * declared field names (a newer release's file field may hold it: only a gone record's files go).
   */
  skipped: number;
  /** Removals that failed (the error went to `onDeleteError`); the next sweep tries again. */
  failed: number;
  /** False when another instance held the sweep lock: nothing was scanned or removed. */
  locked: boolean;
}

/** Options of `sweepUnreferencedFiles`. */
export interface SweepOptions {
  database: Knex;
  registry: SchemaRegistry;
  storage: Storage;
  /**
   * The grace period: only objects last modified more than this long before `now` may go. Files
   * are written before their record's transaction commits, so anything younger may belong to a
   * transaction still in flight; keep it well above your longest request.
   */
  minAgeMs: number;
  /** Count what would go without removing anything. */
  dryRun?: boolean;
  /** The clock, for tests. Default: when the sweep starts. */
  now?: Date;
  /** Hears the running counts every few hundred objects and after each batch (a CLI progress line). */
  onProgress?: (progress: { scanned: number; removed: number }) => void;
  /** Hears each failed removal; the sweep carries on and counts it in `failed`. */
  onDeleteError?: (failure: { key: string; error: unknown }) => void;
  /** Stops the walk at the next listed object (shutdown); the report then covers what was done so far. */
  signal?: AbortSignal;
}

/**
 * Removes stored files that no record references any more and that are older than the grace
 * period (docs/storage.md): leftovers of crashed requests, of removals that failed after a commit, of
 * thumbnails of replaced files. Uploads and deletes clean up after themselves; this catches what
 * they could not.
 *
 * Judges every object by its key: `{collectionId}/{recordId}/{name}` goes when the record is gone
 * or none of its file fields holds `name`; a thumbnail `{collectionId}/{recordId}/thumbs_{name}/
 * {spec}_{name}` goes when its original `name` would. Keys it cannot parse and unknown collection
 * ids are skipped, never removed. Runs under the advisory lock `FILE_SWEEP_LOCK_KEY`, so with
 * several instances on one database one sweeps and the others return `locked: false` at once.
 *
 * Storage objects are checked against the database in batches, so memory stays bounded whatever
 * the store's size. A record that starts referencing a name after the check cannot lose it: the
 * only way to reference a stored name is to upload it (a young file) or to keep one the record
 * already holds (which the check saw).
 */
export async function sweepUnreferencedFiles(options: SweepOptions): Promise<SweepReport> {
  if (!Number.isFinite(options.minAgeMs) || options.minAgeMs < 0) {
    throw new RangeError(`minAgeMs must be a non-negative number of milliseconds, got ${String(options.minAgeMs)}`);
  }
  const outcome = await runWithTryAdvisoryLock({ runner: new StatementRunner(options.database), key: FILE_SWEEP_LOCK_KEY }, (runner) => walkStorage(runner, options));
  if (!outcome.acquired) return { scanned: 0, removed: 0, bytesFreed: 0, skipped: 0, failed: 0, locked: false };
  return outcome.result;
}

/** When the sweep of unreferenced files runs, and which files it may remove: the router's `fileSweep` option. */
export interface FileSweepOptions {
  /** Milliseconds from the end of one sweep to the start of the next. Default 6 hours. */
  intervalMs?: number;
  /** Minimum age in milliseconds of a file the sweep may remove (the grace period, as `SweepOptions.minAgeMs`). Default 24 hours. */
  minAgeMs?: number;
}

/** Options of `startFileSweeper`: the `fileSweep` option resolved (and checked, in lib/options.ts), and what it sweeps. */
export interface FileSweeperOptions extends Required<FileSweepOptions> {
  database: Knex;
  registry: SchemaRegistry;
  storage: Storage;
  /**
   * Delay before the first sweep. Default: one minute, or `intervalMs` when shorter. Not a full
   * interval, so that a service redeployed more often than its interval still gets swept.
   */
  initialDelayMs?: number;
  /** Where failures (and what a sweep removed) are reported; a sweep error never throws. */
  logger: Logger;
}

/** A running periodic sweep. */
export interface FileSweeper {
  /** Cancels the next run and waits for a running one to stop (at its next listed object, or once its current batch is done). */
  stop(): Promise<void>;
}

/**
 * Sweeps periodically in the background (the router's `fileSweep` option). Runs never overlap
 * (the next is scheduled when one ends), the timer does not keep the process alive, and errors
 * (database down, storage failing) are logged and retried at the next interval rather than thrown.
 */
export function startFileSweeper(options: FileSweeperOptions): FileSweeper {
  const firstDelay = options.initialDelayMs ?? Math.min(options.intervalMs, 60_000);
  const abort = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;

  const runOnce = async (): Promise<void> => {
    try {
      const report = await sweepUnreferencedFiles({
        database: options.database,
        registry: options.registry,
        storage: options.storage,
        minAgeMs: options.minAgeMs,
        signal: abort.signal,
        onDeleteError: ({ key, error }) => options.logger.warn(`file sweep: could not remove ${key}`, error),
      });
      if (report.removed > 0 || report.failed > 0) {
        options.logger.info(
          `file sweep: scanned ${report.scanned} files, removed ${report.removed} (${report.bytesFreed} bytes), skipped ${report.skipped}, failed ${report.failed}`,
        );
      }
    } catch (error) {
      options.logger.error(`file sweep failed: ${error instanceof Error ? error.message : String(error)}`, error);
    }
  };

  const schedule = (delay: number): void => {
    if (abort.signal.aborted) return;
    timer = setTimeout(() => {
      timer = undefined;
      running = runOnce().finally(() => {
        running = undefined;
        schedule(options.intervalMs);
      });
    }, delay);
    timer.unref();
  };
  schedule(firstDelay);

  return {
    async stop() {
      abort.abort();
      if (timer) clearTimeout(timer);
      timer = undefined;
      await running;
    },
  };
}

/** A key the sweep understands: a stored file, or one of its thumbnails. */
/**
 * The file names each of `recordIds` holds in its file fields, in one query per batch. An id that
 * is not a key of the result has no record: every file under it is unreferenced. A record without
 * files maps to an empty set. Rows are read by the record store, the one place that knows how the
 * driver returns single (text) and multi (jsonb) file columns.
 */
export async function selectReferencedFileNames(
  runner: StatementRunner,
  options: { collection: CollectionSchema; recordIds: readonly string[] },
): Promise<Map<string, Set<string>>> {
  const records = await RecordStore.on(runner).selectByIds({ collection: options.collection, ids: [...new Set(options.recordIds)] });
  return new Map(records.map((record) => [String(record.id), new Set(listFileNames(options.collection, record))]));
}

interface ParsedFileKey {
  collection: CollectionSchema;
  recordId: string;
  /** The stored name of the file, or of the original for a thumbnail. */
  name: string;
}

/** One old-enough object waiting for its batch's reference lookup. */
interface Candidate {
  object: StoredObject;
  key: ParsedFileKey;
}

/** The sweep proper, under the lock: walk, filter, check in batches, remove. */
async function walkStorage(runner: StatementRunner, options: SweepOptions): Promise<SweepReport> {
  const report: SweepReport = { scanned: 0, removed: 0, bytesFreed: 0, skipped: 0, failed: 0, locked: true };
  const cutoff = (options.now ?? new Date()).getTime() - options.minAgeMs;
  let batch: Candidate[] = [];
  const flush = async (): Promise<void> => {
    await processBatch({ runner, options, report }, batch);
    batch = [];
    options.onProgress?.({ scanned: report.scanned, removed: report.removed });
  };
  for await (const object of options.storage.list('')) {
    if (options.signal?.aborted) return report; // shutting down: what is left waits for the next sweep
    report.scanned++;
    const key = parseFileKey(options.registry, object.key);
    if (!key) report.skipped++;
    else if (object.modified.getTime() < cutoff) batch.push({ object, key });
    if (batch.length >= BATCH_SIZE) await flush();
    else if (report.scanned % PROGRESS_EVERY === 0) {
      options.onProgress?.({ scanned: report.scanned, removed: report.removed });
    }
  }
  await flush();
  return report;
}

/** Looks up the batch's records (one statement per collection) and removes what nothing references. */
async function processBatch(context: { runner: StatementRunner; options: SweepOptions; report: SweepReport }, batch: readonly Candidate[]): Promise<void> {
  const { runner, options, report } = context;
  const byCollection = new Map<CollectionSchema, Candidate[]>();
  for (const candidate of batch) {
    const list = byCollection.get(candidate.key.collection) ?? [];
    list.push(candidate);
    byCollection.set(candidate.key.collection, list);
  }
  for (const [collection, candidates] of byCollection) {
    const references = await selectReferencedFileNames(runner, { collection, recordIds: candidates.map((c) => c.key.recordId) });
    const newerColumns = await hasUndeclaredColumns(runner, collection);
    for (const { object, key } of candidates) {
      const held = references.get(key.recordId);
      if (held?.has(key.name)) continue;
      if (held && newerColumns) {
        report.skipped++;
        continue;
      }
      if (!options.dryRun) {
        try {
          await options.storage.delete(object.key);
        } catch (error) {
          report.failed++;
          options.onDeleteError?.({ key: object.key, error });
          continue;
        }
      }
      report.removed++;
      report.bytesFreed += object.size;
    }
  }
}

/**
 * Parses a storage key into the record and file name it belongs to, or `undefined` when it is not
 * a key our code writes for a declared collection. Strict on purpose: whatever is not clearly ours
 * (a stray file, a foreign layout, a collection id we do not know) is never removed.
 */
function parseFileKey(registry: SchemaRegistry, key: string): ParsedFileKey | undefined {
  const segments = key.split('/');
  if (segments.length !== 3 && segments.length !== 4) return undefined;
  const [collectionId, recordId, third, fourth] = segments as [string, string, string, string | undefined];
  const collection = registry.get(collectionId);
  if (!collection || collection.id !== collectionId || !isSafeRecordId(recordId)) return undefined;
  if (fourth === undefined) return isStoredFileName(third) ? { collection, recordId, name: third } : undefined;
  if (!third.startsWith('thumbs_')) return undefined;
  const name = third.slice('thumbs_'.length);
  // `{spec}_{name}`: a non-empty spec, then the original's name.
  if (!isStoredFileName(name) || fourth.length <= name.length + 1 || !fourth.endsWith(`_${name}`)) return undefined;
  return { collection, recordId, name };
}
