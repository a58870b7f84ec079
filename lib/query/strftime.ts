/**
 * PocketBase's `strftime(format, time, modifiers...)`, which is SQLite's
 * (https://sqlite.org/lang_datefunc.html), translated to Postgres. The time value is an instant
 * in whole milliseconds (lib/query/time-values.ts); each modifier is one step over it, and the
 * format one expression of its parts. As in PocketBase, a value that is not a time, or a step that
 * leaves the years SQLite reads, gives `""`, never NULL and never an error; a format letter or a
 * modifier SQLite does not know is refused here, at its position, instead of giving `""` on
 * every row. Every user value (a shift, a weekday, a piece of the format) is a bound parameter.
 */
import { createFilterError, quoteForMessage } from './filter-error.js';
import { bindValue, joinSql, rawSql, sql, type SqlFragment } from '../sql-fragment.js';
import {
  autoNumberSql,
  DAY_MS,
  JULIAN_EPOCH_MS,
  MAX_TIME_MS,
  MIN_TIME_MS,
  oneRowTable,
  unixSecondsSql,
  withValue,
  type NextAlias,
  type TimeSql,
} from './time-values.js';

/** Longest format accepted, in characters. */
export const MAX_STRFTIME_FORMAT = 100;
/** Longest modifier accepted, in characters (the longest SQLite reads, `+YYYY-MM-DD HH:MM:SS.SSS`, is about 30). */
export const MAX_STRFTIME_MODIFIER = 50;

/** A text argument of the call, with its position for errors. */
export interface StrftimeText {
  readonly text: string;
  readonly pos: number;
}

/** What compileStrftime reads. */
export interface StrftimeOptions {
  readonly format: StrftimeText;
  readonly time: TimeSql;
  readonly modifiers: readonly StrftimeText[];
  readonly nextAlias: NextAlias;
}

/** One modifier, read: a step over the instant. */
type Step =
  | { readonly kind: 'shift'; readonly ms: number }
  | { readonly kind: 'months'; readonly months: number; readonly thenMs: number }
  | { readonly kind: 'startOf'; readonly unit: 'day' | 'month' | 'year' }
  | { readonly kind: 'weekday'; readonly day: number }
  | { readonly kind: 'number'; readonly as: 'unixepoch' | 'julianday' | 'auto' }
  | { readonly kind: 'subsec' }
  | { readonly kind: 'none' };

/**
 * `strftime(format, time, modifiers...)` as a text expression: `""` where SQLite gives NULL. Throws
 * `invalid_filter` at the position of a format or modifier it cannot read.
 */
export function compileStrftime(options: StrftimeOptions): SqlFragment {
  const pieces = readFormat(options.format);
  const steps = options.modifiers.map((modifier, index) => readModifier(modifier, { first: index === 0 }));
  let ms = options.time.ms;
  let subsec = false;
  for (const [index, step] of steps.entries()) {
    if (step.kind === 'number') {
      if (options.time.raw === undefined) {
        if (step.as === 'auto') continue;
        throw createFilterError(`the modifier ${quoteForMessage(step.as)} reads a number time value, and this time value is a date`, options.modifiers[index]!.pos);
      }
      ms = readNumberAs(step.as, { raw: options.time.raw, ms, nextAlias: options.nextAlias });
    } else if (step.kind === 'subsec') subsec = true;
    else ms = applyStep(step, ms, options.nextAlias);
  }
  return formatInstant({ pieces, ms, subsec, nextAlias: options.nextAlias });
}

/** A number time value as `unixepoch`, `julianday` or `auto` read it (only as the first modifier, as SQLite). */
function readNumberAs(as: 'unixepoch' | 'julianday' | 'auto', options: { raw: SqlFragment; ms: SqlFragment; nextAlias: NextAlias }): SqlFragment {
  const { raw, ms, nextAlias } = options;
  if (as === 'julianday') return sql`CASE WHEN ${raw} IS NOT NULL THEN ${ms} END`;
  if (as === 'unixepoch') return withValue(raw, nextAlias, unixSecondsSql);
  return withValue(raw, nextAlias, (r) => sql`CASE WHEN ${r} IS NULL THEN ${ms} ELSE ${autoNumberSql(r)} END`);
}

