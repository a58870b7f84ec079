import { countOutboxFrom, readCurrentXmin, readOutboxPage, type OutboxChange } from '../db/realtime/realtime-outbox-sql.js';
import type { StatementRunner } from '../db/statements/statement-runner.js';

/** One committed change, as delivery sees it (the outbox row: OutboxChange). */
export type Change = OutboxChange;

/** Rows read per statement: a 100,000-row bulk delete is read (and delivered) in pages. */
const PAGE_SIZE = 500;

/**
 * Reads the outbox in commit-safe windows, without gaps and without repeats.
 *
 * The position is a transaction id, not a sequence number: sequence values are taken when rows
 * are written, not when they commit, so a later sequence may commit first. A window is
 * `[position, xmin)` where xmin is the oldest transaction still running when the window opens
 * (`pg_snapshot_xmin(pg_current_snapshot())`): every transaction below it has ended, so the
 * window's content is final (committed rows are all there, rolled-back ones never will be). The
 * window is read in sequence order in pages; the same record's changes are serialised by its row
 * lock, so per record that is commit order. Then the position moves to xmin. A transaction
 * running elsewhere keeps xmin down and so delays delivery until it ends (docs/realtime.md).
 */
export class ChangeReader {
  private position: string | undefined;
  /** The window being read: its end and the last sequence delivered, kept across a failure so a retry resumes after it. */
  private window: { to: string; after: string } | undefined;

  constructor(private readonly runner: StatementRunner) {}

  /**
   * Starts at the present: changes committed before this are not delivered. Again after idle mode's
   * sleep, the same: a window left by a failed read before it is dropped, not resumed.
   */
  async start(): Promise<void> {
    this.position = await readCurrentXmin(this.runner);
    this.window = undefined;
  }

  /**
   * Reads every change of the `wanted` collections (tables) that became final since the last
   * call, handing them to `deliver` a page (up to 500, in order) at a time, so the caller can
   * write each client once per page rather than once per change. A failure (the database went
   * away, or `deliver` threw) keeps the window and the last page delivered, so the next call
   * resumes after it: nothing skipped, nothing handed over twice.
   */
  async readNew(deliver: (changes: readonly Change[]) => Promise<void>, wanted: () => readonly string[]): Promise<number> {
    if (this.position === undefined) throw new Error('ChangeReader.readNew before start');
    const from = this.position;
    if (!this.window) {
      const to = await readCurrentXmin(this.runner);
      if (to === from) return 0;
      this.window = { to, after: '0' };
    }
    const window = this.window;
    const to = window.to;
    let total = 0;
    for (;;) {
      // Only the collections someone here subscribes to (asked per page: a subscription applied
      // meanwhile is for changes of later windows anyway); none: the window is skipped unread.
      const collections = wanted();
      if (collections.length === 0) break;
      const rows = await readOutboxPage(this.runner, { from, to, after: window.after, collections, limit: PAGE_SIZE });
      if (rows.length > 0) {
        await deliver(rows);
        window.after = rows[rows.length - 1].seq;
        total += rows.length;
      }
      if (rows.length < PAGE_SIZE) break;
    }
    this.position = to;
    this.window = undefined;
    return total;
  }

  /** Outbox rows from the position on (not read yet, or in the window being read); undefined before start. */
  async countUnread(): Promise<number | undefined> {
    return this.position === undefined ? undefined : countOutboxFrom(this.runner, this.position);
  }
}
