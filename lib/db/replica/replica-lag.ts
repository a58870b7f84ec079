import type { Knex } from 'knex';
import { runStatement } from '../statements/run-statement.js';
import type { DatabaseContext } from '../statements/database-context.js';
import { parseWalPosition } from './wal-position.js';

/** One sample of the primary's WAL position: sent at `at` (performance.now()), so every commit before `at` is at or below `lsn`. */
interface PrimarySample {
  readonly at: number;
  readonly lsn: bigint;
}

/** What the lag monitor knows of the replica now (also what `replicaStatus()` shows). */
export interface LagReading {
  /**
   * Milliseconds: every commit older than this is visible on the replica; undefined when
   * unknown (not sampled yet, sampling idle, or the replica failing).
   */
  readonly lagMs: number | undefined;
  /** The replica's last replayed position as last sampled. */
  readonly replayed: bigint | undefined;
  /** Why the replica is skipped, when its last sample failed (its error's message). */
  readonly failure: string | undefined;
  /** Whether the sampler runs now (it stops while no reads are routed). */
  readonly sampling: boolean;
}

/** The monitor's settings: where it reads the two positions, how often, and when it goes idle. */
export interface LagMonitorOptions {
  readonly primary: Knex;
  readonly replica: Knex;
  /** Time between samples (ms). */
  readonly periodMs: number;
  /** Sampling stops this long (ms) after the last read asked for the lag. */
  readonly idleAfterMs: number;
  /** Called with every primary sample (fences resolve on it) and every replica sample (fences prune on it). */
  readonly onPrimarySample: (at: number, lsn: bigint) => void;
  readonly onReplicaSample: (replayed: bigint) => void;
}

/** Statements of the monitor: its own fair-gate key, short bounds (a sample that cannot come soon is useless). */
const MONITOR_CLIENT = 'recordbase replica lag monitor';
/** Primary samples kept while the replica has not replayed them (a replica stopped for long, reads flowing). */
const MAX_SAMPLES = 10_000;

/**
 * The replica's lag in time, as an upper bound: every `periodMs` (while reads flow) it samples
 * the primary's `pg_current_wal_lsn()` with the time the statement was sent, then the replica's
 * `pg_last_wal_replay_lsn()`. The horizon is the send time of the newest primary sample the
 * replica has replayed: every commit before it is visible there. The lag is now minus the horizon,
 * so it is never less than the true lag, and at most one period plus a sample's round trip more
 * than it. A replica that fails to answer is `failure` until a sample succeeds again; a primary
 * that fails to answer leaves the horizon where it is, so the lag grows with time.
 */
export class LagMonitor {
  private samples: PrimarySample[] = [];
  private horizon: number | undefined;
  private replayed: bigint | undefined;
  private failure: string | undefined;
  private lastAsked = 0;
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private closed = false;
  private readonly context: DatabaseContext;

  constructor(private readonly options: LagMonitorOptions) {
    const boundMs = Math.max(1000, options.periodMs);
    this.context = { statementTimeoutMs: boundMs, acquireTimeoutMs: boundMs, client: MONITOR_CLIENT };
  }

  /** What is known now; asking wakes the sampler (reads ask). */
  read(): LagReading {
    const now = performance.now();
    this.lastAsked = now;
    if (!this.running && !this.closed) this.wake();
    return this.peek(now);
  }

  /** What is known now, without waking the sampler (a status report). */
  peek(now = performance.now()): LagReading {
    const known = this.failure === undefined && this.horizon !== undefined;
    return { lagMs: known ? now - this.horizon! : undefined, replayed: this.replayed, failure: this.failure, sampling: this.running };
  }

  /** A read on the replica failed as a broken replica does: skip it until a sample succeeds. */
  noteFailure(reason: string): void {
    this.failure = reason;
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private wake(): void {
    this.running = true;
    // A horizon from before the idle time is still a true bound, only an old one; sample at once.
    void this.loop();
  }

  private async loop(): Promise<void> {
    while (!this.closed && performance.now() - this.lastAsked <= this.options.idleAfterMs) {
      const started = performance.now();
      await this.sampleOnce();
      const wait = Math.max(0, this.options.periodMs - (performance.now() - started));
      await new Promise<void>((resolve) => {
        this.timer = setTimeout(resolve, wait);
        this.timer.unref();
      });
    }
    this.running = false;
  }

  /** One round: the primary's position, then the replica's. */
  private async sampleOnce(): Promise<void> {
    const at = performance.now();
    let lsn: bigint | undefined;
    try {
      const { rows } = await runStatement(this.options.primary, { sql: 'SELECT pg_current_wal_lsn()::text AS lsn', bindings: [] }, this.context);
      lsn = parseWalPosition(rows[0]?.lsn);
    } catch {
      // The primary's own trouble shows in the requests; here the horizon simply stops advancing.
    }
    if (lsn !== undefined) {
      this.samples.push({ at, lsn });
      // Dropping the oldest only keeps the horizon older than it could be: never a wrong bound.
      if (this.samples.length > MAX_SAMPLES) this.samples.shift();
      this.options.onPrimarySample(at, lsn);
    }
    try {
      const { rows } = await runStatement(this.options.replica, { sql: 'SELECT pg_last_wal_replay_lsn()::text AS lsn', bindings: [] }, this.context);
      const replayed = parseWalPosition(rows[0]?.lsn);
      if (replayed === undefined) throw new Error('the replica answers no replayed WAL position: it is not a standby in recovery');
      this.replayed = replayed;
      this.failure = undefined;
      this.advance(replayed);
      this.options.onReplicaSample(replayed);
    } catch (err) {
      this.failure = err instanceof Error ? err.message : String(err);
    }
  }

  /** Moves the horizon to the newest primary sample at or below `replayed`, and forgets the samples before it. */
  private advance(replayed: bigint): void {
    let newest = -1;
    for (let i = 0; i < this.samples.length; i++) if (this.samples[i]!.lsn <= replayed) newest = i;
    if (newest < 0) return;
    this.horizon = Math.max(this.horizon ?? -Infinity, this.samples[newest]!.at);
    this.samples = this.samples.slice(newest + 1);
  }
}