/** Whether a step of SQLite's works on the calendar (it then needs the instant within the years it reads). */
function applyStep(step: Step, ms: SqlFragment, nextAlias: NextAlias): SqlFragment {
  switch (step.kind) {
    case 'shift':
      // Plain arithmetic, never checked in between: SQLite checks the range only where it reads a calendar date.
      return sql`(${ms} + ${bindValue(step.ms, 'double precision')})`;
    case 'months':
      return onCalendar(ms, nextAlias, (v, t) => {
        // Months counted from year 0, and the target year and month, computed once below.
        const alias = `"${nextAlias()}"`;
        const [year, month] = [rawSql(`${alias}."y"`), rawSql(`${alias}."mo"`)];
        const total = sql`CAST(extract(year FROM ${t}) AS integer) * 12 + CAST(extract(month FROM ${t}) AS integer) - 1 + CAST(${bindValue(step.months, 'double precision')} AS integer)`;
        const target = sql`SELECT CAST(floor(("total") / 12.0) AS integer) AS "y", "total" - 12 * CAST(floor(("total") / 12.0) AS integer) + 1 AS "mo" FROM ${oneRowTable(sql`${total} AS "total"`, '"months"')} OFFSET 0`;
        // The first of the target month plus the days and time into the month: 01-31 plus one month
        // is 02-31, which runs on into March, as SQLite computes it.
        const firstOfMonth = sql`CAST(make_date(LEAST(GREATEST(${year}, 1), 9999), ${month}, 1) - DATE '1970-01-01' AS double precision) * ${rawSql(String(DAY_MS))}`;
        const moved = sql`(SELECT CASE WHEN ${year} BETWEEN 1 AND 9999 THEN ${firstOfMonth} + (${v} - ${epochMs(sql`date_trunc('month', ${t})`)}) END FROM (${target}) AS ${rawSql(alias)})`;
        return step.thenMs === 0 ? moved : sql`${moved} + ${bindValue(step.thenMs, 'double precision')}`;
      });
    case 'startOf':
      return onCalendar(ms, nextAlias, (_v, t) => epochMs(sql`date_trunc(${rawSql(`'${step.unit}'`)}, ${t})`));
    case 'weekday': {
      const day = bindValue(step.day, 'double precision');
      return onCalendar(ms, nextAlias, (v, t) => sql`${v} + CAST((CAST(${day} AS integer) + 7 - CAST(extract(dow FROM ${t}) AS integer)) % 7 AS double precision) * ${rawSql(String(DAY_MS))}`);
    }
    default:
      return ms;
  }
}

/**
 * A step that reads the calendar date of `ms`: NULL outside 0001-9999 (where SQLite's is an
 * error), otherwise `body` over the instant (`v`) and its UTC timestamp (`t`).
 */
function onCalendar(ms: SqlFragment, nextAlias: NextAlias, body: (v: SqlFragment, t: SqlFragment) => SqlFragment): SqlFragment {
  return withInstant(ms, nextAlias, (v, t) => sql`CASE WHEN ${inRangeSql(v)} THEN ${body(v, t)} END`);
}

/** `body` over the instant `v` and its timestamp `t`, each computed once in a subquery. */
function withInstant(ms: SqlFragment, nextAlias: NextAlias, body: (v: SqlFragment, t: SqlFragment) => SqlFragment): SqlFragment {
  return withValue(ms, nextAlias, (value) => {
    const alias = `"${nextAlias()}"`;
    const [v, t] = [rawSql(`${alias}."v"`), rawSql(`${alias}."t"`)];
    return sql`(SELECT ${body(v, t)} FROM ${oneRowTable(sql`${value} AS "v", ${toTimestamp(value)} AS "t"`, alias)})`;
  });
}

function inRangeSql(v: SqlFragment): SqlFragment {
  return sql`${v} BETWEEN ${rawSql(String(MIN_TIME_MS))} AND ${rawSql(String(MAX_TIME_MS))}`;
}

