import { Blob } from 'node:buffer';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Duplex } from 'node:stream';
import { types } from 'node:util';
import { Worker } from 'node:worker_threads';
import type { EmbeddedAssets, EmbeddedWorkerCommand, EmbeddedWorkerData, EmbeddedWorkerEvent } from './embedded-worker.js';
import { resolveWorkerFile } from '../../resolve-worker-file.js';

/** How long a clean close may take (PGlite checkpoints) before the worker is terminated instead. */
const CLOSE_TIMEOUT_MS = 10_000;

let assets: Promise<EmbeddedAssets | undefined> | undefined;

/** A new worker thread running embedded-worker.js with `data` and PGlite's shared assets. */
async function startWorker(data: Omit<EmbeddedWorkerData, 'assets'>): Promise<Worker> {
  return new Worker(resolveWorkerFile(import.meta.url, './embedded-worker.js'), {
    workerData: { ...data, assets: await loadPgliteAssets() } satisfies EmbeddedWorkerData,
    // Not the host's node flags: some are refused in a worker (--input-type), none is needed.
    execArgv: [],
  });
}

/**
 * PGlite's WebAssembly, compiled once per process, and its file-system bundle, read once: every
 * worker gets them instead of loading its own, so a new in-memory database, or a worker replaced
 * after a timeout, starts without compiling or reading them again. Undefined if this PGlite keeps
 * its files elsewhere: each worker then loads its own, as PGlite does by default.
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

/**
 * The main thread's side of one embedded-engine worker: one PGlite session, owned by one thread,
 * reached as a byte stream (`openStream`) that node-postgres uses in place of a socket. The
 * event loop never runs a statement. A session whose worker ended (terminated, crashed,
 * closed) is spent: `failure` says why, and its stream is destroyed with that reason.
 */
export class EmbeddedSession {
  private ended: Error | undefined;
  private closing: Promise<void> | undefined;
  private stream: Duplex | undefined;
  private readonly onEnd: ((reason: Error) => void)[] = [];
  /** Resolves once the worker thread has exited, however it ended (its database folder is then free). */
  readonly exited: Promise<void>;

  private constructor(private readonly worker: Worker) {
    worker.on('error', (error) => this.end(new Error(`the embedded database worker failed: ${error.message}`, { cause: error })));
    worker.on('exit', (code) => this.end(new Error(`the embedded database worker exited (code ${code})`)));
    this.exited = new Promise((resolve) => worker.once('exit', () => resolve()));
  }

