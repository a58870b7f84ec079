/**
 * Entry point of the embedded database's worker thread (started by embedded-session.ts). PGlite
 * runs Postgres compiled to WebAssembly synchronously on the thread that calls it: a slow
 * statement there would freeze every request of the host app. Here it freezes only this thread,
 * and the main thread stays free to answer, time out and, for a database on disk, terminate and
 * replace this worker.
 *
 * The worker speaks Postgres's wire protocol, as a server would: the main thread's `pg` client
 * writes protocol bytes (posted as ArrayBuffers), the worker feeds whole messages to PGlite and
 * posts back what PGlite answers, one reply per batch received (empty when PGlite says nothing),
 * so the session can tell when the worker is idle. So the embedded engine goes through the same
 * driver, type parsers and errors as a Postgres server. Besides bytes: the worker first posts
 * `{ type: 'ready' }` (or `{ type: 'failed', message }`); `{ type: 'close' }` closes PGlite
 * cleanly once the statements before it are done, and is answered `{ type: 'closed' }`.
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

/** The worker's messages besides protocol bytes. */
export type EmbeddedWorkerEvent = { type: 'ready' } | { type: 'failed'; message: string } | { type: 'closed' };

/** The protocol's version 3.0 in a StartupMessage, which (unlike every later message) has no type byte. */
const PROTOCOL_3 = 196_608;
/** Terminate ('X'): the client's goodbye. The session ends by closing the worker, not the PGlite session. */
const TERMINATE = 0x58;

const port = parentPort;
if (port === null) throw new Error('embedded-worker.js must be started as a worker thread');
const { directory, assets } = (workerData ?? {}) as EmbeddedWorkerData;

let database: PGlite;
try {
  database = await PGlite.create(directory, { ...assets } as PGliteOptions);
  port.postMessage({ type: 'ready' } satisfies EmbeddedWorkerEvent);
} catch (error) {
  port.postMessage({ type: 'failed', message: error instanceof Error ? error.message : String(error) } satisfies EmbeddedWorkerEvent);
  process.exit(1);
}

let received = Buffer.alloc(0);
let startupSeen = false;
/** Batches run one after the other, in the order they came. */
let queue: Promise<void> = Promise.resolve();

/**
 * Splits `received` into the complete messages it holds (dropping Terminate) and the incomplete
 * rest, which waits for the next chunk.
 */
function takeCompleteMessages(): Buffer {
  const complete: Buffer[] = [];
  let offset = 0;
  for (;;) {
    const left = received.length - offset;
    let length: number;
    if (!startupSeen) {
      if (left < 8) break;
      if (received.readInt32BE(offset + 4) !== PROTOCOL_3) throw new Error('the embedded database expects a Postgres 3.0 StartupMessage first');
      length = received.readInt32BE(offset);
    } else {
      if (left < 5) break;
      length = 1 + received.readInt32BE(offset + 1);
    }
    if (left < length) break;
    if (startupSeen && received[offset] === TERMINATE) {
      offset += length;
      continue;
    }
    complete.push(received.subarray(offset, offset + length));
    startupSeen = true;
    offset += length;
  }
  const batch = Buffer.concat(complete);
  received = Buffer.from(received.subarray(offset));
  return batch;
}

async function runBatch(batch: Buffer): Promise<void> {
  const replies: Buffer[] = [];
  if (batch.length > 0) {
    // PGlite hands out views of its own memory: each is copied before the next call reuses it.
    await database.execProtocolRawStream(new Uint8Array(batch.buffer, batch.byteOffset, batch.byteLength), { onRawData: (data) => void replies.push(Buffer.from(data)) });
  }
  const reply = Buffer.concat(replies);
  const bytes = reply.buffer.slice(reply.byteOffset, reply.byteOffset + reply.byteLength);
  port!.postMessage(bytes, [bytes]);
}

port.on('message', (message: ArrayBuffer | { type: 'close' }) => {
  if (!(message instanceof ArrayBuffer)) {
    queue = queue.then(() => database.close()).finally(() => port.postMessage({ type: 'closed' } satisfies EmbeddedWorkerEvent));
    return;
  }
  received = received.length === 0 ? Buffer.from(message) : Buffer.concat([received, Buffer.from(message)]);
  // A malformed stream ends the worker: the session reports it and the pool replaces the connection.
  const batch = takeCompleteMessages();
  queue = queue.then(() => runBatch(batch));
});