/**
 * The UTC timestamp (without time zone) of `v`, through whole days and the seconds into the day so
 * that no millisecond is lost to floating point. Clamped to the range first: Postgres may fold a
 * branch of a CASE it never takes, and must not fail on it.
 */
function toTimestamp(v: SqlFragment): SqlFragment {
  const clamped = sql`LEAST(GREATEST(${v}, ${rawSql(String(MIN_TIME_MS))}), ${rawSql(String(MAX_TIME_MS))})`;
  const days = sql`floor(${clamped} / ${rawSql(String(DAY_MS))})`;
  return sql`(TIMESTAMP '1970-01-01 00:00:00' + make_interval(days => CAST(${days} AS integer), secs => (${clamped} - ${days} * ${rawSql(String(DAY_MS))}) / 1000.0))`;
}

/** Milliseconds from 1970 of a timestamp without time zone (read as UTC). */
function epochMs(timestamp: SqlFragment): SqlFragment {
  return sql`round(CAST(extract(epoch FROM ${timestamp}) * 1000 AS double precision))`;
}

// ----- modifiers ---------------------------------------------------------------------------------

/** SQLite's `NNN units`: milliseconds per unit, and the limit on NNN (its aXformType table). */
const UNITS: Record<string, { ms: number; limit: number }> = {
  second: { ms: 1000, limit: 4.6427e14 },
  minute: { ms: 60_000, limit: 7.7379e12 },
  hour: { ms: 3_600_000, limit: 1.2897e11 },
  day: { ms: DAY_MS, limit: 5373485 },
  month: { ms: 30 * DAY_MS, limit: 176546 },
  year: { ms: 365 * DAY_MS, limit: 14713 },
};
const SPACE = '[ \\t\\n\\v\\f\\r]';
const NUMBER = '[-+]?(?:\\d+\\.?\\d*|\\.\\d+)(?:[eE][-+]?\\d+)?';
/** SQLite reads `NNN units` only when it starts with a sign or a digit, and the unit ends the text. */
const AMOUNT = new RegExp(`^((?:[-+](?:\\d+\\.?\\d*|\\.\\d+)|\\d+\\.?\\d*)(?:[eE][-+]?\\d+)?)${SPACE}+([a-z]+)$`);
const TIME_SHIFT = new RegExp(`^([-+])?(\\d{2}):(\\d{2})(?::(\\d{2})(?:\\.(\\d+))?)?${SPACE}*$`);
const DATE_SHIFT = new RegExp(`^([-+])(\\d{4,5})-(\\d{2})-(\\d{2})(?:${SPACE}+(\\d{2}:\\d{2}(?::\\d{2}(?:\\.\\d+)?)?))?${SPACE}*$`);
const WEEKDAY = new RegExp(`^weekday ${SPACE}*(${NUMBER})${SPACE}*$`);

/** Reads one modifier as SQLite's parseModifier does (names in any case), or throws at its position. */
function readModifier(modifier: StrftimeText, options: { first: boolean }): Step {
  const { text, pos } = modifier;
  const refuse = (why: string) => createFilterError(`strftime() modifier ${quoteForMessage(text)} ${why}`, pos);
  if (text.length > MAX_STRFTIME_MODIFIER) throw createFilterError(`strftime() modifier too long (${text.length} characters; at most ${MAX_STRFTIME_MODIFIER})`, pos);
  const lower = text.toLowerCase();
  if (lower === 'unixepoch' || lower === 'julianday' || lower === 'auto') {
    if (!options.first) throw refuse('must come right after the time value');
    return { kind: 'number', as: lower };
  }
  if (lower === 'subsec' || lower === 'subsecond') return { kind: 'subsec' };
  if (lower === 'utc') return { kind: 'none' }; // every instant here is UTC already
  if (lower === 'localtime') throw refuse('is not supported: recordbase keeps every time in UTC and has no local time zone');
  if (lower === 'start of day' || lower === 'start of month' || lower === 'start of year') return { kind: 'startOf', unit: lower.slice(9) as 'day' | 'month' | 'year' };
  const weekday = WEEKDAY.exec(lower);
  if (weekday) {
    const day = Number(weekday[1]);
    if (!Number.isInteger(day) || day < 0 || day > 6) throw refuse('needs a whole weekday number from 0 (Sunday) to 6');
    return { kind: 'weekday', day };
  }
  const amount = AMOUNT.exec(lower);
  if (amount) return readAmount({ value: Number(amount[1]), unit: amount[2]!, refuse });
  const time = TIME_SHIFT.exec(lower);
  if (time) {
    const ms = readClock(lower.replace(/^[-+]/, ''), refuse);
    return { kind: 'shift', ms: time[1] === '-' ? -ms : ms };
  }
  const date = DATE_SHIFT.exec(lower);
  if (date) {
    // ±YYYY-MM-DD[ HH:MM[:SS[.SSS]]]: years and months on the calendar, then the days and the time.
    const [, sign, y, m, d, clock] = date;
    if (Number(m) > 11 || Number(d) > 30) throw refuse('is not a valid shift: its months must be 00-11 and its days 00-30');
    const direction = sign === '-' ? -1 : 1;
    const time = clock === undefined ? 0 : readClock(clock, refuse);
    return { kind: 'months', months: direction * (Number(y) * 12 + Number(m)), thenMs: direction * (Number(d) * DAY_MS + time) };
  }
  throw refuse('is not one SQLite knows (see docs/query-language.md, "strftime")');
}