  /**
   * Starts a worker, or tells `spare` (from `startSpare`) to open, and resolves once its PGlite
   * is open: the database in `directory`, or a new one in memory without it. Rejects with
   * PGlite's reason when it cannot open (or the spare is gone).
   */
  static async start(options: { directory?: string; spare?: Worker }): Promise<EmbeddedSession> {
    // threadId is -1 once a thread has stopped: a spare that died idle is replaced by a new worker.
    const spare = options.spare !== undefined && options.spare.threadId !== -1 ? options.spare : undefined;
    const worker = spare ?? (await startWorker({ directory: options.directory }));
    if (spare) {
      worker.ref();
      worker.postMessage({ type: 'open', directory: options.directory } satisfies EmbeddedWorkerCommand);
    }
    return new Promise((resolve, reject) => {
      const onMessage = (message: EmbeddedWorkerEvent) => {
        cleanup();
        if (message.type === 'failed') reject(new Error(`the embedded database could not open: ${message.message}`));
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
      worker.once('message', onMessage);
      worker.on('error', onError);
      worker.on('exit', onExit);
    });
  }

  /**
   * A worker started ahead, loaded and waiting for `start({ spare })` to tell it which database to
   * open: a restart on it skips the thread's start-up and module loading, part of what every
   * client waits for. It does not keep the process alive; terminate it when it is not used.
   */
  static async startSpare(): Promise<Worker> {
    const worker = await startWorker({ spare: true });
    // An idle spare that fails is simply not used: start() on it rejects.
    worker.on('error', () => undefined);
    worker.unref();
    return worker;
  }

  /** Why this session can no longer run statements, or undefined while it can. */
  get failure(): Error | undefined {
    return this.ended;
  }

  /** Calls `listener` once, when the worker has ended for good (not for a `close()`). */
  onFailure(listener: (reason: Error) => void): void {
    this.onEnd.push(listener);
  }

  /**
   * The session as a byte stream for node-postgres (`new pg.Client({ stream })`): what the client
   * writes goes to PGlite, what PGlite answers comes back. One stream per session: PGlite is one
   * connection. Writes of one turn are sent as one message, so that Parse, Bind, Execute and Sync
   * reach PGlite together. While a reply is due the worker keeps the process alive (a command
   * awaiting a statement must not exit); an idle one does not.
   */
  openStream(): Duplex {
    if (this.stream) throw new Error('an embedded database session has one connection');
    let queued: Buffer[] = [];
    let awaiting = 0;
    const worker = this.worker;
    const flush = () => {
      const batch = Buffer.concat(queued);
      queued = [];
      const bytes = batch.buffer.slice(batch.byteOffset, batch.byteOffset + batch.byteLength);
      awaiting++;
      worker.ref();
      worker.postMessage(bytes, [bytes]);
    };
    const stream = new Duplex({
      read() {},
      write(chunk: Buffer, _encoding, callback) {
        if (queued.length === 0) queueMicrotask(flush);
        queued.push(chunk);
        callback();
      },
      final(callback) {
        this.push(null);
        callback();
      },
    });
    worker.on('message', (message: ArrayBuffer | EmbeddedWorkerEvent) => {
      // isArrayBuffer, not instanceof: under a test runner's vm context this module is another realm.
      if (!types.isArrayBuffer(message)) return;
      if (--awaiting === 0) worker.unref();
      if (message.byteLength > 0 && !stream.destroyed) stream.push(Buffer.from(message));
    });
    // What node-postgres calls on a socket.
    Object.assign(stream, {
      connect: () => {
        process.nextTick(() => stream.emit('connect'));
        return stream;
      },
      setNoDelay: () => stream,
      setKeepAlive: () => stream,
      ref: () => stream,
      unref: () => stream,
    });
    this.stream = stream;
    if (this.ended) process.nextTick(() => stream.destroy(this.ended));
    return stream;
  }

  /**
   * Stops the worker at once, even in the middle of a statement (the only way to stop a PGlite
   * statement: it does not honour statement_timeout). The stream fails with `reason`. For a
   * database on disk this is a crash as far as Postgres is concerned: the next session recovers
   * from its write-ahead log, committed transactions kept, the interrupted one gone.
   */
  async terminate(reason: Error): Promise<void> {
    this.end(reason);
    await this.worker.terminate();
  }

  /** Closes PGlite cleanly (a checkpoint, so that the next open is quick) and ends the worker. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      if (!this.ended) {
        const closed = new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, CLOSE_TIMEOUT_MS);
          timer.unref();
          this.worker.on('message', (message: ArrayBuffer | EmbeddedWorkerEvent) => {
            if (!types.isArrayBuffer(message) && (message as EmbeddedWorkerEvent).type === 'closed') {
              clearTimeout(timer);
              resolve();
            }
          });
          this.worker.once('exit', () => {
            clearTimeout(timer);
            resolve();
          });
        });
        this.ended = new Error('the embedded database is closed');
        this.worker.ref();
        this.worker.postMessage({ type: 'close' });
        await closed;
      }
      this.stream?.destroy();
      await this.worker.terminate();
    })();
    return this.closing;
  }

  private end(reason: Error): void {
    if (this.ended) return;
    this.ended = reason;
    this.stream?.destroy(reason);
    for (const listener of this.onEnd) listener(reason);
  }
}
