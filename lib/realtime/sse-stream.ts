import type { Response } from 'express';

/** How far behind a client may fall before it is dropped, and who hears that the stream ended. */
export interface SseStreamOptions {
  maxBufferBytes: number;
  /** Called once when the stream ends, whoever ended it. */
  onClose(): void;
}

/** `id:<clientId>\nevent:<event>\ndata:<data>\n\n`: PocketBase's framing; the SDK reads the clientId from `id:`. */
export function frameMessage(clientId: string, event: string, data: string): string {
  return `id:${clientId}\nevent:${event}\ndata:${data}\n\n`;
}

/**
 * One client's server-sent-events response: the headers and PB_CONNECT at once, a `:` comment on
 * each `heartbeat()` (EventSource ignores it; proxies see traffic; the hub beats every stream from
 * one timer), and a bound on what may wait to be written: a client that does not read is dropped
 * rather than buffered without end.
 */
export class SseStream {
  private closed = false;

  constructor(
    readonly clientId: string,
    private readonly res: Response,
    private readonly options: SseStreamOptions,
  ) {
    res.status(200);
    res.setHeader('Content-Type', 'text/event-stream');
    res.setHeader('Cache-Control', 'no-store, no-transform');
    res.setHeader('Connection', 'keep-alive');
    res.setHeader('X-Accel-Buffering', 'no');
    res.flushHeaders();
    res.socket?.setNoDelay(true);
    res.socket?.setTimeout(0);
    res.on('close', () => this.end());
    this.write(frameMessage(clientId, 'PB_CONNECT', JSON.stringify({ clientId })));
  }

  /** Writes the keep-alive comment line. */
  heartbeat(): void {
    this.write(':\n\n');
  }

  get isOpen(): boolean {
    return !this.closed;
  }

  /** Bytes that may still be written before the client counts as too far behind. */
  get room(): number {
    return this.closed ? 0 : Math.max(0, this.options.maxBufferBytes - this.res.writableLength);
  }

  /** Writes one message; false when the stream is closed or was just dropped for being too far behind. */
  send(event: string, data: string): boolean {
    return this.write(frameMessage(this.clientId, event, data));
  }

  /** Writes already framed text; false as for send. */
  write(text: string): boolean {
    return this.writeChunks([text], Buffer.byteLength(text));
  }

  /**
   * Writes frames given as chunks, `bytes` in all: a message's data is one Buffer shared by
   * reference by every frame that carries it, never copied per subscription. A client whose
   * unsent bytes would pass `maxBufferBytes` with these is dropped instead (its EventSource
   * reconnects); false then, or when the stream is closed.
   */
  writeChunks(chunks: readonly (string | Buffer)[], bytes: number): boolean {
    if (this.closed) return false;
    if (this.res.writableLength + bytes > this.options.maxBufferBytes) {
      this.res.destroy();
      this.end();
      return false;
    }
    this.res.cork();
    for (const chunk of chunks) this.res.write(chunk);
    this.res.uncork();
    (this.res as Response & { flush?: () => void }).flush?.();
    return true;
  }

  /** Ends the response (close(), or the client was dropped); idempotent. */
  end(): void {
    if (this.closed) return;
    this.closed = true;
    if (!this.res.writableEnded) this.res.end();
    this.options.onClose();
  }
}
