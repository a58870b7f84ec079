/**
 * SQLite's time values (https://sqlite.org/lang_datefunc.html#time_values), which `strftime()`
 * reads in PocketBase: `YYYY-MM-DD[ HH:MM[:SS[.SSS]]][tz]` (a `T` or spaces between date and
 * time), `HH:MM[:SS[.SSS]][tz]` (on 2000-01-01), `now`, and a number (a Julian day, or Unix
 * seconds with the `unixepoch` modifier). An instant is kept as SQLite keeps it, as a whole number
 * of milliseconds (here from 1970-01-01 UTC), read once at compile time for a value the filter
 * holds and by the same grammar in SQL for a text column. Only the years 0001-9999 are instants
 * (SQLite also reads years 0000 and before, which Postgres and the record format do not).
 */
import { rawSql, sql, bindValue, type SqlFragment } from '../sql-fragment.js';

/** 0001-01-01 00:00:00.000 UTC and 9999-12-31 23:59:59.999 UTC, in milliseconds from 1970. */
export const MIN_TIME_MS = -62135596800000;
export const MAX_TIME_MS = 253402300799999;
/** Milliseconds in a day. */
export const DAY_MS = 86_400_000;
/** Julian day 2440587.5 (1970-01-01 00:00 UTC) in milliseconds: SQLite's time origin against ours. */
export const JULIAN_EPOCH_MS = 210_866_760_000_000;
/** SQLite's Julian day numbers: 0 up to (not including) 5373484.5 (the end of 9999). */
const MAX_JULIAN_DAY = 5373484.5;
/** SQLite's Unix seconds for `auto`: -4713-11-24 12:00:00 to 9999-12-31 23:59:59. */
const MIN_AUTO_UNIX = -210866760000;
const MAX_AUTO_UNIX = 253402300799;

/** A time value read at compile time: its instant (null: none in 0001-9999), and the number it was written as, if it was one. */
export interface TimeValue {
  readonly ms: number | null;
  readonly raw: number | null;
}

/** SQLite's `DDDDDDDDDD`: a whole string that is a number (sqlite3AtoF), spaces around allowed. */
const NUMBER_TEXT = /^[ \t\n\v\f\r]*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[ \t\n\v\f\r]*$/;
/** The date and time forms; groups as in TIME_VALUE_SQL_PATTERN. */
const DATE_TIME_TEXT =
  /^(?:(-?)(\d{4})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[ \t\n\v\f\rT]*)?(?:([01]\d|2[0-4]):([0-5]\d)(?::([0-5]\d)(?:\.(\d+))?)?[ \t\n\v\f\r]*(?:([zZ])|([-+])(0\d|1[0-4]):([0-5]\d))?[ \t\n\v\f\r]*)?$/;

/**
 * Reads a time value's text as SQLite does: `'now'`, or its instant and number (`ms` null when the
 * text names a moment outside 0001-9999), or undefined when SQLite would not read it as a time.
 */
export function parseTimeText(text: string): TimeValue | 'now' | undefined {
  if (text.toLowerCase() === 'now') return 'now';
  const m = DATE_TIME_TEXT.exec(text);
  if (m && (m[2] !== undefined || m[5] !== undefined)) {
    const [, negative, y = '2000', mo = '1', d = '1', h = '0', mi = '0', s = '0', fraction, , tzSign, tzH = '0', tzM = '0'] = m;
    if (negative === '-' || Number(y) < 1) return { ms: null, raw: null };
    const start = new Date(0);
    start.setUTCFullYear(Number(y), Number(mo) - 1, 1);
    const seconds = Number(s) + (fraction === undefined ? 0 : Number(`0.${fraction.slice(0, 20)}`));
    const offset = tzSign === undefined ? 0 : (tzSign === '-' ? -1 : 1) * (Number(tzH) * 60 + Number(tzM)) * 60_000;
    const ms = start.getTime() + (Number(d) - 1) * DAY_MS + Number(h) * 3_600_000 + Number(mi) * 60_000 + Math.floor(seconds * 1000 + 0.5) - offset;
    return { ms: inRange(ms), raw: null };
  }
  if (NUMBER_TEXT.test(text)) return readTimeNumber(Number(text.trim()));
  return undefined;
}

