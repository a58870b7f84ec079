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

/**
 * Decides, for one change of `collection` whose row (as stored, `to_jsonb`) is `row`, which of
 * `conditions` hold: identical conditions (the same SQL and bindings) are evaluated once, and all
 * distinct ones together in one statement per 500 against the row rebuilt with its column types
 * (`jsonb_populate_record(NULL::table, row) AS r`), so the rule checks of 1,000 subscribers cost
 * one or two statements, not 1,000. Relations in a rule read the real tables as usual. A
 * statement that fails (one subscriber's filter errs at run time, a regular expression for
 * instance) is retried one condition at a time, so one bad filter cannot silence the others; a
 * condition that still fails does not hold. Returns one boolean per entry of `conditions`.
 */
export async function matchConditions(db: Knex, collection: CollectionSchema, row: Record<string, unknown>, conditions: readonly Conditions[]): Promise<boolean[]> {
  const distinct = new Map<string, { fragment: SqlFragment; holds: boolean }>();
  const keys = conditions.map((c) => {
    if (c === 'denied' || c.length === 0) return undefined;
    const fragment = c.length === 1 ? c[0] : joinSql(c.map((f) => ({ sql: `(${f.sql})`, bindings: f.bindings })), ' AND ');
    const key = keyOf(fragment);
    if (!distinct.has(key)) distinct.set(key, { fragment, holds: false });
    return key;
  });
  const pending = [...distinct.values()];
  const rowJson = JSON.stringify(row);
  let chunk: typeof pending = [];
  let bindings = 0;
  const flush = async () => {
    if (chunk.length === 0) return;
    const current = chunk;
    chunk = [];
    bindings = 0;
    try {
      const results = await evaluate(db, collection, rowJson, current.map((e) => e.fragment));
      current.forEach((entry, i) => (entry.holds = results[i]));
    } catch (error) {
      let failures = 0;
      for (const entry of current) {
        try {
          entry.holds = current.length === 1 ? false : (await evaluate(db, collection, rowJson, [entry.fragment]))[0];
          if (current.length === 1) failures++;
        } catch {
          failures++;
          entry.holds = false;
        }
      }
      // Every condition failed on its own: a bad filter, or the database is gone? Ask it something
      // trivial; if that fails too, the change is read again once it is back.
      if (failures === current.length) await db.raw('SELECT 1');
    }
  };
  for (const entry of pending) {
    if (chunk.length >= MAX_CONDITIONS_PER_STATEMENT || (chunk.length > 0 && bindings + entry.fragment.bindings.length > MAX_BINDINGS_PER_STATEMENT)) await flush();
    chunk.push(entry);
    bindings += entry.fragment.bindings.length;
  }
  await flush();
  return conditions.map((c, i) => (c === 'denied' ? false : c.length === 0 ? true : distinct.get(keys[i]!)!.holds));
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
