/**
 * The filter language's functions (PocketBase's, docs/query-language.md "Functions"):
 * `strftime(format, time, modifiers...)` and `geoDistance(lonA, latA, lonB, latB)`. The compiler
 * resolves each argument as it resolves a comparison's side (so paths, hidden fields, target view
 * rules and `@request` values behave as everywhere else) and hands them here to be checked and
 * turned into one SQL expression.
 */
import type { StorageKind } from '../schema/storage-kinds.js';
import { bindValue, joinSql, rawSql, sql, type SqlFragment } from '../sql-fragment.js';
import { DeferredValue } from './deferred-value.js';
import type { FunctionOperand } from './filter-ast.js';
import { createFilterError, quoteForMessage } from './filter-error.js';
import { coerceFilterValue, INVALID } from './filter-values.js';
import { compileStrftime, type StrftimeText } from './strftime.js';
import {
  bindTimeValue,
  parseTimeText,
  readTimeNumber,
  timeOfDateColumn,
  timeOfNumberColumn,
  timeOfTextColumn,
  oneRowTable,
  withValue,
  type NextAlias,
  type TimeSql,
  type TimeValue,
} from './time-values.js';

/** An argument known at compile time: a literal (strict: a bad one is a 400), a macro, or a `@request` value (lenient: NULL). */
export interface ArgumentValue {
  readonly kind: 'value';
  readonly value: unknown;
  readonly strict: boolean;
  /** The macro it is (`@now`), read again at each check when the context defers macros. */
  readonly macro?: string;
  readonly pos: number;
  readonly label: string;
}

/** An argument read from the row: a column or a path, of its storage kind. */
export interface ArgumentExpr {
  readonly kind: 'expr';
  readonly sql: SqlFragment;
  readonly storage: StorageKind;
  readonly pos: number;
  readonly label: string;
}

/** One argument as the compiler resolved it. */
export type FunctionArgumentSide = ArgumentValue | ArgumentExpr;

/** What a function call needs from its compilation. */
export interface FunctionContext {
  readonly nextAlias: NextAlias;
  /** The filter's instant (`@now`), and whether a macro is bound as a DeferredValue read at each check. */
  readonly now: Date;
  readonly deferMacros: boolean;
}

/** A compiled call: its SQL and the kind of value it gives. */
export interface CompiledCall {
  readonly sql: SqlFragment;
  readonly storage: StorageKind;
}

/** Compiles a call whose arguments are resolved (same order as `call.args`). Throws `invalid_filter` at the argument at fault. */
export function compileFunctionCall(call: FunctionOperand, args: readonly FunctionArgumentSide[], context: FunctionContext): CompiledCall {
  if (call.name === 'geoDistance') return { sql: compileGeoDistance(args, context), storage: 'number' };
  const [format, time, ...modifiers] = args;
  const text = (arg: FunctionArgumentSide, what: string): StrftimeText => {
    if (arg.kind !== 'value' || !arg.strict || arg.macro !== undefined || typeof arg.value !== 'string') {
      throw createFilterError(`strftime()'s ${what} must be text in quotes, not ${quoteForMessage(arg.label)}`, arg.pos);
    }
    return { text: arg.value, pos: arg.pos };
  };
  return {
    sql: compileStrftime({
      format: text(format!, 'format'),
      time: time === undefined ? { ms: bindNow(context) } : readTimeArgument(time, context),
      modifiers: modifiers.map((modifier) => text(modifier, 'modifiers')),
      nextAlias: context.nextAlias,
    }),
    storage: 'text',
  };
}

/** `@now` in milliseconds, bound (deferred when the context defers macros). */
function bindNow(context: FunctionContext): SqlFragment {
  return bindValue(context.deferMacros ? DeferredValue.ofMacro('@now', (now) => (now as Date).getTime()) : context.now.getTime(), 'double precision');
}

/**
 * strftime's time value: a date, number or text column (text read per row by SQLite's grammar),
 * or a value of the filter: a literal that is not a time value in 0001-9999 is a 400, a `@request`
 * value that is not one reads as no time (`""`).
 */
