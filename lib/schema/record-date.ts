/**
 * Dates in the record format `YYYY-MM-DD hh:mm:ss.mmmZ` (docs/collections.md). Records
 * carry dates as strings in this one format everywhere in memory, so comparisons, filters and
 * responses never have to care about time zones or Date objects.
 */

/**
 * The years a record date may have. Above 9999 the four-digit format cannot write them; below 1
 * Postgres cannot store them as written (it has no year 0: ISO year 0 is its 1 BC, and `0000-...`
 * is out of range), so they would reach the database and fail there as a 500.
 */
export const MIN_RECORD_YEAR = 1;
/** See MIN_RECORD_YEAR. */
export const MAX_RECORD_YEAR = 9999;

/** The record format as a JSON Schema pattern (`created`, `updated` and date fields in the OpenAPI document). */
export const RECORD_DATE_PATTERN = '^\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z$';

/**
 * Accepted input: a date, optionally followed by a time (`T`, `t` or a space as separator,
 * seconds and fractions optional) and an offset (`Z`, `+hh:mm`, `+hhmm`, `+hh`). Without an
 * offset the time is read as UTC, as PocketBase does. Every part is fixed-width or a single
 * unambiguous run, so matching is linear even on hostile input.
 */
const DATE_INPUT =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)?)?$/;

/** Longest input worth matching: `YYYY-MM-DDThh:mm:ss.nnnnnnnnn+hh:mm` is 35 characters. */
const MAX_INPUT_LENGTH = 40;

/** Whether a (UTC) year fits the record format and the database: 0001 to 9999. */
export function isRecordYear(year: number): boolean {
  return year >= MIN_RECORD_YEAR && year <= MAX_RECORD_YEAR;
}

/** `00`..`99` and `000`..`999`, so that formatting a date pads nothing. */
const TWO_DIGITS = Array.from({ length: 100 }, (_, i) => String(i).padStart(2, '0'));
const THREE_DIGITS = Array.from({ length: 1000 }, (_, i) => String(i).padStart(3, '0'));
const DAY_MS = 86_400_000;
/** The first and last instants of MIN_RECORD_YEAR and MAX_RECORD_YEAR (UTC): what the record format can write. */
const MIN_RECORD_MS = new Date(0).setUTCFullYear(MIN_RECORD_YEAR, 0, 1);
const MAX_RECORD_MS = new Date(0).setUTCFullYear(MAX_RECORD_YEAR + 1, 0, 1) - 1;

/**
 * Writes a Date in the record format (UTC, millisecond precision). Throws RangeError for an invalid
 * Date or a year the four-digit format cannot hold, because silently writing a wrong string would
 * corrupt sorting and filtering. Every date of every row read goes through here, so the fields are
 * computed from the time value (days to a civil date as in Howard Hinnant's `civil_from_days`)
 * instead of seven Date getters and padded numbers, which cost more per date;
 * spec/unit/schema/record-date-format.test.ts holds the two equal over 0001-9999.
 */
export function formatRecordDate(d: Date): string {
  const ms = d.getTime();
  if (Number.isNaN(ms)) throw new RangeError('Invalid date');
  if (ms < MIN_RECORD_MS || ms > MAX_RECORD_MS) throw new RangeError(`Year ${d.getUTCFullYear()} is outside 0001-9999`);
  const days = Math.floor(ms / DAY_MS);
  let rest = ms - days * DAY_MS;
  const millis = rest % 1000;
  rest = (rest - millis) / 1000;
  const seconds = rest % 60;
  rest = (rest - seconds) / 60;
  const minutes = rest % 60;
  const hours = (rest - minutes) / 60;
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const dayOfEra = z - era * 146_097;
  const yearOfEra = Math.floor((dayOfEra - Math.floor(dayOfEra / 1460) + Math.floor(dayOfEra / 36_524) - Math.floor(dayOfEra / 146_096)) / 365);
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const shiftedMonth = Math.floor((5 * dayOfYear + 2) / 153);
  const day = dayOfYear - Math.floor((153 * shiftedMonth + 2) / 5) + 1;
  const month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9;
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0);
  const yearText = year >= 1000 ? String(year) : String(year).padStart(4, '0');
  return `${yearText}-${TWO_DIGITS[month]}-${TWO_DIGITS[day]} ${TWO_DIGITS[hours]}:${TWO_DIGITS[minutes]}:${TWO_DIGITS[seconds]}.${THREE_DIGITS[millis]}Z`;
}

