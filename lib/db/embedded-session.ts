import { Blob } from 'node:buffer';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { EmbeddedAssets, EmbeddedErrorData, EmbeddedResult, EmbeddedStatementMessage, EmbeddedWorkerData, EmbeddedWorkerMessage } from './embedded-worker.js';
import { resolveWorkerFile } from './resolve-worker-file.js';

/** How long a clean close may take (PGlite checkpoints) before the worker is terminated instead. */
const CLOSE_TIMEOUT_MS = 10_000;

/** A statement the embedded engine refused, with the fields Postgres reports (`code`, `constraint`, ...). */
export class EmbeddedDatabaseError extends Error {
  [field: string]: unknown;

  constructor(data: EmbeddedErrorData) {
    super(data.message);
    this.name = 'EmbeddedDatabaseError';
    for (const [key, value] of Object.entries(data)) if (key !== 'message') this[key] = value;
  }
}

let assets: Promise<EmbeddedAssets | undefined> | undefined;

/**
 * PGlite's WebAssembly, compiled once per process, and its file-system bundle, read once: every
 * worker gets them instead of loading its own (a new in-memory database, or a worker replaced
 * after a timeout, starts about a third sooner). Undefined if this PGlite keeps its files
 * elsewhere: each worker then loads its own, as PGlite does by default.
 */
function loadPgliteAssets(): Promise<EmbeddedAssets | undefined> {
  const { WebAssembly } = globalThis as unknown as { WebAssembly: { compile(bytes: Uint8Array): Promise<unknown> } };
  assets ??= (async () => {
    try {
      const dist = path.dirname(createRequire(import.meta.url).resolve('@electric-sql/pglite'));
      const [pgliteWasmModule, initdbWasmModule, bundle] = await Promise.all([
        readFile(path.join(dist, 'pglite.wasm')).then((bytes) => WebAssembly.compile(bytes)),
        readFile(path.join(dist, 'initdb.wasm')).then((bytes) => WebAssembly.compile(bytes)),
        readFile(path.join(dist, 'pglite.data')),
      ]);
      return { pgliteWasmModule, initdbWasmModule, fsBundle: new Blob([bundle]) };
    } catch {
      return undefined;
    }
  })();
  return assets;
}

interface Pending {
  resolve(result: EmbeddedResult): void;
  reject(error: Error): void;
}

/**
 * The main thread's side of one embedded-engine worker: one PGlite session, owned by one thread.
 * Statements are posted to the worker and answered by message, so the event loop never runs a
 * query. A session whose worker ended (terminated, crashed, closed) is spent: `failure` says why,
 * and every statement, pending or later, rejects with it.
 */
export class EmbeddedSession {
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private ended: Error | undefined;
  private closing: Promise<void> | undefined;

  private constructor(private readonly worker: Worker) {
    worker.on('message', (message: EmbeddedWorkerMessage) => {
      if (!('id' in message)) return;
      const pending = this.pending.get(message.id);
      if (!pending) return;
      this.pending.delete(message.id);
      this.unrefWhenIdle();
      if ('result' in message) pending.resolve(message.result);
      else pending.reject(new EmbeddedDatabaseError(message.error));
    });
    worker.on('error', (error) => this.end(new Error(`the embedded database worker failed: ${error.message}`, { cause: error })));
    worker.on('exit', (code) => this.end(new Error(`the embedded database worker exited (code ${code})`)));
  }

  /**
   * Starts a worker and resolves once its PGlite is open: the database in `directory`, or a new
   * one in memory without it. Rejects with PGlite's reason when it cannot open.
   */
  static async start(options: { directory?: string }): Promise<EmbeddedSession> {
    const worker = new Worker(resolveWorkerFile(import.meta.url, './embedded-worker.js'), {
      workerData: { directory: options.directory, assets: await loadPgliteAssets() } satisfies EmbeddedWorkerData,
      // Not the host's node flags: some are refused in a worker (--input-type), none is needed.
      execArgv: [],
    });
    return new Promise((resolve, reject) => {
      const onMessage = (message: EmbeddedWorkerMessage) => {
        if (!('type' in message)) return;
        cleanup();
        worker.unref();
        if (message.type === 'failed') reject(new EmbeddedDatabaseError({ ...message.error, message: `the embedded database could not open: ${message.error.message}` }));
        else resolve(new EmbeddedSession(worker));
      };
      const onError = (error: Error) => {
        cleanup();
        reject(new Error(`the embedded database could not open: ${error.message}`, { cause: error }));
      };
      const onExit = (code: number) => onError(new Error(`its worker exited (code ${code})`));
      const cleanup = () => {
        worker.off('message', onMessage);
        worker.off('error', onError);
        worker.off('exit', onExit);
      };
      worker.on('message', onMessage);
      worker.on('error', onError);
      worker.on('exit', onExit);
    });
  }

  /** Why this session can no longer run statements, or undefined while it can. */
  get failure(): Error | undefined {
    return this.ended;
  }

  /** Runs one statement in the worker; values travel as bound parameters. */
  run(sql: string, params: readonly unknown[]): Promise<EmbeddedResult> {
    if (this.ended) return Promise.reject(this.ended);
    const id = this.nextId++;
    return new Promise<EmbeddedResult>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      // A statement under way keeps the process alive (a CLI awaiting it must not exit); an idle
      // database does not, like an idle pool would not hold a host that forgot to close it.
      this.worker.ref();
      try {
        this.worker.postMessage({ id, sql, params: [...params] } satisfies EmbeddedStatementMessage);
      } catch (error) {
        // A parameter that cannot cross a thread (a function, a symbol): the statement never ran.
        this.pending.delete(id);
        this.unrefWhenIdle();
        reject(error as Error);
      }
    });
  }

  /**
   * Stops the worker at once, even in the middle of a statement (the only way to stop a PGlite
   * statement: it does not honour statement_timeout). Pending statements reject with `reason`.
   * For a database on disk this is a crash as far as Postgres is concerned: the next session
   * recovers from its write-ahead log, committed transactions kept, the interrupted one gone.
   */
  async terminate(reason: Error): Promise<void> {
    this.end(reason);
    await this.worker.terminate();
  }

  /** Closes PGlite cleanly (a checkpoint, so that the next open is quick) and ends the worker. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      if (this.ended) {
        await this.worker.terminate();
        return;
      }
      const closed = new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, CLOSE_TIMEOUT_MS);
        timer.unref();
        this.worker.on('message', (message: EmbeddedWorkerMessage) => {
          if ('type' in message && message.type === 'closed') {
            clearTimeout(timer);
            resolve();
          }
        });
        this.worker.once('exit', () => {
          clearTimeout(timer);
          resolve();
        });
      });
      this.worker.postMessage({ type: 'close' });
      await closed;
      await this.terminate(new Error('the embedded database is closed'));
    })();
    return this.closing;
  }

  private unrefWhenIdle(): void {
    if (this.pending.size === 0) this.worker.unref();
  }

  private end(reason: Error): void {
    this.ended ??= reason;
    for (const pending of this.pending.values()) pending.reject(this.ended);
    this.pending.clear();
  }
}
