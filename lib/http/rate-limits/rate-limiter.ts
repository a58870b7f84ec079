import { createHash } from 'node:crypto';
import type { RateLimitRule } from '../../db/rate-limits/rate-limit-settings.js';
import { syncCounters, type CounterDelta } from '../../db/rate-limits/rate-limit-sql.js';
import type { StatementRunner } from '../../db/statements/statement-runner.js';
import type { Logger } from '../../logger.js';

/** Most buckets one sync statement carries; the rest wait for the next sync (still counted here). */
const MAX_DELTAS_PER_SYNC = 5_000;
/** Most expired rows one sync removes: more than a sync writes, so the prune keeps up. */
const MAX_PRUNED_PER_SYNC = 2 * MAX_DELTAS_PER_SYNC;
/** Longest time between syncs (shorter for rules whose window is under 4 s: a quarter of it). */
const MAX_SYNC_INTERVAL_MS = 1_000;
/** How often the counters of ended windows are dropped from memory. */
const SWEEP_INTERVAL_MS = 10_000;

/** A rule as the limiter counts it: PocketBase's rule and its place in `rateLimits.rules`. */
export interface CountedRule extends RateLimitRule {
  readonly index: number;
}

/**
 * The counter of one bucket (a rule, the collection it was matched through or none, and a client)
 * in its current window: `shared` is the total over every instance at the last sync (its own hits
 * included), `pending` the hits counted here since.
 */
interface Bucket {
  readonly rule: CountedRule;
  /** Its key in memory: rule, scope and client. */
  readonly key: string;
  /** What the shared row is keyed by: a hash, so no address or identity is written to the database (made at its first sync). */
  id?: string;
  windowStart: number;
  windowEnd: number;
  shared: number;
  pending: number;
  dirty: boolean;
  /** The window whose row this bucket was counted against its rule's share for (-1: none yet). */
  sharedWindow: number;
  /** The window whose hits stay on this instance: the rule's share of rows for it was used up. */
  localOnlyWindow: number;
}

/** What the limiter needs: the shared store (none: counts stay on this instance, the embedded engine), the memory cap and where to warn. */
export interface RateLimiterOptions {
  readonly rules: readonly CountedRule[];
  readonly maxTrackedKeys: number;
  readonly runner?: StatementRunner;
  readonly logger: Logger;
  /** The clock (tests move it); default Date.now. */
  readonly now?: () => number;
}

/**
 * Fixed-window counters per rule and client (PocketBase's strategy), held in memory and shared
 * across instances through one table: the hot path is a map lookup and an increment; every sync
 * interval (min(1 s, a quarter of the shortest rule's window)) one statement adds this instance's
 * new hits to the shared rows and reads back the totals. A request is refused when the shared
 * total plus this instance's unsynced hits reach `maxRequests`. So across N instances a window
 * admits at most `maxRequests` plus what the other instances admitted since their last sync (at
 * most N × `maxRequests` for a burst that fits in one sync interval). While the database does not
 * answer, each instance goes on counting alone (warned once) and syncs again when it can.
 *
 * Memory: at most `maxTrackedKeys` buckets; one more forgets the oldest (buckets move to the end
 * of the order when their window starts again, so the oldest is the longest unused), and buckets
 * of ended windows are dropped every 10 s. Rows: per rule and window, an instance writes at most
 * `maxTrackedKeys` buckets; a client beyond them is counted on this instance only. Rows of ended
 * windows are pruned by the syncs.
 */
export class RateLimiter {
  readonly syncIntervalMs: number;
  private readonly buckets = new Map<string, Bucket>();
  private readonly dirty = new Set<Bucket>();
  /** Buckets whose hits the last sync sent: the next one reads their totals again (no hits), so an instance a burst just stopped at learns what the others added after it. */
  private watched = new Set<Bucket>();
  /** Per rule: the window whose rows this instance writes, and how many it wrote for it. */
  private readonly shares = new Map<number, { windowStart: number; written: number }>();
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;
  private syncing: Promise<void> | undefined;
  private lastSweep = 0;
  private failing = false;

  constructor(private readonly options: RateLimiterOptions) {
    this.now = options.now ?? Date.now;
    const shortest = Math.min(...options.rules.map((rule) => rule.duration * 1000));
    this.syncIntervalMs = Math.min(MAX_SYNC_INTERVAL_MS, Math.max(50, Math.floor(shortest / 4)));
  }

  /** Buckets held in memory now (at most `maxTrackedKeys`). */
  get trackedKeys(): number {
    return this.buckets.size;
  }