/** A number as a time value: a Julian day (the instant when in SQLite's range), and the number itself. */
export function readTimeNumber(raw: number): TimeValue {
  return { ms: raw >= 0 && raw < MAX_JULIAN_DAY ? inRange(Math.floor(raw * DAY_MS + 0.5) - JULIAN_EPOCH_MS) : null, raw };
}

function inRange(ms: number): number | null {
  return Number.isFinite(ms) && ms >= MIN_TIME_MS && ms <= MAX_TIME_MS ? ms : null;
}

// ----- the same in SQL ---------------------------------------------------------------------------

/** DATE_TIME_TEXT for Postgres (its regular expressions read `\d` and `\s` too, but say them plainly). */
const TIME_VALUE_SQL_PATTERN =
  '^(?:(-?)([0-9]{4})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[[:space:]T]*)?(?:([01][0-9]|2[0-4]):([0-5][0-9])(?::([0-5][0-9])(?:[.]([0-9]+))?)?[[:space:]]*(?:([zZ])|([-+])(0[0-9]|1[0-4]):([0-5][0-9]))?[[:space:]]*)?$';
/** NUMBER_TEXT for Postgres, the exponent kept to three digits so that the cast to numeric cannot fail. */
const NUMBER_SQL_PATTERN = '^[[:space:]]*[-+]?(?:[0-9]+[.]?[0-9]*|[.][0-9]+)(?:[eE][-+]?[0-9]{1,3})?[[:space:]]*$';

/** A time value in SQL: its instant in milliseconds (double precision, NULL when none), and the number it was written as (NULL when not one). */
export interface TimeSql {
  readonly ms: SqlFragment;
  /** Undefined when the value can never be a number (a date column, a date written in the filter). */
  readonly raw?: SqlFragment;
}

/** Fresh subquery aliases from the surrounding compilation. */
export type NextAlias = () => string;

/**
 * `body` over `value` read once: a column or a bound value is used as is, anything else (a path's
 * subquery, an earlier step) is selected once in a subquery, so that SQL referring to a value
 * several times never repeats, or recomputes, a long expression.
 */
export function withValue(value: SqlFragment, nextAlias: NextAlias, body: (ref: SqlFragment) => SqlFragment): SqlFragment {
  if (/^(?:"[A-Za-z0-9_]+"\.)?"[A-Za-z0-9_]+"$|^\?::[a-z ]+$/.test(value.sql)) return body(value);
  const alias = `"${nextAlias()}"`;
  return sql`(SELECT ${body(rawSql(`${alias}."v"`))} FROM ${oneRowTable(sql`${value} AS "v"`, alias)})`;
}

/**
 * A derived table of one row that names values once: `(SELECT <columns> OFFSET 0) AS <alias>`.
 * `OFFSET 0` keeps Postgres from pulling the subquery up into the query that reads it. Pulled up,
 * every reference to one of its columns is replaced by the column's whole expression, so steps
 * nested n deep that each read their input several times would plan in time exponential in n, and
 * a backend that is planning hardly ever looks at a cancel or a statement timeout. With the
 * fence, the SQL and its planning grow linearly with the steps.
 */
export function oneRowTable(columns: SqlFragment, alias: string): SqlFragment {
  return sql`(SELECT ${columns} OFFSET 0) AS ${rawSql(alias)}`;
}

/** A time value known at compile time, bound. `now` may be a DeferredValue (lib/query/deferred-value.ts). */
export function bindTimeValue(value: TimeValue): TimeSql {
  return { ms: bindValue(value.ms, 'double precision'), raw: value.raw === null ? undefined : bindValue(value.raw, 'double precision') };
}

/** The instant of a date column (timestamptz), to the millisecond. */
export function timeOfDateColumn(column: SqlFragment): TimeSql {
  return { ms: sql`round(CAST(extract(epoch FROM ${column}) * 1000 AS double precision))` };
}

/** A number column as a time value: a Julian day unless a modifier says otherwise. */
export function timeOfNumberColumn(column: SqlFragment, nextAlias: NextAlias): TimeSql {
  return { ms: withValue(column, nextAlias, julianDaySql), raw: column };
}

