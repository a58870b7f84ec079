import { ForbiddenError } from '../errors.js';
import { RECORD_ALIAS } from '../db/record-store.js';
import type { SqlFragment } from '../query/sql-fragment.js';
import { compileFilter } from '../query/compile-filter.js';
import type { CollectionSchema, ResolvedRules, SchemaRegistry } from '../schema/collection-schema.js';
import { isSuperuser, type Caller } from './caller.js';

/** The five guarded actions, named as the rules are. */
export type RuleAction = keyof ResolvedRules;

/**
 * The SQL conditions that a rule adds for this caller: none for superusers and for `""`, the
 * compiled expression otherwise. A `null` rule refuses everyone but superusers with 403, before
 * any query runs.
 */
export function compileRule(options: { registry: SchemaRegistry; collection: CollectionSchema; action: RuleAction; caller: Caller }): SqlFragment[] {
  const { collection, action, caller } = options;
  if (isSuperuser(caller)) return [];
  const rule = collection.rules[action];
  if (rule === null) throw new ForbiddenError('Only superusers can perform this action.');
  if (rule.trim() === '') return [];
  return [
    compileFilter(rule, {
      registry: options.registry,
      collection,
      alias: RECORD_ALIAS,
      request: caller.request,
      isRule: true,
      now: new Date(),
    }),
  ];
}

/** A client's `filter` parameter as SQL conditions (none when absent or blank). */
export function compileUserFilter(options: { registry: SchemaRegistry; collection: CollectionSchema; filter: string | undefined; caller: Caller }): SqlFragment[] {
  const { filter, caller } = options;
  if (filter === undefined || filter.trim() === '') return [];
  const superuser = isSuperuser(caller);
  return [
    compileFilter(filter, {
      registry: options.registry,
      collection: options.collection,
      alias: RECORD_ALIAS,
      request: caller.request,
      canSeeHidden: superuser,
      allowCollectionRefs: superuser,
      now: new Date(),
    }),
  ];
}

/** `NOT (conditions)`, where a NULL outcome counts as failing: the records a rule refuses. */
export function negateConditions(conditions: readonly SqlFragment[]): SqlFragment {
  const sql = conditions.map((c) => `(${c.sql})`).join(' AND ');
  return { sql: `NOT COALESCE((${sql}), false)`, bindings: conditions.flatMap((c) => c.bindings) };
}