/** `HH:MM[:SS[.SSS]]` in milliseconds: hours up to 24, minutes and seconds up to 59 (SQLite's parseHhMmSs). */
function readClock(clock: string, refuse: (why: string) => Error): number {
  const [h = '0', m = '0', s = '0'] = clock.trim().split(':');
  const seconds = Number(s);
  if (Number(h) > 24 || Number(m) > 59 || !(seconds < 60)) throw refuse('is not a valid HH:MM:SS shift');
  return Number(h) * 3_600_000 + Number(m) * 60_000 + Math.floor(seconds * 1000 + 0.5);
}

/** `NNN units`: a shift of milliseconds, or for months and years whole calendar months and the fraction as days (30 or 365 a unit, as SQLite). */
function readAmount(options: { value: number; unit: string; refuse: (why: string) => Error }): Step | never {
  const { value, refuse } = options;
  const name = options.unit.endsWith('s') ? options.unit.slice(0, -1) : options.unit;
  const unit = Object.hasOwn(UNITS, name) ? UNITS[name] : undefined;
  if (!unit) throw refuse(`has an unknown unit (seconds, minutes, hours, days, months or years)`);
  if (!(value > -unit.limit && value < unit.limit)) throw refuse(`is out of range (SQLite reads at most ${unit.limit} ${name}s)`);
  if (name !== 'month' && name !== 'year') return { kind: 'shift', ms: roundAway(value * unit.ms) };
  // As SQLite: the whole months (or years) on the calendar, the fraction as 30 (or 365) days each.
  const whole = Math.trunc(value);
  return { kind: 'months', months: name === 'year' ? whole * 12 : whole, thenMs: roundAway((value - whole) * unit.ms) };
}

/** SQLite's rounding of a shift to whole milliseconds: half away from zero. */
function roundAway(ms: number): number {
  return ms < 0 ? -Math.floor(-ms + 0.5) : Math.floor(ms + 0.5);
}

// ----- the format --------------------------------------------------------------------------------

/** A piece of the format: text as written, or a conversion letter. */
type Piece = { readonly text: string } | { readonly letter: string };

/** Reads the format into literal text and letters; an unknown letter or a lone `%` at the end is a 400 at its position. */
function readFormat(format: StrftimeText): Piece[] {
  const { text, pos } = format;
  if (text.length > MAX_STRFTIME_FORMAT) throw createFilterError(`strftime() format too long (${text.length} characters; at most ${MAX_STRFTIME_FORMAT})`, pos);
  const pieces: Piece[] = [];
  let literal = '';
  for (let i = 0; i < text.length; i++) {
    if (text[i] !== '%') {
      literal += text[i];
      continue;
    }
    const letter = text[++i];
    if (letter === '%') {
      literal += '%';
      continue;
    }
    if (letter === undefined || !Object.hasOwn(LETTERS, letter)) {
      throw createFilterError(`strftime() format has ${letter === undefined ? 'a lone "%" at its end' : `the unknown conversion "%${letter}"`} (see docs/query-language.md, "strftime")`, pos);
    }
    if (literal !== '') pieces.push({ text: literal });
    literal = '';
    pieces.push({ letter });
  }
  if (literal !== '') pieces.push({ text: literal });
  return pieces;
}

