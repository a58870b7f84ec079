/** How FairLanes runs its owners' work. */
export interface FairLanesOptions<T> {
  /** Turns that may run at once. */
  concurrency: number;
  /** The group an owner's turns are shared within (a client's address): groups take turns first. */
  groupOf(owner: T): string;
  /** One turn of `owner`'s work; call `wake(owner)` again from it (or after) if more is left. */
  run(owner: T): Promise<void>;
  /** A turn that threw (run should not). */
  onError(owner: T, error: unknown): void;
}

/**
 * Takes turns among owners that have work waiting, at most `concurrency` at once: round robin
 * across groups, then across the owners of a group, one turn each. So an owner with a lot of slow
 * work (a client whose checks run to their timeout) delays the others by at most one turn per
 * round, and a hundred owners from one address count as one group.
 */
export class FairLanes<T> {
  /** Waiting owners per group, in the order they woke. */
  private readonly waiting = new Map<string, T[]>();
  /** Groups with waiting owners, in turn order. */
  private readonly ring: string[] = [];
  private readonly queued = new Set<T>();
  private running = 0;
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly options: FairLanesOptions<T>) {}

  /** Gives `owner` a turn (once, however often it is woken before the turn comes). */
  wake(owner: T): void {
    if (this.queued.has(owner)) return;
    this.queued.add(owner);
    const group = this.options.groupOf(owner);
    const owners = this.waiting.get(group);
    if (owners) owners.push(owner);
    else {
      this.waiting.set(group, [owner]);
      this.ring.push(group);
    }
    this.pump();
  }

  /** Owners waiting for a turn. */
  get size(): number {
    return this.queued.size;
  }

  /** Resolves once no turn runs or waits. */
  idle(): Promise<void> {
    if (this.running === 0 && this.queued.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private pump(): void {
    while (this.running < this.options.concurrency && this.ring.length > 0) {
      const group = this.ring.shift()!;
      const owners = this.waiting.get(group)!;
      const owner = owners.shift()!;
      if (owners.length > 0) this.ring.push(group);
      else this.waiting.delete(group);
      this.queued.delete(owner);
      this.running++;
      void this.options
        .run(owner)
        .catch((error: unknown) => this.options.onError(owner, error))
        .finally(() => {
          this.running--;
          this.pump();
          if (this.running === 0 && this.queued.size === 0) {
            const waiters = this.idleWaiters;
            this.idleWaiters = [];
            for (const resolve of waiters) resolve();
          }
        });
    }
  }
}
