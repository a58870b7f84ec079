/**
 * Entry point of a thumbnail worker thread (started by thumbnail-pool.ts). Decoding and resizing
 * are synchronous CPU work that grows with the image's pixels; doing it here keeps the server's
 * event loop free. Protocol: the pool posts `{ id, input }` (one original, several specs) and the
 * worker answers `{ id, results }` (one per spec) or `{ id, error }` when the original itself
 * cannot be used (a message only: stacks stay inside), one job at a time.
 */
import { parentPort } from 'node:worker_threads';
import { renderThumbnailBatch, type ThumbnailBatchInput, type ThumbnailBatchResult } from './render-thumbnail.js';

/** A job as the pool posts it. */
export interface ThumbnailJobMessage {
  id: number;
  input: ThumbnailBatchInput;
}

/** The worker's answer to one job; exactly one of `results` and `error` is set. */
export interface ThumbnailResultMessage {
  id: number;
  results?: ThumbnailBatchResult[];
  error?: string;
}

const port = parentPort;
if (port === null) throw new Error('thumbnail-worker.js must be started as a worker thread');

port.on('message', (message: ThumbnailJobMessage) => {
  // A message off the protocol means the pool and this file disagree (a version mismatch, a bug):
  // throwing here ends the worker, and the pool fails the job and starts a fresh one.
  if (typeof message?.id !== 'number' || !ArrayBuffer.isView(message.input?.data) || !Array.isArray(message.input?.specs)) {
    throw new TypeError('malformed thumbnail job message');
  }
  void answerJob(message).then((answer) => {
    // Transfer rather than copy: a thumbnail can be megabytes and the copy would be on the main thread.
    const transfer = (answer.results ?? []).flatMap((result) => ('output' in result ? [result.output.data.buffer as ArrayBuffer] : []));
    port.postMessage(answer, transfer);
  });
});

async function answerJob(message: ThumbnailJobMessage): Promise<ThumbnailResultMessage> {
  const id = message.id;
  try {
    const results = await renderThumbnailBatch(message.input);
    return { id, results: results.map(ownBuffer) };
  } catch (error) {
    return { id, error: error instanceof Error ? error.message : String(error) };
  }
}

/**
 * The transferred buffer must hold exactly the thumbnail: a view into a larger (pooled) buffer
 * would move, and expose, the rest of it too.
 */
function ownBuffer(result: ThumbnailBatchResult): ThumbnailBatchResult {
  if (!('output' in result)) return result;
  const data = result.output.data;
  const own = data.byteOffset === 0 && data.byteLength === data.buffer.byteLength ? data : data.slice();
  return { output: { data: own, contentType: result.output.contentType } };
}
