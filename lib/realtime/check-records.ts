import { evaluateConditions, type ConditionTarget } from '../db/realtime/evaluate-conditions.js';
import type { StatementRunner } from '../db/statements/statement-runner.js';
import { joinSql, type SqlFragment } from '../sql-fragment.js';
import type { CollectionSchema } from '../schema/collection-schema.js';

/**
 * A record a change is checked on: its `current` row, read in the same statement as the
 * conditions (one consistent state, however late the check), or the row as the change `written`
 * it (the outbox's copy: after a create or update the new row, after a delete the row as it went).
 */
export type CheckTarget = ConditionTarget;

/**
 * What one subscriber needs: `[]` passes without a query; `'denied'` never passes; otherwise
 * every fragment must hold (bindings already resolved: no DeferredValue).
 */
export type Conditions = readonly SqlFragment[] | 'denied';

/** The outcome for each target, in the order given. */
export interface CheckOutcome {
  /** The row checked (`to_jsonb` shape), or undefined when the record no longer exists. */
  readonly rows: readonly (Record<string, unknown> | undefined)[];
  /** Whether `conditions[member]` holds for `targets[target]`. */
  holds(member: number, target: number): boolean;
  /**
   * For a written target: whether a change committed after it (not in its snapshot) may have
   * changed what a rule reading other tables sees; then it cannot be checked on the state it was
   * written in. Always false unless asked for (`staleness`).
   */
  readonly stale: readonly boolean[];
}

/** What checkRecords needs. */
export interface CheckRecordsOptions {
  /** Where every statement goes, within the runner's bounds (the caller's check bound). */
  runner: StatementRunner;
  collection: CollectionSchema;
  targets: readonly CheckTarget[];
  /** One entry per member (a subscription, or a client's distinct subscriptions). */
  conditions: readonly Conditions[];
  /** Compute `stale` for written targets (only needed when a member's conditions read other tables). */
  staleness: boolean;
}

/**
 * Checks `conditions` on `targets` of one collection, each distinct condition evaluated once
 * (lib/db/realtime/evaluate-conditions.ts: in as few statements as the bounds allow). Every statement goes
 * through `runner`, within its bounds (its timeout is the caller's check bound). Throws when any statement fails: the
 * caller decides what a failed check costs, and whom.
 */
export async function checkRecords(options: CheckRecordsOptions): Promise<CheckOutcome> {
  const { targets, conditions } = options;
  const distinct = new Map<string, number>();
  const fragments: SqlFragment[] = [];
  // Per member: 'denied', [] (always holds), or the index of its condition in `fragments`.
  const members = conditions.map((c) => {
    if (c === 'denied' || c.length === 0) return c;
    const fragment = c.length === 1 ? c[0] : joinSql(c.map((f) => ({ sql: `(${f.sql})`, bindings: f.bindings })), ' AND ');
    const key = `${fragment.sql}\u0000${JSON.stringify(fragment.bindings)}`;
    let index = distinct.get(key);
    if (index === undefined) distinct.set(key, (index = fragments.push(fragment) - 1));
    return index;
  });
  if (fragments.length === 0 && targets.every((t) => t.kind === 'written')) {
    // Nothing to evaluate and every row at hand (rule `""` on written rows): no statement.
    const rows = targets.map((t) => (t as Extract<CheckTarget, { kind: 'written' }>).row);
    return { rows, stale: targets.map(() => false), holds: (member) => members[member] !== 'denied' };
  }
  const found = await evaluateConditions({
    runner: options.runner,
    table: options.collection.table,
    targets,
    conditions: fragments,
    staleness: options.staleness,
  });
  return {
    rows: found.rows,
    stale: found.stale,
    holds(member, target) {
      const entry = members[member];
      if (entry === 'denied' || found.rows[target] === undefined) return false;
      return typeof entry === 'number' ? found.holds[entry].has(target) : true;
    },
  };
}
