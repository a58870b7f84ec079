import { BadRequestError } from '../errors.js';
import { RECORD_ALIAS, type RecordStore } from '../db/record-store.js';
import { columnAlias, selectColumns, type AggregateColumn, type AggregateInput, type AggregatePlan } from '../query/compile-aggregate.js';
import { STORAGE_KINDS } from '../schema/storage-kinds.js';
import type { CollectionSchema } from '../schema/collection-schema.js';
import { quoteIdent as q, type SqlFragment } from '../sql-fragment.js';

/** What an aggregate call asks for (docs/search.md, "Aggregates"): the list's paging and filter, with what to group and compute. */
export interface AggregateQuery extends AggregateInput {
  page: number;
  perPage: number;
  filter?: string;
  /** Words matched with the collection's search index, as a list's `search` (already read by readSearchParam). */
  search?: string;
  /** `limits.maxAggregateGroups`. */
  maxGroups: number;
}

/** A page of groups, in PocketBase's list shape: `totalItems` is the number of groups. */
export interface AggregateResult {
  page: number;
  perPage: number;
  totalItems: number;
  totalPages: number;
  /** One object per group: its group fields' values, then each aggregate (`count`, `sum_amount`, …). */
  items: Record<string, unknown>[];
}

/** What one aggregate runs: the plan, the conditions (the list rule with the fenced filter), the page and the cap on groups. */
export interface AggregateRun {
  collection: CollectionSchema;
  plan: AggregatePlan;
  where: readonly SqlFragment[];
  page: number;
  perPage: number;
  /** `limits.maxAggregateGroups`: more groups than this is a 400, never a truncated answer. */
  maxGroups: number;
}

/**
 * The statement of an aggregate, one round trip: the groups (at most `maxGroups + 1` of them, so
 * that too many is known without counting them all twice), their number, and the page asked for.
 * The LEFT JOIN keeps a row for the count when the page is past the last group; `$row` tells
 * such a row from a group.
 *
 *   WITH "g" AS (SELECT <columns> FROM "t" AS "r" WHERE … GROUP BY 1, 2 LIMIT ?)
 *   SELECT (SELECT count(*) FROM "g")::int AS "$total", "p".* FROM (SELECT 1) AS "one"
 *   LEFT JOIN LATERAL (SELECT TRUE AS "$row", "g".* FROM "g" ORDER BY … LIMIT ? OFFSET ?) AS "p" ON TRUE
 */
function aggregateStatement(run: AggregateRun): { sql: string; bindings: unknown[] } {
  const { plan, collection } = run;
  const columns = selectColumns(plan);
  const bindings: unknown[] = [...columns.bindings];
  let inner = `SELECT ${columns.sql} FROM ${q(collection.table)} AS ${q(RECORD_ALIAS)}`;
  run.where.forEach((condition, i) => {
    inner += `${i === 0 ? ' WHERE ' : ' AND '}(${condition.sql})`;
    bindings.push(...condition.bindings);
  });
  if (plan.groups.length > 0) inner += ` GROUP BY ${plan.groups.map((_, i) => i + 1).join(', ')}`;
  inner += ' LIMIT ?';
  bindings.push(run.maxGroups + 1);
  const orderBy = plan.order.map((o) => `${q(columnAlias(o.column))} ${o.descending ? 'DESC' : 'ASC'}`);
  const page = `SELECT TRUE AS "$row", "g".* FROM "g"${orderBy.length > 0 ? ` ORDER BY ${orderBy.join(', ')}` : ''} LIMIT ? OFFSET ?`;
  bindings.push(run.perPage, (run.page - 1) * run.perPage);
  const sql = `WITH "g" AS (${inner}) SELECT (SELECT count(*) FROM "g")::int AS "$total", "p".* FROM (SELECT 1) AS "one" LEFT JOIN LATERAL (${page}) AS "p" ON TRUE`;
  return { sql, bindings };
}

/** SQLSTATE numeric_value_out_of_range. */
const NUMERIC_VALUE_OUT_OF_RANGE = '22003';

/** A column's value as an answer holds it: dates in the record format, numbers as numbers. */
function readValue(column: AggregateColumn, raw: unknown): unknown {
  if (raw === null || raw === undefined) return null;
  if (column.storage === 'count') return Number(raw);
  return STORAGE_KINDS[column.storage].readColumn(raw);
}

/**
 * Runs an aggregate on `store` (the list's: replica or primary, under the request's statement
 * timeout) and reads its page. More groups than `maxGroups` is a 400 `aggregate_too_many_groups`.
 */
export async function aggregateRecords(store: RecordStore, run: AggregateRun): Promise<AggregateResult> {
  const rows = await store.selectRows(aggregateStatement(run)).catch((err: unknown) => {
    // A sum (or an average's running sum) of doubles past ±1.8e308: Postgres refuses it rather
    // than answer Infinity. What the records hold is the caller's own, so it is a 400 of its own.
    if ((err as { code?: unknown } | null)?.code === NUMERIC_VALUE_OUT_OF_RANGE) {
      throw new BadRequestError('A sum or an average of this aggregate is out of the range of a number (about ±1.8e308): aggregate fewer records.', 'bad_request', err);
    }
    throw err;
  });
  const totalItems = Number(rows[0]?.$total ?? 0);
  if (totalItems > run.maxGroups) {
    throw new BadRequestError(
      `The aggregate has more than ${run.maxGroups} groups (limits.maxAggregateGroups): narrow it with a filter or group by fewer fields.`,
      'aggregate_too_many_groups',
    );
  }
  const columns = [...run.plan.groups, ...run.plan.aggregates];
  const items = rows
    .filter((row) => row.$row === true)
    // fromEntries defines each key as an own property: a field may be named `__proto__`.
    .map((row) => Object.fromEntries(columns.map((column, i) => [column.name, readValue(column, row[columnAlias(i)])])));
  return { page: run.page, perPage: run.perPage, totalItems, totalPages: Math.ceil(totalItems / run.perPage), items };
}