/**
 * Postgres's text for a timestamptz in UTC, as it sends it with the default DateStyle (ISO) when
 * the offset is zero: `YYYY-MM-DD hh:mm:ss`, up to six fraction digits, `+00`.
 */
function isUtcPostgresTimestamp(text: string): boolean {
  const n = text.length;
  if (n < 22 || n > 29 || text.charCodeAt(n - 3) !== 43 /* + */ || text.charCodeAt(n - 2) !== 48 || text.charCodeAt(n - 1) !== 48) return false;
  if (!startsWithDateTime(text)) return false;
  if (n === 22) return true;
  return n > 23 && text.charCodeAt(19) === 46 /* . */ && allDigits(text, 20, n - 3);
}

/** `YYYY-MM-DD hh:mm:ss` at the start of `text`. */
function startsWithDateTime(text: string): boolean {
  for (let i = 0; i < 19; i++) {
    const c = text.charCodeAt(i);
    const expected = i === 4 || i === 7 ? 45 /* - */ : i === 10 ? 32 /* space */ : i === 13 || i === 16 ? 58 /* : */ : -1;
    if (expected === -1 ? c < 48 || c > 57 : c !== expected) return false;
  }
  return true;
}

function allDigits(text: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

/**
 * The record format of a timestamptz as Postgres sent it, straight from its text when it is in
 * UTC (the fraction truncated to milliseconds, as a Date would); otherwise undefined, and the
 * caller parses it the usual way (another session time zone or DateStyle, a BC date).
 */
export function recordDateFromPostgresText(text: string): string | undefined {
  if (!isUtcPostgresTimestamp(text)) return undefined;
  const fraction = text.length === 22 ? '' : text.slice(20, text.length - 3);
  return `${text.slice(0, 19)}.${(fraction + '000').slice(0, 3)}Z`;
}

/** Whether `text` has the record format's exact shape (`YYYY-MM-DD hh:mm:ss.mmmZ`). */
export function hasRecordDateShape(text: string): boolean {
  return text.length === 24 && text.charCodeAt(23) === 90 /* Z */ && text.charCodeAt(19) === 46 /* . */ && startsWithDateTime(text) && allDigits(text, 20, 23);
}

/** Reads the time zone offset of a match in minutes east of UTC (0 when absent or `Z`). */
function readOffsetMinutes(sign: string | undefined, hours: string | undefined, minutes: string | undefined): number | null {
  if (sign === undefined || hours === undefined) return 0;
  const h = Number(hours);
  const m = minutes === undefined ? 0 : Number(minutes);
  if (h > 23 || m > 59) return null;
  return (sign === '-' ? -1 : 1) * (h * 60 + m);
}

/**
 * Reads a client's date into the record format, or returns null when it is not a date.
 * Accepts the record format itself, ISO 8601 / RFC 3339 with any offset (converted to UTC) and a
 * bare date (midnight UTC). Calendar-impossible dates (`2024-02-30`, `25:00`) are refused rather
 * than rolled over, so a typo never becomes a different valid date.
 */
export function parseDateInput(v: string): string | null {
  if (typeof v !== 'string' || v.length > MAX_INPUT_LENGTH) return null;
  const m = DATE_INPUT.exec(v);
  if (!m) return null;
  const [, y, mo, da, hh, mi, ss, frac, , sign, offH, offM] = m;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(da);
  const hour = hh === undefined ? 0 : Number(hh);
  const minute = mi === undefined ? 0 : Number(mi);
  const second = ss === undefined ? 0 : Number(ss);
  const millis = frac === undefined ? 0 : Number(frac.slice(0, 3).padEnd(3, '0'));
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return null;
  const offset = readOffsetMinutes(sign, offH, offM);
  if (offset === null) return null;
  // setUTCFullYear, unlike Date.UTC, does not map years 0-99 to 1900-1999.
  const d = new Date(0);
  d.setUTCFullYear(year, month - 1, day);
  d.setUTCHours(hour, minute, second, millis);
  if (d.getUTCDate() !== day || d.getUTCMonth() !== month - 1) return null;
  const utc = new Date(d.getTime() - offset * 60_000);
  if (!isRecordYear(year) || !isRecordYear(utc.getUTCFullYear())) return null;
  return formatRecordDate(utc);
}
