import type { Knex } from 'knex';
import { quoteIdent as q, joinSql, type SqlFragment } from '../query/sql-fragment.js';
import { RECORD_ALIAS } from '../db/record-store.js';
import type { CollectionSchema } from '../schema/collection-schema.js';

/**
 * What one subscriber needs for a change to reach it: `[]` (the rule is `""`, or a superuser
 * without a filter) passes without a query; `'denied'` never passes (a `null` rule for a
 * non-superuser); otherwise every fragment must hold for the row.
 */
export type Conditions = readonly SqlFragment[] | 'denied';

/** Conditions evaluated in one statement at most; Postgres allows 1,664 output columns. */
const MAX_CONDITIONS_PER_STATEMENT = 500;
/** Bindings per statement at most (the protocol allows 65,535). */
const MAX_BINDINGS_PER_STATEMENT = 30_000;

function keyOf(condition: SqlFragment): string {
  return `${condition.sql}\u0000${JSON.stringify(condition.bindings)}`;
}

/** Which conditions hold for the row, and which could not be evaluated (they count as not holding). */
export interface MatchResult {
  holds: boolean[];
  failed: boolean[];
}

/**
 * Decides, for one change of `collection` whose row (as stored, `to_jsonb`) is `row`, which of
 * `conditions` hold: identical conditions (the same SQL and bindings) are evaluated once, and all
 * distinct ones together in one statement per 500 against the row rebuilt with its column types
 * (`jsonb_populate_record(NULL::table, row) AS r`), so the rule checks of 1,000 subscribers cost
 * one or two statements, not 1,000. Relations in a rule read the real tables as usual.
 *
 * A statement that fails (one subscriber's filter errs or runs past the statement timeout) is
 * split in halves until the failing conditions are alone, so one bad filter cannot silence the
 * others; those are reported in `failed` (the caller stops evaluating them). When every condition
 * failed and the database does not answer `SELECT 1` either, the error is thrown instead, so the
 * change is read again once the database is back.
 */
export async function matchConditions(db: Knex, collection: CollectionSchema, row: Record<string, unknown>, conditions: readonly Conditions[]): Promise<MatchResult> {
  const distinct = new Map<string, Entry>();
  const keys = conditions.map((c) => {
    if (c === 'denied' || c.length === 0) return undefined;
    const fragment = c.length === 1 ? c[0] : joinSql(c.map((f) => ({ sql: `(${f.sql})`, bindings: f.bindings })), ' AND ');
    const key = keyOf(fragment);
    if (!distinct.has(key)) distinct.set(key, { fragment, holds: false, failed: false });
    return key;
  });
  const rowJson = JSON.stringify(row);
  let firstError: unknown;
  const run = async (entries: Entry[]): Promise<void> => {
    try {
      const results = await evaluate(db, collection, rowJson, entries.map((e) => e.fragment));
      entries.forEach((entry, i) => (entry.holds = results[i]));
    } catch (error) {
      firstError ??= error;
      if (entries.length === 1) {
        entries[0].failed = true;
        return;
      }
      const half = Math.ceil(entries.length / 2);
      await run(entries.slice(0, half));
      await run(entries.slice(half));
    }
  };
  let chunk: Entry[] = [];
  let bindings = 0;
  for (const entry of distinct.values()) {
    if (chunk.length >= MAX_CONDITIONS_PER_STATEMENT || (chunk.length > 0 && bindings + entry.fragment.bindings.length > MAX_BINDINGS_PER_STATEMENT)) {
      await run(chunk);
      chunk = [];
      bindings = 0;
    }
    chunk.push(entry);
    bindings += entry.fragment.bindings.length;
  }
  if (chunk.length > 0) await run(chunk);
  const entries = [...distinct.values()];
  if (entries.length > 0 && entries.every((e) => e.failed)) {
    try {
      await db.raw('SELECT 1');
    } catch {
      throw firstError;
    }
  }
  return {
    holds: conditions.map((c, i) => (c === 'denied' ? false : c.length === 0 ? true : distinct.get(keys[i]!)!.holds)),
    failed: conditions.map((c, i) => keys[i] !== undefined && distinct.get(keys[i]!)!.failed),
  };
}

interface Entry {
  fragment: SqlFragment;
  holds: boolean;
  failed: boolean;
}

async function evaluate(db: Knex, collection: CollectionSchema, rowJson: string, fragments: readonly SqlFragment[]): Promise<boolean[]> {
  const columns = fragments.map((f, i) => `COALESCE((${f.sql}), false) AS m${i}`).join(', ');
  const result: { rows: Record<string, boolean>[] } = await db.raw(
    `SELECT ${columns} FROM jsonb_populate_record(NULL::${q(collection.table)}, ?::jsonb) AS ${q(RECORD_ALIAS)}`,
    [...fragments.flatMap((f) => f.bindings), rowJson] as Knex.RawBinding[],
  );
  const first = result.rows[0] ?? {};
  return fragments.map((_, i) => first[`m${i}`] === true);
}
