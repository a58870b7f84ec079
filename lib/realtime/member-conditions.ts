import { resolveBindings } from '../query/deferred-value.js';
import type { CheckOutcome, Conditions } from './check-records.js';
import type { LocalSubscription } from './local-client.js';

/**
 * What one checkRecords call over some subscriptions evaluates: member `i` is `subs[i]`'s
 * conditions, and after all of them come each subscription's field view rules (DESIGN 24), so
 * that which fields a message may hold is decided in the statement that checks the change (as
 * the change was written, for a delete whose record is gone), never by a query per subscriber.
 */
export interface MemberConditions {
  readonly conditions: readonly Conditions[];
  /**
   * For a subscription that holds on `target`: per field its view rules guard, whether it shows
   * (undefined when it reads every field), and a key telling those sets apart (`""` for undefined).
   */
  fieldsOf(outcome: CheckOutcome, member: number, target: number): { visible?: readonly boolean[]; key: string };
}

export function memberConditions(subs: readonly LocalSubscription[], now: Date): MemberConditions {
  const conditions: Conditions[] = subs.map((s) => resolve(s.conditions.fragments, s.conditions.deferred, now));
  const starts = subs.map((s) => {
    const views = s.conditions.fieldViews;
    if (views === undefined) return -1;
    const start = conditions.length;
    for (const view of views) conditions.push(resolve(view, s.conditions.deferred, now));
    return start;
  });
  return {
    conditions,
    fieldsOf(outcome, member, target) {
      const views = subs[member]!.conditions.fieldViews;
      if (views === undefined) return { key: '' };
      const start = starts[member]!;
      const visible = views.map((_, k) => outcome.holds(start + k, target));
      return { visible, key: visible.map((shows) => (shows ? '1' : '0')).join('') };
    },
  };
}

/** Conditions with their date macros read at `now`. */
function resolve(conditions: Conditions, deferred: boolean, now: Date): Conditions {
  if (conditions === 'denied' || !deferred) return conditions;
  return conditions.map((f) => ({ sql: f.sql, bindings: resolveBindings(f.bindings, now) }));
}
