import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import { UnavailableError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { startNotificationListener, type NotificationListener } from '../realtime/notification-listener.js';
import { READ_FENCES_CHANNEL } from '../shared-names.js';
import { runStatement } from '../statements/run-statement.js';
import type { DatabaseContext } from '../statements/database-context.js';
import { isUnavailableError } from '../statements/translate-database-error.js';
import { StatementInterruptedError } from '../statements/statement-interrupted-error.js';
import { LagMonitor } from './replica-lag.js';
import { ReadFences } from './read-fences.js';

/** `readReplica` resolved (lib/options.ts): the replica's Knex and the most lag its reads may have. */
export interface ReadReplicaSettings {
  /** A Knex for the hot standby; the host's, left as it is (recordbase uses its pool only). */
  database: Knex;
  /** A read goes to the replica only while every commit older than this (ms) is visible there. */
  maxLagMs: number;
}

/**
 * `readReplica.database` (lib/options.ts): a Knex for the replica, only beside a Postgres
 * `database` (the embedded engine has no replicas), and not the primary's own.
 */
export function checkReplicaDatabase(path: string, value: unknown, primary: Knex | undefined): Knex {
  if (typeof value !== 'function' || typeof (value as Partial<Knex>).client !== 'object') throw new TypeError(`${path} must be a Knex instance for the replica (it is required)`);
  if (primary === undefined) throw new TypeError('readReplica needs `database`, a Knex for the primary: the embedded engine has no replicas');
  if (value === primary) throw new TypeError(`${path} is the primary's own Knex: give a Knex connected to the replica`);
  return value as Knex;
}

/** What `records.replicaStatus()` reports (the metrics of issue 44 will export it). */
export interface ReplicaStatus {
  /** `replica`: reads may go there now; `lagging`: lag over maxLagMs; `failing`: its last sample or read failed; `unknown`: not sampled (yet, or since idle), or fences not heard. */
  readonly state: 'replica' | 'lagging' | 'failing' | 'unknown';
  /** Upper bound of the lag (ms): every commit older than this is visible on the replica; null when unknown. */
  readonly lagMs: number | null;
  readonly maxLagMs: number;
  /** How often the lag is sampled while reads flow (ms). */
  readonly samplePeriodMs: number;
  /** The last error of the replica, while it is `failing`. */
  readonly failure: string | null;
  /** Callers whose write the replica has not replayed yet (their reads go to the primary). */
  readonly fencedCallers: number;
  /** Reads routed since start, by where they went (a read that failed on the replica and was answered by the primary counts as both). */
  readonly reads: { readonly replica: number; readonly primary: number; readonly replicaFailed: number };
}

/** Most callers with a fence at once (about 100 bytes each); past it the oldest raise everyone's floor (read-fences.ts). */
export const MAX_FENCED_CALLERS = 10_000;
/** Sampling stops this long after the last routed read, so an idle deployment sends no periodic statement. */
export const SAMPLING_IDLE_AFTER_MS = 10_000;

/** The sampling period for a lag bound: a tenth of it, between 20 ms and 1 s, so a healthy replica's measured lag stays well under the bound. */
export function samplePeriodOf(maxLagMs: number): number {
  return Math.min(1000, Math.max(20, Math.floor(maxLagMs / 10)));
}

/** The SQLSTATEs a hot standby answers when replay cancels a read (conflict with recovery): the primary can answer it instead. */
const RECOVERY_CONFLICT_SQLSTATES = new Set(['40001', '40P01']);

/**
 * Where the reads that may go to a read replica go (DESIGN 21): to the replica while its lag is
 * known and within `maxLagMs` and it has replayed every write of the caller (read-your-writes),
 * else to the primary. Fences travel between instances as NOTIFYs on READ_FENCES_CHANNEL (a
 * hash of the caller's key, no position): every instance, on hearing one, fences that caller at
 * the primary's next sampled position, which covers the write since the notification is sent
 * after it committed. While the listener is down nothing is heard, so reads go to the primary;
 * once it is back every read waits for the position sampled after that (the floor).
 */
export class ReplicaReads {
  readonly samplePeriodMs: number;
  private readonly fences = new ReadFences(MAX_FENCED_CALLERS);
  private readonly lag: LagMonitor;
  private listener: NotificationListener | undefined;
  private listening = false;
  private readonly counts = { replica: 0, primary: 0, replicaFailed: 0 };

  private constructor(
    private readonly primary: Knex,
    private readonly settings: ReadReplicaSettings,
    private readonly logger: Logger,
  ) {
    this.samplePeriodMs = samplePeriodOf(settings.maxLagMs);
    this.lag = new LagMonitor({
      primary,
      replica: settings.database,
      periodMs: this.samplePeriodMs,
      idleAfterMs: SAMPLING_IDLE_AFTER_MS,
      onPrimarySample: (at, lsn) => this.fences.resolvePending(at, lsn),
      onReplicaSample: (replayed) => this.fences.prune(replayed),
    });
  }

  /** Starts listening for other instances' fences; until the first sample after that, every read goes to the primary. */
  static async start(options: { primary: Knex; settings: ReadReplicaSettings; logger: Logger }): Promise<ReplicaReads> {
    const reads = new ReplicaReads(options.primary, options.settings, options.logger);
    reads.fences.raiseFloorPending(performance.now());
    reads.listener = await startNotificationListener({
      db: options.primary,
      channels: [READ_FENCES_CHANNEL],
      logger: options.logger,
      events: {
        onNotification: (_channel, payload) => reads.fences.notePending(payload, performance.now()),
        onConnected: () => {
          // Fences sent while it was down were not heard: every read waits for the position after now.
          reads.fences.raiseFloorPending(performance.now());
          reads.listening = true;
        },
      },
    });
    return reads;
  }

  /** The replica's Knex (the read store is made over it). */
  get replica(): Knex {
    return this.settings.database;
  }

  /**
   * Whether a read of the callers `keys` (readerKeys) may go to the replica now. Counted: a
   * `false` is a read the primary answers.
   */
  useReplica(keys: readonly string[]): boolean {
    const reading = this.lag.read();
    const ok = this.listening && reading.lagMs !== undefined && reading.lagMs <= this.settings.maxLagMs && this.fences.passed(keys, reading.replayed);
    if (ok) this.counts.replica++;
    else this.counts.primary++;
    return ok;
  }

  /**
   * Whether `err`, from a read on the replica, means the replica (not the read) failed: then the
   * replica is skipped until a sample succeeds, and the caller asks the primary. A statement the
   * replica refused as it would any (a timeout, a bad value) is the read's own error.
   */
  replicaFailed(err: unknown): boolean {
    // The presenter's expansion answers an unavailable database already translated (a 503): the replica's, here.
    if (err instanceof UnavailableError) return this.noteReplicaFailure(err.cause ?? err);
    const interrupted = err instanceof StatementInterruptedError && (err.reason === 'busy' || err.reason === 'unresponsive');
    const code = (err as { code?: unknown } | null)?.code;
    const failed = interrupted || isUnavailableError(err) || (typeof code === 'string' && RECOVERY_CONFLICT_SQLSTATES.has(code));
    return failed && this.noteReplicaFailure(err);
  }

  /** Counts a read the replica failed and skips the replica until a sample succeeds; true. */
  private noteReplicaFailure(err: unknown): true {
    const reason = err instanceof Error ? err.message : String(err);
    this.counts.replicaFailed++;
    this.counts.primary++;
    this.lag.noteFailure(reason);
    this.logger.warn(`read replica: a read failed there and went to the primary (${reason})`);
    return true;
  }

  /**
   * After a committed write of the callers `keys`: fences them here at once, and on every other
   * instance through a NOTIFY, sent (and awaited) before the write answers, so the caller's next
   * request, wherever it lands, reads its write. If the NOTIFY fails the fence holds here only.
   */
  async fence(keys: readonly string[], context: DatabaseContext | undefined): Promise<void> {
    const at = performance.now();
    for (const key of keys) this.fences.notePending(key, at);
    try {
      for (const key of keys) await runStatement(this.primary, { sql: 'SELECT pg_notify(?, ?)', bindings: [READ_FENCES_CHANNEL, key] }, context);
    } catch (err) {
      this.logger.warn(`read replica: could not tell other instances of a write's fence (${err instanceof Error ? err.message : String(err)}); their reads of this caller may miss it for up to maxLagMs`);
    }
  }

  status(): ReplicaStatus {
    const reading = this.lag.peek();
    const state = reading.failure !== undefined ? 'failing' : !this.listening || reading.lagMs === undefined || !reading.sampling ? 'unknown' : reading.lagMs > this.settings.maxLagMs ? 'lagging' : 'replica';
    return {
      state,
      lagMs: reading.lagMs === undefined ? null : Math.round(reading.lagMs),
      maxLagMs: this.settings.maxLagMs,
      samplePeriodMs: this.samplePeriodMs,
      failure: reading.failure ?? null,
      fencedCallers: this.fences.size,
      reads: { ...this.counts },
    };
  }

  async close(): Promise<void> {
    this.lag.close();
    await this.listener?.close();
  }
}

/**
 * The keys a caller is fenced and routed by: its identity's id (when signed in) and its address
 * as the fair gate keys it (clientKeyOfAddress), each hashed (a NOTIFY is readable by every
 * listener on the database). None (a server-API call without identity): its reads go to the primary.
 */
export function readerKeys(identityId: string | undefined, clientKey: string | undefined): string[] {
  const keys: string[] = [];
  if (identityId !== undefined) keys.push(hashKey(`identity ${identityId}`));
  if (clientKey !== undefined) keys.push(hashKey(`address ${clientKey}`));
  return keys;
}

function hashKey(text: string): string {
  return createHash('sha256').update(text).digest('base64url').slice(0, 22);
}
