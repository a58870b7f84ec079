import { joinSql, quoteIdent as q, type SqlFragment } from '../../sql-fragment.js';
import { RECORD_ALIAS } from '../record-store.js';
import { OUTBOX_TABLE } from '../shared-names.js';
import type { StatementRunner } from '../statements/statement-runner.js';

/**
 * A record conditions are evaluated on: its `current` row, read in the same statement as the
 * conditions (one consistent state), or a row as an outbox change `written` it.
 */
export type ConditionTarget =
  | { readonly kind: 'current'; readonly recordId: string }
  | { readonly kind: 'written'; readonly row: Record<string, unknown>; readonly seq: string; readonly tx: string; readonly snapshot?: string };

/** What evaluateConditions needs. */
export interface EvaluateConditionsOptions {
  /** Where every statement goes, within the runner's bounds (the caller's check bound). */
  runner: StatementRunner;
  /** The collection's table (the targets' rows are of its type). */
  table: string;
  targets: readonly ConditionTarget[];
  /** Distinct conditions on the record `r` (bindings resolved). */
  conditions: readonly SqlFragment[];
  /** Compute `stale` for written targets (only needed when a condition reads other tables). */
  staleness: boolean;
}

/** What evaluateConditions found, by target index. */
export interface EvaluatedConditions {
  /** The row (`to_jsonb` shape), or undefined when a current record no longer exists. */
  rows: (Record<string, unknown> | undefined)[];
  /** For a written target: a change committed after it (not in its snapshot), so other tables may have changed since. */
  stale: boolean[];
  /** Per condition: the targets it holds for. */
  holds: Set<number>[];
}

/** Condition columns per statement at most (Postgres allows 1,664 output columns). */
const MAX_COLUMNS = 500;
/** Conditions times rows evaluated by one statement at most, so that one statement stays short. */
const MAX_CELLS = 5_000;
/** Bindings per statement at most (the protocol allows 65,535). */
const MAX_BINDINGS = 30_000;
/** Binding sets times rows in one statement over arrays at most. */
const MAX_ARRAY_CELLS = 50_000;
/** Aliases of the targets' list and of the bindings' arrays (the compiler's own are `r`, `r1`, ...). */
const TARGETS = q('_rb_t');
const BINDINGS = q('_rb_b');
/** Postgres array types for bindings of one JS type; anything else (null, objects) is not evaluated over arrays. */
const ARRAY_TYPES: Record<string, string> = { string: 'text[]', number: 'double precision[]', boolean: 'boolean[]' };

/** A condition and its position in `conditions`. */
interface Entry {
  fragment: SqlFragment;
  index: number;
}

/**
 * Evaluates `conditions` on `targets` in as few statements as the bounds allow: distinct ones as
 * columns of one statement over all the targets (`SELECT to_jsonb(r.*), (c0), (c1), ... FROM
 * unnest(ids) JOIN posts r`), and those with the same SQL text differing only in their values (an
 * owner rule for 1,000 identities) as one condition over arrays of those values. Every statement
 * goes through `runner`, within its bounds. Throws when any statement fails.
 */
export async function evaluateConditions(options: EvaluateConditionsOptions): Promise<EvaluatedConditions> {
  const { targets, conditions } = options;
  const rows: (Record<string, unknown> | undefined)[] = new Array(targets.length).fill(undefined);
  const stale: boolean[] = new Array(targets.length).fill(false);
  const holds = conditions.map(() => new Set<number>());
  const current: number[] = [];
  const written: number[] = [];
  targets.forEach((t, i) => (t.kind === 'current' ? current : written).push(i));
  const { singles, arrayGroups } = groupBySql(conditions.map((fragment, index) => ({ fragment, index })));
  const source = { current: sourceOfCurrent(options), written: sourceOfWritten(options) };
  for (const kind of ['current', 'written'] as const) {
    const indexes = kind === 'current' ? current : written;
    if (indexes.length === 0) continue;
    const from = source[kind];
    // The rows themselves, with as many single conditions as fit; one statement at least.
    let columnStart = 0;
    do {
      const columns = takeColumns(singles, columnStart);
      const perStatement = Math.max(1, Math.floor(MAX_CELLS / Math.max(1, columns.length)));
      for (let start = 0; start < indexes.length; start += perStatement) {
        const part = indexes.slice(start, start + perStatement);
        const withRows = columnStart === 0;
        const result = await run(options, selectColumns({ from: from(part), columns, withRows, staleness: withRows && kind === 'written' && options.staleness }));
        for (const row of result) {
          const target = part[Number(row.n) - 1];
          if (withRows) {
            rows[target] = kind === 'current' ? (row.row as Record<string, unknown>) : (targets[target] as { row: Record<string, unknown> }).row;
            if (row.stale === true) stale[target] = true;
          }
          columns.forEach((entry, k) => row[`m${k}`] === true && holds[entry.index].add(target));
        }
      }
      columnStart += columns.length;
    } while (columnStart < singles.length);
    for (const group of arrayGroups) {
      const perStatement = Math.max(1, Math.floor(MAX_ARRAY_CELLS / group.entries.length));
      for (let start = 0; start < indexes.length; start += perStatement) {
        const part = indexes.slice(start, start + perStatement);
        const result = await run(options, selectOverArrays({ from: from(part), group }));
        for (const row of result) holds[group.entries[Number(row.i) - 1].index].add(part[Number(row.n) - 1]);
      }
    }
  }
  return { rows, stale, holds };
}

