/** What idle mode switches: the hub's background work and its LISTEN connection. */
export interface IdleModeOptions {
  /** How long the instance stays awake with nothing holding it (`realtime.idleAfterMs`); false: it never sleeps. */
  idleAfterMs: number | false;
  /** Stops every periodic statement and closes the LISTEN connection. */
  sleep(): Promise<void>;
  /** Undoes `sleep`: listening again, one heartbeat, the outbox read from the present. On failure it leaves the instance asleep. */
  wake(): Promise<void>;
  /** Reports a failure of `sleep` (it is not retried: the next wake starts from what is left). */
  report(message: string, err: unknown): void;
}

/**
 * Idle mode (DESIGN 21, docs/realtime.md "Idle mode"): an instance that holds no stream and
 * answers no realtime request sends no periodic statement, so a serverless Postgres can suspend.
 * Whatever needs the instance awake (a stream, for its lifetime; a POST, while it runs) takes a
 * hold, which wakes it first; `idleAfterMs` after the last hold is released, it sleeps. Sleeping
 * and waking run one at a time, in order, so a request arriving while the instance falls asleep
 * waits for that and then wakes it.
 */
export class IdleMode {
  private holds = 0;
  private asleep = false;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;
  /** The last sleep or wake, which the next one waits for. */
  private transition: Promise<void> = Promise.resolve();

  constructor(private readonly options: IdleModeOptions) {}

  /** Whether the instance sleeps now (for tests and the logger). */
  get sleeping(): boolean {
    return this.asleep;
  }

  /** Starts counting: with no hold, the instance sleeps after `idleAfterMs`. Call once it is awake. */
  start(): void {
    this.arm();
  }

  /**
   * Keeps the instance awake until the returned release is called (once; later calls do
   * nothing), waking it first when it sleeps. When the wake fails, the hold is released and the
   * error thrown: the request it was for fails, the next one tries again.
   */
  async hold(): Promise<() => void> {
    this.holds++;
    this.disarm();
    try {
      await this.queue(async () => {
        if (!this.asleep || this.closed) return;
        await this.options.wake();
        this.asleep = false;
      });
    } catch (error) {
      this.release();
      throw error;
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.release();
    };
  }

  /** Stops the count for good (close()); a sleep or wake in progress finishes. */
  async close(): Promise<void> {
    this.closed = true;
    this.disarm();
    await this.transition.catch(() => undefined);
  }

  private release(): void {
    this.holds--;
    if (this.holds === 0) this.arm();
  }

  private arm(): void {
    const { idleAfterMs } = this.options;
    if (idleAfterMs === false || this.closed || this.holds > 0 || this.asleep) return;
    this.disarm();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.queue(async () => {
        if (this.holds > 0 || this.asleep || this.closed) return;
        // Asleep from the start of `sleep`: a failure in it leaves less running, never more, and the next wake restarts everything.
        this.asleep = true;
        await this.options.sleep();
      }).catch((err: unknown) => this.options.report('realtime: could not stop the background work to sleep', err));
    }, idleAfterMs);
    this.timer.unref();
  }

  private disarm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private queue(step: () => Promise<void>): Promise<void> {
    const next = this.transition.catch(() => undefined).then(step);
    this.transition = next;
    return next;
  }
}
