import { listRunningTransactions, listStillRunning } from '../db/realtime/realtime-registry-sql.js';
import type { StatementRunner } from '../db/statements/statement-runner.js';

/** How often the waiter looks again: first after 2 ms, doubling up to 50 ms (most transactions are short). */
const POLL_FIRST_MS = 2;
const POLL_MAX_MS = 50;

/** One call of wait(): its deadline, and how it ends. */
interface Caller {
  readonly deadline: number;
  resolve(done: boolean): void;
  reject(err: unknown): void;
}

/** A caller once a listing after its call was taken: the transactions of it still running. */
interface ListedCaller extends Caller {
  ids: Set<string>;
}

/**
 * Waits for running transactions to end on behalf of every caller at once (docs/realtime.md,
 * "Switching capture on never loses a change"). A loop per caller would cost the pool one pg_locks
 * statement per caller every 50 ms, so many POSTs waiting behind one long transaction would
 * multiply the load; here they share one loop with at most one statement in flight: a listing for
 * those who joined since the last one, or one poll for the ids of all, spaced as one caller's
 * would be. The loop stops when nobody waits, so it holds no timer then.
 */
export class TransactionWaiter {
  /** Callers whose transactions are not listed yet: the next round lists them, after their call. */
  private joining: Caller[] = [];
  private waiting: ListedCaller[] = [];
  private running = false;

  constructor(private readonly runner: StatementRunner) {}

  /**
   * Resolves true once every transaction running after this call (but the waiter's own statement)
   * has ended, false when some still run at `timeoutMs` (checked at the waiter's next round);
   * rejects when a statement it depended on fails.
   */
  wait(timeoutMs: number): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.joining.push({ deadline: Date.now() + timeoutMs, resolve, reject });
      if (this.running) return;
      this.running = true;
      void this.run();
    });
  }

  /**
   * Rounds until nobody waits. The pause grows as one caller's would, even when others join: a
   * joiner waits at most one pause for its listing, and a stream of joiners cannot speed the loop up.
   */
  private async run(): Promise<void> {
    let pause = POLL_FIRST_MS;
    for (;;) {
      await this.round();
      if (this.idle()) break;
      await new Promise((resolve) => setTimeout(resolve, pause));
      pause = Math.min(pause * 2, POLL_MAX_MS);
      this.settle();
      if (this.idle()) break;
    }
    // In the same turn as the check: a caller joining from now on starts a new loop.
    this.running = false;
  }

  /**
   * One statement: a listing when callers joined (it tells those already waiting too which of
   * their ids still run: a listed id is one running now, and ids are not reused), else a poll of
   * every waiting caller's ids. Its failure rejects every caller it was for.
   */
  private async round(): Promise<void> {
    const joined = this.joining;
    const listed = this.waiting;
    this.joining = [];
    this.waiting = [];
    let running: Set<string>;
    try {
      running = new Set(joined.length > 0 ? await listRunningTransactions(this.runner) : await listStillRunning(this.runner, [...unionOfIds(listed)]));
    } catch (err) {
      for (const caller of [...listed, ...joined]) caller.reject(err);
      return;
    }
    for (const caller of listed) caller.ids = new Set([...caller.ids].filter((id) => running.has(id)));
    this.waiting = [...listed, ...joined.map((caller) => ({ ...caller, ids: new Set(running) }))];
    this.settle();
  }

  /** Resolves the waiting callers whose transactions all ended (true) or whose deadline passed (false). */
  private settle(): void {
    const now = Date.now();
    this.waiting = this.waiting.filter((caller) => {
      if (caller.ids.size === 0) caller.resolve(true);
      else if (now >= caller.deadline) caller.resolve(false);
      else return true;
      return false;
    });
  }

  private idle(): boolean {
    return this.joining.length === 0 && this.waiting.length === 0;
  }
}

/** Every id some caller still waits for, once. */
function unionOfIds(callers: readonly ListedCaller[]): Set<string> {
  const ids = new Set<string>();
  for (const caller of callers) for (const id of caller.ids) ids.add(id);
  return ids;
}