/** Conditions evaluated as columns, and those evaluated over arrays of their values. */
function groupBySql(entries: Entry[]): { singles: Entry[]; arrayGroups: ArrayGroup[] } {
  const bySql = new Map<string, Entry[]>();
  for (const entry of entries) {
    const group = bySql.get(entry.fragment.sql);
    if (group) group.push(entry);
    else bySql.set(entry.fragment.sql, [entry]);
  }
  const singles: Entry[] = [];
  const arrayGroups: ArrayGroup[] = [];
  for (const [text, group] of bySql) {
    const types = group.length > 1 ? arrayTypesOf(group) : undefined;
    const rewritten = types && replacePlaceholders(text, types.map((_, k) => `${BINDINGS}.${q(`p${k}`)}`));
    if (!types || rewritten === undefined) singles.push(...group);
    else arrayGroups.push({ sql: rewritten, types, entries: group });
  }
  return { singles, arrayGroups };
}

/** Single conditions from `start` that fit one statement (MAX_COLUMNS, MAX_BINDINGS). */
function takeColumns(singles: readonly Entry[], start: number): Entry[] {
  const columns: Entry[] = [];
  let bindings = 0;
  for (let i = start; i < singles.length && columns.length < MAX_COLUMNS; i++) {
    const count = singles[i].fragment.bindings.length;
    if (columns.length > 0 && bindings + count > MAX_BINDINGS) break;
    columns.push(singles[i]);
    bindings += count;
  }
  return columns;
}

/** A FROM clause yielding the targets as `r` (the record) and `_rb_t.n` (1-based position in `part`). */
type TargetSource = (part: readonly number[]) => SqlFragment;

function sourceOfCurrent(options: EvaluateConditionsOptions): TargetSource {
  const table = q(options.table);
  return (part) => ({
    sql: `unnest(?::text[]) WITH ORDINALITY AS ${TARGETS}("id", "n") JOIN ${table} AS ${q(RECORD_ALIAS)} ON ${q(RECORD_ALIAS)}."id" = ${TARGETS}."id"`,
    bindings: [part.map((i) => (options.targets[i] as { recordId: string }).recordId)],
  });
}

function sourceOfWritten(options: EvaluateConditionsOptions): TargetSource {
  const table = q(options.table);
  return (part) => ({
    sql: `jsonb_array_elements(?::jsonb) WITH ORDINALITY AS ${TARGETS}("j", "n") CROSS JOIN LATERAL jsonb_populate_record(NULL::${table}, ${TARGETS}."j"->'row') AS ${q(RECORD_ALIAS)}`,
    bindings: [
      JSON.stringify(
        part.map((i) => {
          const t = options.targets[i] as Extract<ConditionTarget, { kind: 'written' }>;
          return { row: t.row, seq: t.seq, tx: t.tx, snapshot: t.snapshot ?? null };
        }),
      ),
    ],
  });
}

/**
 * Whether a change other than the target's own transaction's earlier ones is not in the snapshot
 * its change was written in: it committed after, so the tables a rule reads may have changed
 * since. A change written without a snapshot counts as stale.
 */
const STALE = `CASE WHEN ${TARGETS}."j"->>'snapshot' IS NULL THEN TRUE ELSE EXISTS (SELECT 1 FROM ${q(OUTBOX_TABLE)} AS "o"
  WHERE "o"."tx" >= pg_snapshot_xmin((${TARGETS}."j"->>'snapshot')::pg_snapshot) AND "o"."seq" <> (${TARGETS}."j"->>'seq')::bigint
    AND CASE WHEN "o"."tx" = (${TARGETS}."j"->>'tx')::xid8 THEN "o"."seq" > (${TARGETS}."j"->>'seq')::bigint
      ELSE NOT pg_visible_in_snapshot("o"."tx", (${TARGETS}."j"->>'snapshot')::pg_snapshot) END) END`;

function selectColumns(options: { from: SqlFragment; columns: readonly Entry[]; withRows: boolean; staleness: boolean }): SqlFragment {
  const select: SqlFragment[] = [{ sql: `${TARGETS}."n"`, bindings: [] }];
  if (options.withRows) select.push({ sql: `to_jsonb(${q(RECORD_ALIAS)}.*) AS "row"`, bindings: [] });
  if (options.staleness) select.push({ sql: `${STALE} AS "stale"`, bindings: [] });
  options.columns.forEach((entry, k) => select.push({ sql: `COALESCE((${entry.fragment.sql}), false) AS "m${k}"`, bindings: entry.fragment.bindings }));
  const list = joinSql(select, ', ');
  return { sql: `SELECT ${list.sql} FROM ${options.from.sql}`, bindings: [...list.bindings, ...options.from.bindings] };
}

interface ArrayGroup {
  /** The condition's SQL with its k-th placeholder replaced by `_rb_b.pk`. */
  sql: string;
  types: string[];
  entries: Entry[];
}

function selectOverArrays(options: { from: SqlFragment; group: ArrayGroup }): SqlFragment {
  const { from, group } = options;
  const arrays = group.types.map((_, k) => group.entries.map((e) => e.fragment.bindings[k]));
  const columns = group.types.map((_, k) => q(`p${k}`)).join(', ');
  return {
    sql: `SELECT ${TARGETS}."n", ${BINDINGS}."i" FROM ${from.sql}
      CROSS JOIN unnest(${group.types.map((t) => `?::${t}`).join(', ')}) WITH ORDINALITY AS ${BINDINGS}(${columns}, "i")
      WHERE COALESCE((${group.sql}), false)`,
    bindings: [...from.bindings, ...arrays],
  };
}

async function run(options: EvaluateConditionsOptions, statement: SqlFragment): Promise<Record<string, unknown>[]> {
  return options.runner.rows(statement);
}

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
