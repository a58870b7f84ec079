import type { Knex } from 'knex';
import { quoteIdent as q, joinSql, type SqlFragment } from '../query/sql-fragment.js';
import { RECORD_ALIAS } from '../db/record-store.js';
import type { CollectionSchema } from '../schema/collection-schema.js';
import { memoizePerObject } from '../memoize-per-object.js';

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

/** A subscriber's conditions joined into one fragment, with its dedupe key. */
interface Prepared {
  fragment: SqlFragment;
  key: string;
}

/**
 * Cached per conditions array: the hub keeps a subscription's compiled conditions (identities are
 * fixed per client), so joining and stringifying them happens once, not per change.
 */
const prepare = memoizePerObject((conditions: readonly SqlFragment[]): Prepared => {
  const fragment = conditions.length === 1 ? conditions[0] : joinSql(conditions.map((f) => ({ sql: `(${f.sql})`, bindings: f.bindings })), ' AND ');
  return { fragment, key: `${fragment.sql}\u0000${JSON.stringify(fragment.bindings)}` };
});

/** Postgres array types for bindings of one JS type; anything else (null, dates, objects) is not batched. */
const ARRAY_TYPES: Record<string, string> = { string: 'text[]', number: 'double precision[]', boolean: 'boolean[]' };

/**
 * Replaces the k-th knex placeholder `?` of `text` by `columns[k]`, as knex reads them: `\\?` is
 * an escaped literal question mark (kept, so a `?` operator written in SQL text is not taken for
 * a placeholder); `??` (an identifier binding) is not supported. Undefined when the count of
 * placeholders is not `columns.length` or a `??` is present.
 */
export function replacePlaceholders(text: string, columns: readonly string[]): string | undefined {
  let k = 0;
  let unsupported = false;
  const out = text.replace(/\\\?|\?\??/g, (match) => {
    if (match === '\\?') return match;
    if (match === '??') {
      unsupported = true;
      return match;
    }
    return k < columns.length ? columns[k++] : ((unsupported = true), match);
  });
  return unsupported || k !== columns.length ? undefined : out;
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
    const { fragment, key } = prepare(c);
    if (!distinct.has(key)) distinct.set(key, { fragment, holds: false, failed: false });
    return key;
  });
  const rowJson = JSON.stringify(row);
  let firstError: unknown;
  // Conditions with the same SQL text that differ only in their bindings (an owner rule for 1,000
  // identities) are evaluated as one condition over arrays of their bindings.
  const bySql = new Map<string, Entry[]>();
  for (const entry of distinct.values()) {
    const group = bySql.get(entry.fragment.sql);
    if (group) group.push(entry);
    else bySql.set(entry.fragment.sql, [entry]);
  }
  const singles: Entry[] = [];
  for (const [text, group] of bySql) {
    const types = group.length > 1 ? arrayTypesOf(group) : undefined;
    const rewritten = types && replacePlaceholders(text, types.map((_, k) => `${q(BINDINGS_ALIAS)}.${q(`p${k}`)}`));
    if (!types || rewritten === undefined) {
      singles.push(...group);
      continue;
    }
    for (let start = 0; start < group.length; start += MAX_ARRAY_CONDITION) {
      const part = group.slice(start, start + MAX_ARRAY_CONDITION);
      try {
        const holding = await evaluateOverArrays(db, collection, rowJson, rewritten, types, part);
        part.forEach((entry, i) => (entry.holds = holding.has(i + 1)));
      } catch (error) {
        // Decided one by one below, where a failing condition is isolated by halving.
        firstError ??= error;
        singles.push(...part);
      }
    }
  }
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
  for (const entry of singles) {
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

/** The alias of the bindings' arrays in a condition evaluated over arrays. */
const BINDINGS_ALIAS = '_rb_b';
/** Binding sets per array statement (each array is one bound parameter, so this bounds only its size). */
const MAX_ARRAY_CONDITION = 10_000;

/** The array type of each placeholder position when every entry's binding there has one plain JS type; else undefined. */
function arrayTypesOf(group: readonly Entry[]): string[] | undefined {
  const width = group[0].fragment.bindings.length;
  if (width === 0) return undefined;
  const types: string[] = [];
  for (let k = 0; k < width; k++) {
    const type = typeof group[0].fragment.bindings[k];
    const arrayType = ARRAY_TYPES[type];
    if (!arrayType || !group.every((e) => e.fragment.bindings.length === width && typeof e.fragment.bindings[k] === type)) return undefined;
    types.push(arrayType);
  }
  return types;
}

/** One statement deciding every binding set of `group` for the row: returns the 1-based indexes of those that hold. */
async function evaluateOverArrays(db: Knex, collection: CollectionSchema, rowJson: string, rewritten: string, types: readonly string[], group: readonly Entry[]): Promise<Set<number>> {
  const arrays = types.map((_, k) => group.map((e) => e.fragment.bindings[k]));
  const columns = types.map((_, k) => q(`p${k}`)).join(', ');
  const result: { rows: { i: string | number }[] } = await db.raw(
    `SELECT ${q(BINDINGS_ALIAS)}."i" FROM jsonb_populate_record(NULL::${q(collection.table)}, ?::jsonb) AS ${q(RECORD_ALIAS)},
      unnest(${types.map((t) => `?::${t}`).join(', ')}) WITH ORDINALITY AS ${q(BINDINGS_ALIAS)}(${columns}, "i")
      WHERE COALESCE((${rewritten}), false)`,
    [rowJson, ...arrays] as Knex.RawBinding[],
  );
  return new Set(result.rows.map((r) => Number(r.i)));
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
