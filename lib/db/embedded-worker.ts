/**
 * Entry point of the embedded database's worker thread (started by embedded-session.ts). PGlite
 * runs Postgres compiled to WebAssembly synchronously on the thread that calls it: a slow
 * statement there would freeze every request of the host app. Here it freezes only this thread,
 * and the main thread stays free to answer, time out and, for a database on disk, terminate and
 * replace this worker.
 *
 * Protocol: once PGlite is open the worker posts `{ type: 'ready' }` (or `{ type: 'failed',
 * error }`). The session then posts `{ id, sql, params }` one at a time and gets `{ id, result }`
 * or `{ id, error }`; `{ type: 'close' }` closes PGlite cleanly and answers `{ type: 'closed' }`.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite, type PGliteOptions } from '@electric-sql/pglite';

/**
 * PGlite's compiled WebAssembly modules and file-system bundle, loaded once by the main thread
 * for every worker: the options of the same names of `PGlite.create`. (Typed loosely on purpose:
 * naming WebAssembly's types would tie our declarations to the DOM library.)
 */
export interface EmbeddedAssets {
  pgliteWasmModule: unknown;
  initdbWasmModule: unknown;
  fsBundle: Blob;
}

/** What the session passes as `workerData`: the folder of a database on disk (none for one in memory), and PGlite's assets if loaded. */
export interface EmbeddedWorkerData {
  directory?: string;
  assets?: EmbeddedAssets;
}

/** A statement as the session posts it. */
export interface EmbeddedStatementMessage {
  id: number;
  sql: string;
  params: unknown[];
}

/** A statement's result, as PGlite gives it (rows as objects, parsed by PGlite's type parsers). */
export interface EmbeddedResult {
  rows: Record<string, unknown>[];
  fields: { name: string; dataTypeID: number }[];
  affectedRows?: number;
}

/**
 * A database error reduced to what crosses a thread: the message and the primitive fields
 * Postgres reports (`code`, `constraint`, `detail`, ...). An Error's own properties would be
 * lost by the structured clone.
 */
export interface EmbeddedErrorData {
  message: string;
  [field: string]: string | number | undefined;
}

/** Every message the worker posts. */
export type EmbeddedWorkerMessage =
  | { type: 'ready' }
  | { type: 'failed'; error: EmbeddedErrorData }
  | { type: 'closed' }
  | { id: number; result: EmbeddedResult }
  | { id: number; error: EmbeddedErrorData };

/** Reduces an error to its message and primitive fields. */
export function describeEmbeddedError(error: unknown): EmbeddedErrorData {
  const data: EmbeddedErrorData = { message: error instanceof Error ? error.message : String(error) };
  if (error && typeof error === 'object') {
    for (const [key, value] of Object.entries(error)) {
      if (typeof value === 'string' || typeof value === 'number') data[key] = value;
    }
  }
  return data;
}

const port = parentPort;
if (port === null) throw new Error('embedded-worker.js must be started as a worker thread');
const { directory, assets } = (workerData ?? {}) as EmbeddedWorkerData;

let database: PGlite;
try {
  database = await PGlite.create(directory, { ...assets } as PGliteOptions);
  port.postMessage({ type: 'ready' } satisfies EmbeddedWorkerMessage);
} catch (error) {
  port.postMessage({ type: 'failed', error: describeEmbeddedError(error) } satisfies EmbeddedWorkerMessage);
  process.exit(1);
}

port.on('message', (message: EmbeddedStatementMessage | { type: 'close' }) => {
  if ('type' in message) {
    void database.close().finally(() => port.postMessage({ type: 'closed' } satisfies EmbeddedWorkerMessage));
    return;
  }
  // PGlite queues statements itself; the session sends one at a time anyway (one Knex connection).
  database.query(message.sql, message.params).then(
    (result) => port.postMessage({ id: message.id, result: { rows: result.rows as Record<string, unknown>[], fields: result.fields, affectedRows: result.affectedRows } } satisfies EmbeddedWorkerMessage),
    (error: unknown) => port.postMessage({ id: message.id, error: describeEmbeddedError(error) } satisfies EmbeddedWorkerMessage),
  );
});
