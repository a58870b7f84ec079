import { Worker } from 'node:worker_threads';
import { resolveWorkerFile } from '../resolve-worker-file.js';
import type { ThumbnailBatchFunction, ThumbnailBatchInput, ThumbnailBatchResult, ThumbnailFunction } from './render-thumbnail.js';
import type { ThumbnailJobMessage, ThumbnailResultMessage } from './thumbnail-worker.js';

/** A fixed set of thumbnail worker threads behind a `ThumbnailFunction`; `close()` stops them. */
export interface ThumbnailPool {
  /**
   * Queues one thumbnail and resolves with it, or rejects with the worker's error, when its worker
   * dies or overruns the job time limit, or when the pool is closed. Takes ownership of
   * `input.data`: when it spans its whole ArrayBuffer, that buffer is transferred (not copied) to
   * the worker and is empty afterwards.
   */
  render: ThumbnailFunction;
  /**
   * Queues several thumbnails of one original as one job: the worker decodes the original once.
   * Resolves with one result per spec, in order; rejects as `render` does, and when the original
   * itself cannot be used. Takes ownership of `input.data` like `render`.
   */
  renderBatch: ThumbnailBatchFunction;
  /** Terminates the workers; running and queued jobs reject, later calls of `render` too. Idempotent. */
  close(): Promise<void>;
}

/** Options of `createThumbnailPool`. */
export interface ThumbnailPoolOptions {
  /** Number of worker threads (at least 1); the router defaults it to the cores, at most 4. */
  size: number;
  /**
   * Longest a job may run before its worker is terminated and the job rejected (default 60 s): a
   * pathological image must not occupy a worker, and its waiting request, forever.
   */
  jobTimeoutMs?: number;
  /**
   * How long a worker may sit idle before it is stopped (default 30 s); the next job starts a new
   * one. An idle worker holds its own V8 heap and jimp: thumbnails are made
   * once per file and size, so most of the time there is nothing to render and no reason to keep
   * that memory.
   */
  idleTimeoutMs?: number;
}

/**
 * Heap limit of one worker. Pixel buffers live outside the heap, but jimp's intermediate arrays
 * do not; a bad image then kills only its worker (replaced on the next job), not the server.
 */
const WORKER_HEAP_MB = 512;
/**
 * Young-generation limit of one worker. V8's default lets it grow to tens of MB, which an idle
 * worker keeps until it stops; jimp's pixels and work buffers are typed arrays outside the heap, so
 * a small young generation does not slow thumbnails down, and a worker waiting for its next job
 * holds less memory (docs/configuration.md, "`thumbnail` and `thumbnailWorkers`").
 */
const WORKER_YOUNG_GENERATION_MB = 4;
const DEFAULT_JOB_TIMEOUT_MS = 60_000;
const DEFAULT_IDLE_TIMEOUT_MS = 30_000;

interface Job {
  id: number;
  input: ThumbnailBatchInput;
  resolve(results: ThumbnailBatchResult[]): void;
  reject(error: Error): void;
}

interface Slot {
  worker: Worker;
  job?: Job;
  timer?: NodeJS.Timeout;
  /** Stops the worker when it has been idle for `idleTimeoutMs`. */
  idle?: NodeJS.Timeout;
}

/**
 * Creates the default thumbnail renderer: `renderThumbnail` run in `size` worker threads, so that
 * decoding and resizing (synchronous, up to seconds per image) never stall the event loop. Workers
 * start on the first job (a router that never makes a thumbnail never starts one) and stay for the
 * next. Jobs wait in one FIFO queue and each worker runs one at a time. A worker that crashes, runs
 * out of memory or overruns `jobTimeoutMs` fails its job and is replaced by a fresh one, so no job
 * waits forever.
 */
