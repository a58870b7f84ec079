import type { Change, ChangeReader } from './change-reader.js';

/**
 * The least time from the start of one read of the outbox to the start of the next: a read
 * follows a notification at once when the last one began longer ago, else waits out the rest.
 * Under a stream of commits (each its own notification) a read then takes what 10 ms of them
 * wrote, in one page, instead of one or two changes for its two statements.
 */
const READ_INTERVAL_MS = 10;
/** After a failed read, the next one is tried this much later. */
const RETRY_MS = 1_000;

/** What the reads need from the hub. */
export interface OutboxReadsOptions {
  reader: ChangeReader;
  /** Hands one page of changes (in order) to delivery. */
  deliver(changes: readonly Change[]): Promise<void>;
  /** The tables someone on this instance subscribes to now. */
  wanted(): readonly string[];
  report(message: string, err: unknown): void;
}

/**
 * One instance's reads of the outbox (the ChangeReader's windows), one at a time: a request
 * during a read makes one more after it, a failed read is retried a second later. They run
 * between `start` (which sets the position at the present) and `stop` (idle mode's sleep, or close).
 */
export class OutboxReads {
  private running = false;
  private reading = false;
  private readAgain = false;
  /** When the last read of the outbox began (READ_INTERVAL_MS). */
  private lastReadAt = 0;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: OutboxReadsOptions) {}

  /** Starts at the present (changes committed before are not delivered); reads are made from now on when requested. */
  async start(): Promise<void> {
    // A read from before a stop may still be finishing its page: it must not move the new position.
    while (this.reading) await new Promise((resolve) => setTimeout(resolve, 10));
    await this.options.reader.start();
    this.running = true;
  }

  /** Outbox rows not read yet (the outbox depth gauge); undefined while stopped (asleep: no statement then). */
  countUnread(): Promise<number | undefined> {
    return this.running ? this.options.reader.countUnread() : Promise.resolve(undefined);
  }

  /** No more reads (a read in progress finishes its page) until `start`. */
  stop(): void {
    this.running = false;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }

  /** Stops, then waits for a read in progress to finish. */
  async close(): Promise<void> {
    this.stop();
    while (this.reading) await new Promise((resolve) => setTimeout(resolve, 10));
  }

  /** Reads the outbox now, or once more after the read in progress. */
  request(): void {
    if (!this.running) return;
    if (this.reading) {
      this.readAgain = true;
      return;
    }
    this.reading = true;
    void (async () => {
      try {
        do {
          this.readAgain = false;
          const wait = this.lastReadAt + READ_INTERVAL_MS - Date.now();
          if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
          if (!this.running) break;
          this.lastReadAt = Date.now();
          await this.options.reader.readNew(this.options.deliver, this.options.wanted);
        } while (this.readAgain && this.running);
      } finally {
        this.reading = false;
      }
    })().catch((err: unknown) => {
      this.options.report('realtime: reading changes failed; retrying', err);
      if (!this.running) return;
      this.retryTimer ??= setTimeout(() => {
        this.retryTimer = undefined;
        this.request();
      }, RETRY_MS);
      this.retryTimer.unref();
    });
  }
}
