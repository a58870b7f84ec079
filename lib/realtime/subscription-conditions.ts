import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { Identity } from '../auth/identity.js';
import { RecordbaseError } from '../errors.js';
import { RECORD_ALIAS } from '../db/record-store.js';
import { compileRule, fenceFilter } from '../records/access-rules.js';
import { compileFieldViews, guardedViewFields } from '../records/field-visibility.js';
import { isSuperuser, type Caller } from '../records/caller.js';
import { compileCostedFilter, type FilterLimits } from '../query/compile-filter.js';
import { hasDeferredValues } from '../query/deferred-value.js';
import { listOperandNames, type FilterNode } from '../query/filter-ast.js';
import { parseFilterCached } from '../query/filter-parser.js';
import type { SqlFragment } from '../sql-fragment.js';
import type { CollectionSchema, SchemaRegistry } from '../schema/collection-schema.js';
import type { Conditions } from './check-records.js';
import { subscriptionError, type Subscription } from './parse-subscription.js';

/**
 * The bounds of one subscription's filter (docs/limits.md, "Realtime"), stricter than a list's:
 * a list's filter runs once per request, a subscription's on every change of its collection for
 * as long as the stream lives.
 */
export const SUBSCRIPTION_FILTER_LIMITS: FilterLimits = { maxCost: 50, maxHops: 2, what: "a realtime subscription's filter" };

/** The summed cost of one client's subscription filters (each as in FilterLimits) at most. */
export const MAX_CLIENT_FILTER_COST = 1_000;

/**
 * What one subscription needs for a change to reach it, compiled once when it is applied: the
 * rule (list for `c/*`, view for `c/id`) and the client's filter fenced behind it. Date macros
 * are bound as DeferredValues and read the clock at each check, so nothing is compiled per change.
 */
export interface SubscriptionConditions {
  /** Every fragment must hold; `[]` always passes (rule `""`, a superuser without filter); 'denied' never (a `null` rule). */
  readonly fragments: readonly SqlFragment[] | 'denied';
  /** Some binding is a DeferredValue: resolve the fragments at each check (resolveBindings). */
  readonly deferred: boolean;
  /**
   * The conditions read nothing but the record's own row (no relation path, back-relation or
   * `@collection`): a delete checked on the row as it was is checked on a consistent state.
   */
  readonly rowLocal: boolean;
  /**
   * The client's part is cheap to check for any row: no filter, or one that reads only the row
   * and matches no pattern (`~`, whose cost grows with the text). The rule is the host's, costly
   * or not. Such conditions of every client are checked together in shared statements; the
   * others in their client's own lane (deliver-changes.ts).
   */
  readonly cheap: boolean;
  /** The filter's cost (0 without one), counted against MAX_CLIENT_FILTER_COST. */
  readonly cost: number;
  /**
   * Per field of the collection a view rule guards (field-visibility.ts guardedViewFields), that
   * rule for this caller, checked with the conditions in the same statement: a message leaves out
   * what it refuses. Undefined when the caller reads every field (a superuser, or no field rule).
   */
  readonly fieldViews?: readonly Conditions[];
}

/** What a subscription is compiled for. */
export interface SubscriptionConditionOptions {
  registry: SchemaRegistry;
  collection: CollectionSchema;
  /** `list` for `c/*`, `view` for `c/id`. */
  action: 'list' | 'view';
  caller: Caller;
  /** The subscription's `options.query.filter`, if any. */
  filter?: string;
}

/**
 * Compiles a subscription's conditions. A filter that is invalid or over
 * SUBSCRIPTION_FILTER_LIMITS throws its 400 (the POST names the subscription); a `null` rule for a
 * non-superuser gives 'denied' (the subscription is accepted and receives nothing, as PocketBase).
 */
export function compileSubscriptionConditions(options: SubscriptionConditionOptions): SubscriptionConditions {
  const { registry, collection, action, caller, filter } = options;
  const filterNode = filter === undefined ? undefined : parseFilterCached(filter);
  let filterFragments: SqlFragment[] = [];
  let cost = 0;
  if (filterNode !== undefined) {
    const compiled = compileCostedFilter(filterNode, {
      registry,
      collection,
      alias: RECORD_ALIAS,
      request: caller.request,
      mode: isSuperuser(caller) ? 'superuser' : 'user',
      deferMacros: true,
      limits: SUBSCRIPTION_FILTER_LIMITS,
    });
    filterFragments = [{ sql: compiled.sql, bindings: compiled.bindings }];
    cost = compiled.cost;
  }
  const rule = compileRule({ registry, collection, action, caller, deferMacros: true });
  if (rule === 'denied') return { fragments: 'denied', deferred: false, rowLocal: true, cheap: true, cost };
  const fragments = fenceFilter(rule, filterFragments);
  const fieldViews = compileFieldViews({ registry, collection, caller, deferMacros: true })?.map((view): Conditions => (view === 'denied' ? view : [view]));
  const ruleText = isSuperuser(caller) ? undefined : collection.rules[action] ?? undefined;
  const ruleNode = ruleText === undefined || ruleText.trim() === '' ? undefined : parseFilterCached(ruleText);
  // A field rule that reads other tables is checked on the record as it is now, as such a collection rule is.
  const fieldRules = fieldViews === undefined ? [] : guardedViewFields(collection).flatMap((field) => (field.rules?.view ? [parseFilterCached(field.rules.view)] : []));
  const rowLocal = (ruleNode === undefined || readsOnlyTheRow(ruleNode)) && (filterNode === undefined || readsOnlyTheRow(filterNode)) && fieldRules.every(readsOnlyTheRow);
  const all = [...fragments, ...(fieldViews ?? []).flatMap((view) => (view === 'denied' ? [] : view))];
  return {
    fragments,
    deferred: all.some((f) => hasDeferredValues(f.bindings)),
    rowLocal,
    cheap: filterNode === undefined || (readsOnlyTheRow(filterNode) && !matchesPatterns(filterNode)),
    cost,
    ...(fieldViews === undefined ? {} : { fieldViews }),
  };
}