export function createThumbnailPool(options: ThumbnailPoolOptions): ThumbnailPool {
  const size = options.size;
  if (!Number.isInteger(size) || size < 1) throw new TypeError(`thumbnail pool size must be an integer >= 1, got ${String(size)}`);
  const jobTimeoutMs = options.jobTimeoutMs ?? DEFAULT_JOB_TIMEOUT_MS;
  const idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
  const slots: Slot[] = [];
  const queue: Job[] = [];
  let nextId = 1;
  let closed = false;

  function dispatch(): void {
    while (!closed && queue.length > 0) {
      let slot = slots.find((candidate) => candidate.job === undefined);
      if (slot === undefined) {
        if (slots.length >= size) return;
        try {
          slot = startWorker();
        } catch (error) {
          // The worker file is missing (an unbuilt checkout): fail what waits instead of hanging.
          for (const job of queue.splice(0)) job.reject(error as Error);
          return;
        }
      }
      runJob(slot, queue.shift()!);
    }
  }

  function runJob(slot: Slot, job: Job): void {
    clearTimeout(slot.idle);
    slot.job = job;
    slot.worker.ref();
    slot.timer = setTimeout(() => {
      retireSlot(slot, new Error(`thumbnail job exceeded ${jobTimeoutMs} ms`));
      void slot.worker.terminate();
    }, jobTimeoutMs);
    slot.timer.unref();
    const message: ThumbnailJobMessage = { id: job.id, input: job.input };
    const data = job.input.data;
    // Only a buffer the input spans exactly is moved (a pooled Buffer shares its ArrayBuffer with
    // others); the tag check works across realms (Jest), where instanceof does not.
    const transferable = ArrayBuffer.isView(data) && data.byteOffset === 0 && data.byteLength === data.buffer.byteLength
      && Object.prototype.toString.call(data.buffer) === '[object ArrayBuffer]';
    try {
      slot.worker.postMessage(message, transferable ? [data.buffer as ArrayBuffer] : []);
    } catch (error) {
      // Not cloneable (a caller passed something odd): the worker never saw it and stays usable.
      finishJob(slot);
      job.reject(error as Error);
      dispatch();
    }
  }

  function startWorker(): Slot {
    // execArgv: [] so that the host's own node flags (an --input-type, a loader) never reach the worker.
    const worker = new Worker(resolveWorkerFile(import.meta.url, './thumbnail-worker.js'), {
      execArgv: [],
      resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB, maxYoungGenerationSizeMb: WORKER_YOUNG_GENERATION_MB },
    });
    const slot: Slot = { worker };
    worker.on('message', (message: ThumbnailResultMessage) => {
      const job = slot.job;
      if (job === undefined || message?.id !== job.id) return;
      finishJob(slot);
      if (message.results) job.resolve(message.results);
      else job.reject(new Error(message.error ?? 'thumbnail worker gave no result'));
      dispatch();
    });
    worker.on('error', (error) => retireSlot(slot, new Error(`thumbnail worker failed: ${error.message}`, { cause: error })));
    worker.on('exit', (code) => retireSlot(slot, new Error(`thumbnail worker exited with code ${code}`)));
    worker.unref();
    slots.push(slot);
    return slot;
  }

  function finishJob(slot: Slot): void {
    clearTimeout(slot.timer);
    slot.timer = undefined;
    slot.job = undefined;
    // An idle worker must not keep the host's process alive, nor its memory for long.
    slot.worker.unref();
    clearTimeout(slot.idle);
    if (slots.includes(slot)) {
      slot.idle = setTimeout(() => {
        if (slot.job !== undefined || !slots.includes(slot)) return;
        slots.splice(slots.indexOf(slot), 1);
        void slot.worker.terminate();
      }, idleTimeoutMs);
      slot.idle.unref();
    }
  }

  /** Forgets a dead (or doomed) worker and fails its job; the next dispatch starts a replacement. */
  function retireSlot(slot: Slot, reason: Error): void {
    const index = slots.indexOf(slot);
    if (index === -1) return;
    slots.splice(index, 1);
    const job = slot.job;
    finishJob(slot);
    job?.reject(reason);
    dispatch();
  }

  const renderBatch: ThumbnailBatchFunction = (input) =>
    new Promise<ThumbnailBatchResult[]>((resolve, reject) => {
      if (closed) {
        reject(new Error('thumbnail pool is closed'));
        return;
      }
      queue.push({ id: nextId++, input, resolve, reject });
      dispatch();
    });

  const render: ThumbnailFunction = async (input) => {
    const [result] = await renderBatch({ data: input.data, mimeType: input.mimeType, specs: [input.spec] });
    if (!result || 'error' in result) throw new Error(result?.error ?? 'thumbnail worker gave no result');
    return result.output;
  };

  async function close(): Promise<void> {
    if (closed) return;
    closed = true;
    const reason = new Error('thumbnail pool is closed');
    for (const job of queue.splice(0)) job.reject(reason);
    const workers = slots.splice(0);
    for (const slot of workers) {
      const job = slot.job;
      finishJob(slot);
      job?.reject(reason);
    }
    await Promise.all(workers.map((slot) => slot.worker.terminate()));
  }

  return { render, renderBatch, close };
}
