import { randomBytes } from 'node:crypto';

/** An acknowledgement awaited: its token (sent in the message) and whether it arrived in time. */
export interface AwaitedAck {
  readonly token: string;
  /** True when the ack arrived (or every wait was settled at close), false when the time ran out. */
  readonly arrived: Promise<boolean>;
  /** Stops waiting (the timer and the token): call it once `arrived` settled or the send failed. */
  done(): void;
}

/**
 * The acknowledgements an instance waits for on its own channel: a forwarded POST's (the instance
 * holding the stream applied the subscriptions) and the start-up check's NOTIFY to itself.
 */
export class PendingAcks {
  private readonly pending = new Map<string, () => void>();

  /** A fresh token whose ack is awaited for `timeoutMs`. */
  expect(timeoutMs: number): AwaitedAck {
    const token = randomBytes(12).toString('hex');
    let timer: NodeJS.Timeout | undefined;
    const arrived = new Promise<boolean>((resolve) => {
      this.pending.set(token, () => resolve(true));
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    return {
      token,
      arrived,
      done: () => {
        clearTimeout(timer);
        this.pending.delete(token);
      },
    };
  }

  /** An ack arrived on the channel (an unknown or late token is ignored). */
  settle(token: string): void {
    this.pending.get(token)?.();
  }

  /** Ends every wait (close()): each resolves as arrived, its caller finds the instance closing. */
  settleAll(): void {
    for (const settle of this.pending.values()) settle();
  }
}