/** One letter over the timestamp `t` (UTC, without time zone) and the instant `m` (milliseconds), with `subsec` for `%s`. */
type Letter = (t: SqlFragment, m: SqlFragment, subsec: boolean) => SqlFragment;

const toChar = (pattern: string): Letter => (t) => sql`to_char(${t}, ${rawSql(`'${pattern}'`)})`;
const spacePadded = (pattern: string): Letter => (t) => sql`lpad(to_char(${t}, ${rawSql(`'${pattern}'`)}), 2)`;
/** `%U` and `%W`: SQLite's (day of the year, from 0, + 7 - weekday) / 7, the week starting on the weekday's 0. */
const weekOfYear =
  (weekday: (t: SqlFragment) => SqlFragment): Letter =>
  (t) =>
    sql`lpad(CAST(CAST(floor((extract(doy FROM ${t}) + 6 - ${weekday(t)}) / 7) AS integer) AS text), 2, '0')`;

/** SQLite's conversions (3.46: https://sqlite.org/lang_datefunc.html#strftime). */
const LETTERS: Record<string, Letter> = {
  d: toChar('DD'),
  e: spacePadded('FMDD'),
  f: toChar('SS.MS'),
  F: toChar('YYYY-MM-DD'),
  G: toChar('IYYY'),
  g: toChar('IY'),
  H: toChar('HH24'),
  I: toChar('HH12'),
  j: toChar('DDD'),
  // SQLite prints the double iJD / 86400000.0 to 16 significant digits (7 of them before the point in 0001-9999):
  // the same double here, through its shortest text, rounded to 9 decimals (always 9 places, so
  // always a point), trailing zeros dropped. No "?" in this SQL: Knex would read it as a binding.
  J: (_t, m) =>
    sql`rtrim(rtrim(CAST(round(CAST(CAST((${m} + ${rawSql(String(JULIAN_EPOCH_MS))}) / ${rawSql(`${DAY_MS}.0`)} AS text) AS numeric), 9) AS text), '0'), '.')`,
  k: spacePadded('FMHH24'),
  l: spacePadded('FMHH12'),
  m: toChar('MM'),
  M: toChar('MI'),
  p: toChar('AM'),
  P: toChar('am'),
  R: toChar('HH24:MI'),
  s: (_t, m, subsec) => (subsec ? sql`CAST(round(CAST(${m} AS numeric) / 1000, 3) AS text)` : sql`CAST(CAST(floor(${m} / 1000) AS bigint) AS text)`),
  S: toChar('SS'),
  T: toChar('HH24:MI:SS'),
  u: toChar('ID'),
  U: weekOfYear((t) => sql`extract(dow FROM ${t})`),
  V: toChar('IW'),
  w: (t) => sql`CAST(CAST(extract(dow FROM ${t}) AS integer) AS text)`,
  W: weekOfYear((t) => sql`(extract(isodow FROM ${t}) - 1)`),
  Y: toChar('YYYY'),
};

/** The formatted text of `ms`, `""` when it is NULL or outside 0001-9999; the instant is converted once. */
function formatInstant(options: { pieces: readonly Piece[]; ms: SqlFragment; subsec: boolean; nextAlias: NextAlias }): SqlFragment {
  const { pieces, subsec, nextAlias } = options;
  const formatted = onCalendar(options.ms, nextAlias, (v, t) => {
    const parts = pieces.map((piece) => ('text' in piece ? bindValue(piece.text, 'text') : LETTERS[piece.letter]!(t, v, subsec)));
    return parts.length === 0 ? rawSql("''") : joinSql(parts, ' || ');
  });
  return sql`COALESCE(${formatted}, '')`;
}