function readTimeArgument(arg: FunctionArgumentSide, context: FunctionContext): TimeSql {
  if (arg.kind === 'expr') {
    switch (arg.storage) {
      case 'date':
        return timeOfDateColumn(arg.sql);
      case 'number':
        return timeOfNumberColumn(arg.sql, context.nextAlias);
      case 'text':
        return timeOfTextColumn(arg.sql, { nextAlias: context.nextAlias, now: bindNow(context) });
      default:
        throw createFilterError(`strftime()'s time value must be a date, text or number field, not ${quoteForMessage(arg.label)}`, arg.pos);
    }
  }
  if (arg.macro !== undefined && context.deferMacros) {
    const macro = arg.macro;
    const read = (pick: (value: TimeValue) => number | null) =>
      DeferredValue.ofMacro(macro, (value) => {
        const time = readTimeOf(value);
        return pick(time === undefined || time === 'now' ? { ms: null, raw: null } : time);
      });
    return { ms: bindValue(read((v) => v.ms), 'double precision'), raw: bindValue(read((v) => v.raw), 'double precision') };
  }
  if (arg.value === null || arg.value === undefined) return { ms: bindValue(null, 'double precision') };
  const value = readTimeOf(arg.value);
  if (value === 'now') return { ms: bindNow(context) };
  if (value === undefined || (arg.strict && value.ms === null && value.raw === null)) {
    if (!arg.strict) return { ms: bindValue(null, 'double precision') };
    throw createFilterError(`${arg.label} is not a time value strftime() reads (a date and time in 0001-9999, "now", or a number)`, arg.pos);
  }
  return bindTimeValue(value);
}

/** A value of the filter as a time value: text by SQLite's grammar, a number as itself, a Date as its instant. */
function readTimeOf(value: unknown): TimeValue | 'now' | undefined {
  if (typeof value === 'string') return parseTimeText(value);
  if (typeof value === 'number') return Number.isFinite(value) ? readTimeNumber(value) : undefined;
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? undefined : { ms: value.getTime(), raw: null };
  return undefined;
}

/** Earth's mean radius, in kilometres (PocketBase's). */
const EARTH_RADIUS_KM = 6371;
/** Coordinates beyond this are no place on Earth; bounding them keeps every trigonometric call finite. */
const MAX_COORDINATE = 1e300;

/**
 * `geoDistance(lonA, latA, lonB, latB)`: the great-circle distance in kilometres by the haversine
 * formula (PocketBase's result, computed without its `acos`, which loses precision near 0 and
 * fails in Postgres just outside [-1, 1]). Each argument is a number: a literal, a number field or
 * path, or a `@request` value (NULL when not a number). A NULL or non-finite argument gives NULL.
 */
function compileGeoDistance(args: readonly FunctionArgumentSide[], context: FunctionContext): SqlFragment {
  const numbers = args.map((arg, index) => readNumberArgument(arg, { index, deferMacros: context.deferMacros }));
  const alias = `"${context.nextAlias()}"`;
  const [lonA, latA, lonB, latB] = ['x1', 'y1', 'x2', 'y2'].map((name) => rawSql(`${alias}."${name}"`)) as [SqlFragment, SqlFragment, SqlFragment, SqlFragment];
  const half = (a: SqlFragment, b: SqlFragment) => sql`power(sin(radians(${b} - ${a}) / 2), 2)`;
  const h = sql`${half(latA, latB)} + cos(radians(${latA})) * cos(radians(${latB})) * ${half(lonA, lonB)}`;
  // LEAST and GREATEST skip NULLs: without the CASE a missing coordinate would read as distance 0.
  const known = joinSql([lonA, latA, lonB, latB].map((n) => sql`${n} IS NOT NULL`), ' AND ');
  const distance = sql`CASE WHEN ${known} THEN 2 * ${rawSql(String(EARTH_RADIUS_KM))} * asin(sqrt(LEAST(1, GREATEST(0, ${h})))) END`;
  const finite = (n: SqlFragment) => withValue(n, context.nextAlias, (v) => sql`CASE WHEN ${v} BETWEEN ${rawSql(`-${MAX_COORDINATE}`)} AND ${rawSql(String(MAX_COORDINATE))} THEN ${v} END`);
  const [x1, y1, x2, y2] = numbers.map(finite) as [SqlFragment, SqlFragment, SqlFragment, SqlFragment];
  return sql`(SELECT ${distance} FROM ${oneRowTable(sql`${x1} AS "x1", ${y1} AS "y1", ${x2} AS "x2", ${y2} AS "y2"`, alias)})`;
}

/** One geoDistance argument as a double precision expression. */
function readNumberArgument(arg: FunctionArgumentSide, options: { index: number; deferMacros: boolean }): SqlFragment {
  const refuse = () => createFilterError(`geoDistance()'s argument ${options.index + 1} must be a number, not ${quoteForMessage(arg.label)}`, arg.pos);
  if (arg.kind === 'expr') {
    if (arg.storage !== 'number') throw refuse();
    return arg.sql;
  }
  if (arg.value === null || arg.value === undefined) return bindValue(null, 'double precision');
  // A literal must be a number as written (PocketBase takes no text there); a request value is read as one or is NULL.
  if (arg.strict && typeof arg.value !== 'number') throw refuse();
  if (arg.macro !== undefined && options.deferMacros) return bindValue(DeferredValue.ofMacro(arg.macro, (value) => value), 'double precision');
  const coerced = coerceFilterValue(arg.value, 'number');
  return bindValue(coerced === INVALID ? null : coerced, 'double precision');
}
