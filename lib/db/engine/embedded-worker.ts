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
 * cleanly once the statements before it are done, and is answered `{ type: 'closed' }`. A spare
 * worker (`spare` in its data) loads, then waits for `{ type: 'open', directory }` before it
 * opens the database: started ahead, it spares a restart the thread's own start-up.
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

/**
 * What the session passes as `workerData`: the folder of a database on disk (none for one in
 * memory), PGlite's assets if loaded, and `spare` for a worker that waits for its folder (an
 * `open` command) instead.
 */
export interface EmbeddedWorkerData {
  directory?: string;
  assets?: EmbeddedAssets;
  spare?: boolean;
}

/** The session's messages besides protocol bytes. */
export type EmbeddedWorkerCommand = { type: 'open'; directory?: string } | { type: 'close' };

/** The worker's messages besides protocol bytes. */
export type EmbeddedWorkerEvent = { type: 'ready' } | { type: 'failed'; message: string } | { type: 'closed' };

/** The protocol's version 3.0 in a StartupMessage, which (unlike every later message) has no type byte. */
const PROTOCOL_3 = 196_608;
/** Terminate ('X'): the client's goodbye. The session ends by closing the worker, not the PGlite session. */
const TERMINATE = 0x58;
/** ReadyForQuery ('Z'), the last message of every reply to a Sync or a simple Query; its status byte 'I' means idle, outside a transaction. */
const READY_FOR_QUERY = 0x5a;
const IDLE = 0x49;

/**
 * Settings added to PGlite's own start parameters. `shared_buffers`: PGlite's 128 MB are zeroed at
 * every start (Emscripten's mmap), and every worker restart pays for it (a restart is what a
 * statement timeout costs every client); 32 MB leave a quarter as much to zero, and scans lose
 * nothing (a scan of more than a quarter of the buffers reads through a small ring of them
 * anyway, so large tables never lived in them).
 */
const START_SETTINGS = ['-c', 'shared_buffers=32MB'];

/**
 * How long the session must be idle before a database on disk is checkpointed. A standalone
 * Postgres has no checkpointer: without this, the next restart (a statement timeout) replays
 * every write since the engine opened, which after a large import takes longer than opening the
 * folder itself (docs/limits.md, "How a statement is cancelled"). A checkpoint after an idle
 * second writes only what that second left, and is taken while nobody waits.
 */
const IDLE_CHECKPOINT_MS = 1_000;
/** The simple-query message `CHECKPOINT`, sent through the protocol path the client's own statements take. */
const CHECKPOINT_QUERY = (() => {
  const sql = Buffer.from('CHECKPOINT\0');
  const message = Buffer.alloc(5 + sql.length);
  message[0] = 0x51;
  message.writeInt32BE(4 + sql.length, 1);
  sql.copy(message, 5);
  return new Uint8Array(message);
})();

const port = parentPort;
if (port === null) throw new Error('embedded-worker.js must be started as a worker thread');
const data = (workerData ?? {}) as EmbeddedWorkerData;
const assets = data.assets;
const directory = data.spare ? (await nextCommand()).directory : data.directory;

/** A spare's first command: the folder to open (anything else ends the spare). */
async function nextCommand(): Promise<Extract<EmbeddedWorkerCommand, { type: 'open' }>> {
  const command = await new Promise<EmbeddedWorkerCommand>((resolve) => port!.once('message', resolve));
  if (command.type !== 'open') process.exit(0);
  return command;
}

// PGlite's defaults (single-user mode and the rest) are replaced by `startParams`, not added to: extend them.
const { defaultStartParams } = PGlite as unknown as { defaultStartParams?: string[] };
let database: PGlite;
try {
  database = await PGlite.create(directory, { ...assets, ...(defaultStartParams ? { startParams: [...defaultStartParams, ...START_SETTINGS] } : {}) } as PGliteOptions);
  port.postMessage({ type: 'ready' } satisfies EmbeddedWorkerEvent);
} catch (error) {
  port.postMessage({ type: 'failed', message: error instanceof Error ? error.message : String(error) } satisfies EmbeddedWorkerEvent);
  process.exit(1);
}

let received = Buffer.alloc(0);
let startupSeen = false;
/** Batches run one after the other, in the order they came. */
let queue: Promise<void> = Promise.resolve();
/** Whether statements ran since the last checkpoint, and the timer of the next idle one. */
let ranSinceCheckpoint = false;
let checkpointTimer: NodeJS.Timeout | undefined;

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
  if (batch.length > 0) ranSinceCheckpoint = true;
  // Cleared after every batch, set again only when the session is idle: never inside a transaction.
  clearTimeout(checkpointTimer);
  checkpointTimer = directory !== undefined && ranSinceCheckpoint && endsIdle(reply) ? setTimeout(checkpointWhileIdle, IDLE_CHECKPOINT_MS) : undefined;
  const bytes = reply.buffer.slice(reply.byteOffset, reply.byteOffset + reply.byteLength);
  port!.postMessage(bytes, [bytes]);
}

/** Whether `reply` ends with ReadyForQuery saying idle: no transaction is open, a checkpoint may run between statements. */
function endsIdle(reply: Buffer): boolean {
  const at = reply.length - 6;
  return at >= 0 && reply[at] === READY_FOR_QUERY && reply.readInt32BE(at + 1) === 5 && reply[at + 5] === IDLE;
}

/** Checkpoints after IDLE_CHECKPOINT_MS without a batch (one that comes meanwhile waits for it: the queue). */
function checkpointWhileIdle(): void {
  checkpointTimer = undefined;
  ranSinceCheckpoint = false;
  queue = queue.then(() => database.execProtocolRawStream(CHECKPOINT_QUERY, { onRawData: () => undefined })).catch(() => undefined);
}

port.on('message', (message: ArrayBuffer | EmbeddedWorkerCommand) => {
  clearTimeout(checkpointTimer);
  checkpointTimer = undefined;
  if (!(message instanceof ArrayBuffer)) {
    if (message.type !== 'close') return;
    queue = queue.then(() => database.close()).finally(() => port.postMessage({ type: 'closed' } satisfies EmbeddedWorkerEvent));
    return;
  }
  received = received.length === 0 ? Buffer.from(message) : Buffer.concat([received, Buffer.from(message)]);
  // A malformed stream ends the worker: the session reports it and the pool replaces the connection.
  const batch = takeCompleteMessages();
  queue = queue.then(() => runBatch(batch));
});
