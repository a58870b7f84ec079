/**
 * Entry point of a thumbnail worker thread (started by thumbnail-pool.ts). Decoding and resizing
 * are synchronous CPU work of up to seconds per image; doing it here keeps the server's event loop
 * free. Protocol: the pool posts `{ id, input }` and the worker answers `{ id, output }` or
 * `{ id, error }` (a message only: stacks stay inside), one job at a time.
 */
import { parentPort } from 'node:worker_threads';
import { renderThumbnail, type ThumbnailInput, type ThumbnailOutput } from './render-thumbnail.js';

/** A job as the pool posts it. */
export interface ThumbnailJobMessage {
  id: number;
  input: ThumbnailInput;
}

/** The worker's answer to one job; exactly one of `output` and `error` is set. */
export interface ThumbnailResultMessage {
  id: number;
  output?: ThumbnailOutput;
  error?: string;
}

const port = parentPort;
if (port === null) throw new Error('thumbnail-worker.js must be started as a worker thread');

port.on('message', (message: ThumbnailJobMessage) => {
  // A message off the protocol means the pool and this file disagree (a version mismatch, a bug):
  // throwing here ends the worker, and the pool fails the job and starts a fresh one.
  if (typeof message?.id !== 'number' || !ArrayBuffer.isView(message.input?.data)) {
    throw new TypeError('malformed thumbnail job message');
  }
  void answerJob(message).then((result) => {
    // Transfer rather than copy: a thumbnail can be megabytes and the copy would be on the main thread.
    const transfer = result.output ? [result.output.data.buffer as ArrayBuffer] : [];
    port.postMessage(result, transfer);
  });
});

async function answerJob(message: ThumbnailJobMessage): Promise<ThumbnailResultMessage> {
  const id = message?.id;
  try {
    const output = await renderThumbnail(message.input);
    // The transferred buffer must hold exactly the thumbnail: a view into a larger (pooled) buffer
    // would move, and expose, the rest of it too.
    const data = output.data.byteOffset === 0 && output.data.byteLength === output.data.buffer.byteLength
      ? output.data
      : output.data.slice();
    return { id, output: { data, contentType: output.contentType } };
  } catch (error) {
    return { id, error: error instanceof Error ? error.message : String(error) };
  }
}
