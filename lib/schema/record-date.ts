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

/**
 * Writes a Date in the record format (UTC, millisecond precision). Throws RangeError for an
 * invalid Date or a year the four-digit format cannot hold, because silently writing a wrong
 * string would corrupt sorting and filtering. Within 0001-9999 `toISOString` writes exactly
 * `YYYY-MM-DDThh:mm:ss.mmmZ`; only its `T` differs (every date of every row read goes through
 * here, so it is the native formatter rather than seven padded numbers).
 */
export function formatRecordDate(d: Date): string {
  const ms = d.getTime();
  if (Number.isNaN(ms)) throw new RangeError('Invalid date');
  const year = d.getUTCFullYear();
  if (!isRecordYear(year)) throw new RangeError(`Year ${year} is outside 0001-9999`);
  const iso = d.toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11)}`;
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
