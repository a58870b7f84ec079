/**
 * A fence: the WAL position a caller's committed write reached, which the replica must have
 * replayed before that caller reads from it. Known as a position, or still `pending` since a
 * moment (the write's commit was seen then, its position not yet): the next sample of the
 * primary's position taken after that moment covers the commit and becomes the fence.
 */
type Fence = { readonly lsn: bigint } | { readonly pendingSince: number };

/**
 * Read-your-writes fences, one per caller key, at most `capacity` of them (the oldest are
 * dropped first). A dropped fence is not forgotten: it raises the floor every caller's replica
 * read must have passed, so a flood of callers can make everyone read from the primary only
 * until the replica replays what they wrote (normally milliseconds), and never lose a caller's
 * own write. A fence the replica has replayed is removed, so a caller is pinned to the primary
 * only while its own write is missing there.
 */
export class ReadFences {
  private readonly fences = new Map<string, Fence>();
  /** What every replica read must have passed: dropped fences, and the start of listening (nothing heard before it). */
  private floor: Fence | undefined;

  constructor(private readonly capacity: number) {}

  /** How many callers have a fence now. */
  get size(): number {
    return this.fences.size;
  }

  /** `key`'s write committed before `at` (a time on performance.now()'s clock): its fence is the primary's next position. */
  notePending(key: string, at: number): void {
    this.set(key, { pendingSince: at });
  }

  /** Every read waits for the primary's position after `at` (the listener (re)started then: what came before is unknown). */
  raiseFloorPending(at: number): void {
    this.floor = { pendingSince: at };
  }

  /** A sample of the primary's position `lsn`, taken (sent) at `at`: pending fences from before it become that position. */
  resolvePending(at: number, lsn: bigint): void {
    if (this.floor && 'pendingSince' in this.floor && this.floor.pendingSince <= at) this.floor = { lsn };
    for (const [key, fence] of this.fences) {
      if ('pendingSince' in fence && fence.pendingSince <= at) this.fences.set(key, { lsn });
    }
  }

  /** Forgets the fences the replica has replayed (`replayed`), and the floor once passed. */
  prune(replayed: bigint): void {
    if (this.floor && 'lsn' in this.floor && this.floor.lsn <= replayed) this.floor = undefined;
    for (const [key, fence] of this.fences) {
      if ('lsn' in fence && fence.lsn <= replayed) this.fences.delete(key);
    }
  }

  /** Whether a replica that has replayed `replayed` holds every write of the callers `keys` (and the floor). */
  passed(keys: readonly string[], replayed: bigint | undefined): boolean {
    if (!isPassed(this.floor, replayed)) return false;
    return keys.every((key) => isPassed(this.fences.get(key), replayed));
  }

  private set(key: string, fence: Fence): void {
    // Delete first: a Map keeps insertion order, so the oldest fence is always first.
    this.fences.delete(key);
    this.fences.set(key, fence);
    while (this.fences.size > this.capacity) {
      const [oldestKey, oldest] = this.fences.entries().next().value as [string, Fence];
      this.fences.delete(oldestKey);
      this.floor = higher(this.floor, oldest);
    }
  }
}

function isPassed(fence: Fence | undefined, replayed: bigint | undefined): boolean {
  if (fence === undefined) return true;
  return 'lsn' in fence && replayed !== undefined && replayed >= fence.lsn;
}

/** The later of two fences: a pending one is later than any position (it will resolve to the next sample), the earlier pending time covers more. */
function higher(a: Fence | undefined, b: Fence): Fence {
  if (a === undefined) return b;
  if ('pendingSince' in a) return 'pendingSince' in b ? { pendingSince: Math.max(a.pendingSince, b.pendingSince) } : a;
  if ('pendingSince' in b) return b;
  return a.lsn >= b.lsn ? a : b;
}