  /** Starts the syncs (without a shared store, only the sweep of ended windows, every 10 s); a timer that does not keep the process alive. */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.sync(), this.options.runner ? this.syncIntervalMs : SWEEP_INTERVAL_MS);
    this.timer.unref();
  }

  /** Stops the syncs (hits since the last one stay unshared) and waits for one running. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.syncing;
  }

  /**
   * Counts one request of `client` against `rule` (`scope`: the collection a `*:action` rule was
   * matched through, else ''). 0 when admitted; when refused, the seconds until the window ends
   * (at least 1), and nothing is counted.
   */
  take(rule: CountedRule, scope: string, client: string): number {
    const now = this.now();
    const bucket = this.bucketOf(rule, scope, client, now);
    if (bucket.shared + bucket.pending >= rule.maxRequests) return secondsUntil(bucket.windowEnd, now);
    this.count(bucket, 1);
    return 0;
  }

  /**
   * Counts several requests at once (a batch's): all are admitted, each counted against its rule,
   * or none is counted and the answer is the longest wait of the buckets that would overflow.
   */
  takeAll(hits: readonly { rule: CountedRule; scope: string; client: string }[]): number {
    const now = this.now();
    const wanted = new Map<Bucket, number>();
    for (const hit of hits) {
      const bucket = this.bucketOf(hit.rule, hit.scope, hit.client, now);
      wanted.set(bucket, (wanted.get(bucket) ?? 0) + 1);
    }
    let wait = 0;
    for (const [bucket, n] of wanted) if (bucket.shared + bucket.pending + n > bucket.rule.maxRequests) wait = Math.max(wait, secondsUntil(bucket.windowEnd, now));
    if (wait > 0) return wait;
    for (const [bucket, n] of wanted) this.count(bucket, n);
    return 0;
  }

  /**
   * Drops the counters of ended windows (at most every 10 s), then sends this instance's new hits
   * and reads back the totals (one statement), unless one is running, there is nothing to send or
   * no shared store. Fails quietly: the hits stay pending and the limits hold here.
   */
  sync(): Promise<void> {
    this.sweep();
    if (this.syncing || (this.dirty.size === 0 && this.watched.size === 0) || !this.options.runner) return this.syncing ?? Promise.resolve();
    this.syncing = this.runSync(this.options.runner).finally(() => {
      this.syncing = undefined;
    });
    return this.syncing;
  }

  private async runSync(runner: StatementRunner): Promise<void> {
    const now = this.now();
    const sent: { bucket: Bucket; windowStart: number; hits: number }[] = [];
    const deltas: CounterDelta[] = [];
    const chosen = new Set<Bucket>();
    for (const bucket of this.dirty) {
      if (sent.length >= MAX_DELTAS_PER_SYNC) break;
      this.dirty.delete(bucket);
      bucket.dirty = false;
      // Forgotten (a new bucket may hold its key: one statement may not name a row twice), ended, or nothing to add.
      if (this.buckets.get(bucket.key) !== bucket || bucket.windowEnd <= now || bucket.pending === 0 || !this.mayWrite(bucket)) continue;
      bucket.id ??= bucketId(bucket.rule, bucket.key);
      chosen.add(bucket);
      sent.push({ bucket, windowStart: bucket.windowStart, hits: bucket.pending });
      deltas.push({ bucket: bucket.id, windowStart: bucket.windowStart, windowEnd: bucket.windowEnd, hits: bucket.pending });
    }
    const watched = this.watched;
    this.watched = new Set();
    for (const bucket of watched) {
      if (sent.length >= MAX_DELTAS_PER_SYNC) break;
      // Sent above already, forgotten, or of an ended window: nothing to read.
      if (bucket.id === undefined || chosen.has(bucket) || bucket.windowEnd <= now || bucket.sharedWindow !== bucket.windowStart || this.buckets.get(bucket.key) !== bucket) continue;
      sent.push({ bucket, windowStart: bucket.windowStart, hits: 0 });
      deltas.push({ bucket: bucket.id, windowStart: bucket.windowStart, windowEnd: bucket.windowEnd, hits: 0 });
    }
    if (deltas.length === 0) return;
    try {
      const totals = await syncCounters(runner, { deltas, pruneBefore: now, pruneLimit: MAX_PRUNED_PER_SYNC });
      const byKey = new Map(totals.map((total) => [`${total.bucket} ${total.windowStart}`, total.hits]));
      for (const { bucket, windowStart, hits } of sent) {
        const total = byKey.get(`${bucket.id} ${windowStart}`);
        // The window moved on while the statement ran: its counts are the new window's.
        if (total === undefined || bucket.windowStart !== windowStart) continue;
        bucket.pending -= hits;
        bucket.shared = total;
        if (hits > 0) this.watched.add(bucket);
      }
      if (this.failing) this.options.logger.info('rate limits: the shared counters answer again; limits are held across instances');
      this.failing = false;
    } catch (err) {
      // Kept pending, sent again at the next sync: meanwhile this instance's own count limits it.
      for (const { bucket, hits } of sent) if (hits > 0 && this.buckets.get(bucket.key) === bucket) this.markDirty(bucket);
      if (!this.failing) {
        this.options.logger.warn(`rate limits: the shared counters could not be synced (${err instanceof Error ? err.message : String(err)}); each instance limits on its own counts until the database answers (retried every ${this.syncIntervalMs} ms)`);
      }
      this.failing = true;
    }
  }

  private bucketOf(rule: CountedRule, scope: string, client: string, now: number): Bucket {
    const key = `${rule.index}\u0000${scope}\u0000${client}`;
    let bucket = this.buckets.get(key);
    if (bucket !== undefined && bucket.windowEnd > now) return bucket;
    const span = rule.duration * 1000;
    const windowStart = Math.floor(now / span) * span;
    if (bucket === undefined) {
      bucket = { rule, key, windowStart, windowEnd: windowStart + span, shared: 0, pending: 0, dirty: false, sharedWindow: -1, localOnlyWindow: -1 };
      this.evictFor(1);
    } else {
      // A new window: the bucket starts again, and moves to the end of the eviction order.
      this.buckets.delete(key);
      this.dirty.delete(bucket);
      Object.assign(bucket, { windowStart, windowEnd: windowStart + span, shared: 0, pending: 0, dirty: false });
    }
    this.buckets.set(key, bucket);
    return bucket;
  }

  private count(bucket: Bucket, n: number): void {
    bucket.pending += n;
    if (!bucket.dirty && this.options.runner) this.markDirty(bucket);
  }

  /** Queues a bucket for the next sync, unless its window's hits stay here (its rule wrote its share of rows for the window). */
  private markDirty(bucket: Bucket): void {
    if (bucket.localOnlyWindow === bucket.windowStart) return;
    bucket.dirty = true;
    this.dirty.add(bucket);
  }

  /**
   * Whether a bucket's row may be written: a bucket's first row of a window counts against its
   * rule's share for that window (maxTrackedKeys rows per rule and window); past it, the bucket
   * counts on this instance only until its window ends.
   */
  private mayWrite(bucket: Bucket): boolean {
    if (bucket.sharedWindow === bucket.windowStart) return true;
    let share = this.shares.get(bucket.rule.index);
    if (share === undefined || share.windowStart !== bucket.windowStart) this.shares.set(bucket.rule.index, (share = { windowStart: bucket.windowStart, written: 0 }));
    if (share.written >= this.options.maxTrackedKeys) {
      bucket.localOnlyWindow = bucket.windowStart;
      return false;
    }
    share.written++;
    bucket.sharedWindow = bucket.windowStart;
    return true;
  }

  /** Forgets the oldest buckets until `room` more fit under maxTrackedKeys. */
  private evictFor(room: number): void {
    for (const [key, bucket] of this.buckets) {
      if (this.buckets.size + room <= this.options.maxTrackedKeys) return;
      this.buckets.delete(key);
      this.dirty.delete(bucket);
    }
  }

  /** Drops the buckets of ended windows (at most every 10 s: a walk over every bucket). */
  private sweep(): void {
    const now = this.now();
    if (now - this.lastSweep < SWEEP_INTERVAL_MS) return;
    this.lastSweep = now;
    for (const [key, bucket] of this.buckets) {
      if (bucket.windowEnd > now) continue;
      this.buckets.delete(key);
      this.dirty.delete(bucket);
    }
  }
}

/** Whole seconds from `now` to `end`, at least 1: what Retry-After says. */
function secondsUntil(end: number, now: number): number {
  return Math.max(1, Math.ceil((end - now) / 1000));
}

/** The shared row's key: a hash of the rule as configured (label, audience, duration) and the bucket, the same on every instance. */
function bucketId(rule: CountedRule, key: string): string {
  const local = key.slice(key.indexOf('\u0000'));
  return createHash('sha256').update(`${rule.label}\u0000${rule.audience}\u0000${rule.duration}${local}`).digest('base64url').slice(0, 22);
}
