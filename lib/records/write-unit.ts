import type { RecordStore } from '../db/record-store.js';
import { StatementInterruptedError } from '../db/statements/statement-interrupted-error.js';
import { RecordbaseError } from '../errors.js';
import type { Logger } from '../logger.js';

/**
 * One transaction of writes, and what must happen once it is over: the work a write leaves for
 * after its commit (removing replaced files, after-hooks, realtime messages) and what undoes its
 * side effects outside the database if it rolls back (files written for it). A single request's
 * write, a batch and a `records.api.transaction()` each run in one unit; every write inside uses
 * its `store`. A write whose plan is `autocommit` or `versioned` runs in an autocommit unit
 * (runAutocommit): no transaction, the same work after its statement commits.
 */
export class WriteUnit {
  private readonly committed: (() => unknown)[] = [];
  private readonly rolledBack: (() => Promise<void>)[] = [];
  private readonly uncertain: (() => void)[] = [];

  constructor(readonly store: RecordStore) {}

  /** Runs `work` after the unit commits, in the order registered; its failures are logged, never thrown. */
  afterCommit(work: () => unknown): void {
    this.committed.push(work);
  }

  /**
   * Registers how to undo a side effect if the unit does not commit: `undo` runs when the unit
   * rolled back; `keep` when the COMMIT itself failed with an unknown outcome (the connection was
   * lost: the rows may exist, so files they point at must stay, for the sweep to decide).
   */
  onRollback(undo: () => Promise<void>, keep: () => void): void {
    this.rolledBack.push(undo);
    this.uncertain.push(keep);
  }

  /** @internal Called by runWriteUnit and runAutocommit once the outcome is known, and by a migration's transaction. */
  async settle(outcome: 'committed' | 'rolled-back' | 'unknown', logger: Logger): Promise<void> {
    if (outcome === 'rolled-back') {
      for (const undo of this.rolledBack) await undo();
      return;
    }
    if (outcome === 'unknown') {
      for (const keep of this.uncertain) keep();
      return;
    }
    for (const work of this.committed) {
      try {
        await work();
      } catch (err) {
        logger.error('work after a commit failed (the write itself is committed)', err);
      }
    }
  }
}

/**
 * Runs `work` in a new transaction as one WriteUnit: it commits when `work` resolves and rolls
 * back when it throws; then the unit's after-commit work or its rollback undo runs, before the
 * result or the error is returned. A failure while committing (the connection lost during
 * COMMIT) has an unknown outcome: files are kept rather than removed from under a row that may
 * exist. A client error (a 4xx) proves nothing was committed.
 */
export async function runWriteUnit<T>(store: RecordStore, work: (unit: WriteUnit) => Promise<T>, logger: Logger): Promise<T> {
  let unit: WriteUnit | undefined;
  let workDone = false;
  let result: T;
  try {
    result = await store.transaction(async (trx) => {
      unit = new WriteUnit(trx);
      const value = await work(unit);
      workDone = true;
      return value;
    });
  } catch (err) {
    const refused = err instanceof RecordbaseError && err.status < 500;
    await unit?.settle(workDone && !refused ? 'unknown' : 'rolled-back', logger);
    throw err;
  }
  await unit!.settle('committed', logger);
  return result;
}

/**
 * Runs `work` as an autocommit unit (lib/records/write-plan.ts): its statements go to `store`
 * outside any transaction, each committing on its own, and once `work` resolves the unit's
 * after-commit work runs as after a commit. When `work` throws, its files are removed if no write
 * can have reached the database (a client error, or a statement refused before it was sent), and
 * kept otherwise: a statement lost on its way may have committed.
 */
export async function runAutocommit<T>(store: RecordStore, work: (unit: WriteUnit) => Promise<T>, logger: Logger): Promise<T> {
  const unit = new WriteUnit(store);
  let result: T;
  try {
    result = await work(unit);
  } catch (err) {
    const nothingWritten = (err instanceof RecordbaseError && err.status < 500) || (err instanceof StatementInterruptedError && !err.sent);
    await unit.settle(nothingWritten ? 'rolled-back' : 'unknown', logger);
    throw err;
  }
  await unit.settle('committed', logger);
  return result;
}
