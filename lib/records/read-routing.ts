import { RecordStore } from '../db/record-store.js';
import { readerKeys, type ReplicaReads } from '../db/replica/replica-reads.js';
import type { Caller } from './caller.js';
import type { WriteUnit } from './write-unit.js';
import type { DatabaseContext } from '../db/statements/database-context.js';

/** Where a read runs: inside a unit (its transaction), or on the pool, bounded by `database`. */
interface ReadContext {
  unit?: WriteUnit;
  database?: DatabaseContext;
}

/**
 * The one place that decides whether a read goes to the read replica (docs/deployment.md, "Read
 * replicas"): the record service asks it for lists and their counts, views, the presenter's
 * expansions and the record reads of file downloads; everything a write does reads through its
 * unit, on the primary. Without a replica, or inside a unit, or for a caller without a key, the
 * primary's store. A read the replica fails as a broken replica does is asked of the primary.
 */
export class ReadRouting {
  private readonly replicaStore: RecordStore | undefined;
  private readonly fencedUnits = new WeakSet<WriteUnit>();

  constructor(
    private readonly primary: RecordStore,
    private readonly replica: ReplicaReads | undefined,
  ) {
    this.replicaStore = replica && new RecordStore(replica.replica);
  }

  /** The caller's keys: its identity (when known) and its address (the request's fair-gate key). */
  keysOf(caller: Caller | undefined, context: ReadContext): string[] {
    return readerKeys(caller?.request.auth?.id, context.database?.client);
  }

  /** Runs `work` (reads only) on the store it should read: the unit's, the replica's, or the primary's. */
  read<T>(keys: readonly string[], context: ReadContext, work: (store: RecordStore) => Promise<T>): Promise<T> {
    if (context.unit) return work(context.unit.store);
    const primary = context.database ? this.primary.within(context.database) : this.primary;
    // No async layer on the way to the primary: views are the hottest reads.
    if (!this.replica || keys.length === 0 || !this.replica.useReplica(keys)) return work(primary);
    return this.readReplica(context, primary, work);
  }

  private async readReplica<T>(context: ReadContext, primary: RecordStore, work: (store: RecordStore) => Promise<T>): Promise<T> {
    try {
      return await work(context.database ? this.replicaStore!.within(context.database) : this.replicaStore!);
    } catch (err) {
      if (!this.replica!.replicaFailed(err)) throw err;
      return work(primary);
    }
  }

  /**
   * Read-your-writes: once `unit` commits (and before its write answers), `caller`'s next reads
   * wait for a replica that has replayed it (ReplicaReads.fence); once per unit, however many
   * writes it holds. Without a replica, nothing.
   */
  fenceOnCommit(unit: WriteUnit, caller: Caller, context: ReadContext): void {
    const replica = this.replica;
    if (!replica || this.fencedUnits.has(unit)) return;
    const keys = this.keysOf(caller, context);
    if (keys.length === 0) return;
    this.fencedUnits.add(unit);
    unit.afterCommit(() => replica.fence(keys, context.database));
  }
}