/**
 * A text column as a time value, read per row by SQLite's grammar: `now` (the filter's instant),
 * a date and time, or a number. Text that is none of them is NULL, never an error.
 */
export function timeOfTextColumn(column: SqlFragment, options: { nextAlias: NextAlias; now: SqlFragment }): TimeSql {
  const raw = withValue(column, options.nextAlias, (x) => sql`CASE WHEN ${x} ~ ${bindValue(NUMBER_SQL_PATTERN, 'text')} THEN CAST(LEAST(GREATEST(CAST(${x} AS numeric), -1e300), 1e300) AS double precision) END`);
  const alias = `"${options.nextAlias()}"`;
  const part = (n: number) => rawSql(`${alias}."p"[${n}]`);
  const int = (n: number, fallback: number) => sql`COALESCE(CAST(${part(n)} AS integer), ${rawSql(String(fallback))})`;
  const x = rawSql(`${alias}."x"`);
  const days = sql`(make_date(GREATEST(${int(2, 2000)}, 1), ${int(3, 1)}, 1) - DATE '1970-01-01') + ${int(4, 1)} - 1`;
  const seconds = sql`${int(7, 0)} + COALESCE(CAST('0.' || substr(${part(8)}, 1, 20) AS double precision), 0)`;
  const offset = sql`(CASE ${part(10)} WHEN '-' THEN -1 WHEN '+' THEN 1 ELSE 0 END) * (${int(11, 0)} * 60 + ${int(12, 0)}) * 60000`;
  const fromParts = sql`CAST(${days} AS double precision) * ${rawSql(String(DAY_MS))} + ${int(5, 0)} * 3600000 + ${int(6, 0)} * 60000 + floor((${seconds}) * 1000 + 0.5) - ${offset}`;
  const isDateOrTime = sql`${part(2)} IS NOT NULL OR ${part(5)} IS NOT NULL`;
  const dated = sql`CASE WHEN ${part(1)} = '-' OR ${int(2, 2000)} < 1 THEN NULL ELSE ${fromParts} END`;
  const read = sql`CASE WHEN lower(${x}) = 'now' THEN ${options.now} WHEN ${isDateOrTime} THEN ${dated} ELSE ${withValue(raw, options.nextAlias, julianDaySql)} END`;
  const parsed = sql`${column} AS "x", regexp_match(${column}, ${bindValue(TIME_VALUE_SQL_PATTERN, 'text')}) AS "p"`;
  return { ms: sql`(SELECT ${read} FROM ${oneRowTable(parsed, alias)})`, raw };
}

/** SQL: a number read as a Julian day, in milliseconds (NULL outside SQLite's Julian days). */
export function julianDaySql(raw: SqlFragment): SqlFragment {
  return sql`CASE WHEN ${raw} >= 0 AND ${raw} < ${rawSql(String(MAX_JULIAN_DAY))} THEN floor(${raw} * ${rawSql(String(DAY_MS))} + 0.5) - ${rawSql(String(JULIAN_EPOCH_MS))} END`;
}

/** SQL: a number read as Unix seconds, in milliseconds (NULL outside SQLite's range). */
export function unixSecondsSql(raw: SqlFragment): SqlFragment {
  const shifted = sql`${raw} * 1000 + ${rawSql(String(JULIAN_EPOCH_MS))}`;
  return sql`CASE WHEN ${shifted} >= 0 AND ${shifted} < ${rawSql(String(MAX_TIME_MS + 1 + JULIAN_EPOCH_MS))} THEN floor(${shifted} + 0.5) - ${rawSql(String(JULIAN_EPOCH_MS))} END`;
}

/** SQL: `auto`: a Julian day when it is one, else Unix seconds within SQLite's range, else NULL. */
export function autoNumberSql(raw: SqlFragment): SqlFragment {
  return sql`CASE WHEN ${raw} >= 0 AND ${raw} < ${rawSql(String(MAX_JULIAN_DAY))} THEN ${julianDaySql(raw)} WHEN ${raw} >= ${rawSql(String(MIN_AUTO_UNIX))} AND ${raw} <= ${rawSql(String(MAX_AUTO_UNIX))} THEN ${unixSecondsSql(raw)} END`;
}