/** Whether every name in `node` (function arguments included) is a field of the row itself, a request value or a macro. */
function readsOnlyTheRow(node: FilterNode): boolean {
  if (node.type !== 'comparison') return node.items.every(readsOnlyTheRow);
  return [node.left, node.right].flatMap(listOperandNames).every((operand) => {
    const head = operand.segments[0];
    if (head === '@collection') return false;
    return head.startsWith('@') || operand.segments.length === 1;
  });
}

/**
 * Whether `node` has a `~` or `!~` (plain or any-of), pattern matching whose cost grows with the
 * text, or a function call (`strftime` reads a text column with a regular expression per row).
 */
function matchesPatterns(node: FilterNode): boolean {
  if (node.type !== 'comparison') return node.items.some(matchesPatterns);
  return node.operator === '~' || node.operator === '!~' || node.left.type === 'function' || node.right.type === 'function';
}

/** A subscription compiled for its client (prepareSubscriptions), before it is applied. */
export interface PreparedSubscription {
  readonly sub: Subscription;
  readonly collection: CollectionSchema;
  readonly caller: Caller;
  readonly conditions: SubscriptionConditions;
  /**
   * Checked with every other client's in shared statements: cheap conditions, and a shape that
   * needs no database (no `expand`). Otherwise its client's checks all run in its own lane.
   */
  readonly shared: boolean;
  /** Subscriptions of one group receive the same presented record: the caller kind and the `fields` (shared ones have no expand). */
  readonly shapeGroup: string;
}

/** Compile work done between two yields to the event loop while a client's subscriptions are prepared. */
const PREPARE_SLICE_MS = 10;

/**
 * Compiles a client's subscriptions for `identity` (docs/realtime.md): identical subscription
 * strings are one; each filter within SUBSCRIPTION_FILTER_LIMITS and all of them together within
 * MAX_CLIENT_FILTER_COST, else a 400 naming the subscription or the limit. Topics of no known
 * collection are kept out (accepted, never delivered). Yields to the event loop between slices of
 * work, so a POST of 1,000 subscriptions never stalls other requests.
 */
export async function prepareSubscriptions(options: { registry: SchemaRegistry; identity: Identity | null; subscriptions: readonly Subscription[] }): Promise<PreparedSubscription[]> {
  const { registry, identity } = options;
  const seen = new Set<string>();
  const prepared: PreparedSubscription[] = [];
  const compiled = new Map<string, SubscriptionConditions>();
  let total = 0;
  let sliceStart = Date.now();
  for (const sub of options.subscriptions) {
    if (seen.has(sub.raw)) continue;
    seen.add(sub.raw);
    const collection = sub.collection;
    if (!collection) continue;
    if (Date.now() - sliceStart > PREPARE_SLICE_MS) {
      await yieldToEventLoop();
      sliceStart = Date.now();
    }
    const caller = callerOf(identity, sub);
    const action = sub.recordId === undefined ? 'list' : 'view';
    const key = JSON.stringify([collection.name, action, sub.filter ?? null, sub.query, sub.headers]);
    let conditions = compiled.get(key);
    if (!conditions) {
      try {
        conditions = compileSubscriptionConditions({ registry, collection, action, caller, filter: sub.filter });
      } catch (err) {
        if (err instanceof RecordbaseError && err.status === 400) throw subscriptionError(sub.raw, err.message, err);
        throw err;
      }
      compiled.set(key, conditions);
      total += conditions.cost;
    }
    if (total > MAX_CLIENT_FILTER_COST) {
      throw subscriptionError(sub.raw, `the client's subscription filters together cost more than ${MAX_CLIENT_FILTER_COST} (each comparison counts 1, each multi-valued relation or back-relation it goes through 1 more)`);
    }
    const shared = conditions.cheap && sub.shape.tree.size === 0;
    prepared.push({
      sub,
      collection,
      caller,
      conditions,
      shared,
      shapeGroup: sub.shape.tree.size === 0 ? `${isSuperuser(caller)}|${sub.shapeKey}` : JSON.stringify([identity?.id ?? null, sub.query, sub.headers, sub.shapeKey]),
    });
  }
  return prepared;
}

/**
 * Who a subscription's rules are checked for: the client's identity, `@request.query.*` and
 * `@request.headers.*` from its options (as PocketBase: not the headers of the POST), method GET,
 * context `realtime`.
 */
export function callerOf(identity: Identity | null, sub: Subscription): Caller {
  return { request: { auth: identity, query: sub.query, headers: sub.headers, body: {}, method: 'GET', context: 'realtime' } };
}
