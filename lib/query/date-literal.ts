/**
 * Date literals in filters. Users write dates as the record format shows them
 * (`2024-05-01 10:00:00.000Z`), as ISO 8601 with any offset, or as a prefix (`2024-05`), and the
 * pocketbase SDK's pb.filter() writes Dates in the record format; all of them must mean one
 * instant so that they can be bound as timestamptz.
 */

import { isRecordYear } from '../schema/record-date.js';

const DATE_LITERAL =
  /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:[T ](\d{2})(?::(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?)?)?)?\s*(Z|[+-]\d{2}(?::?\d{2})?)?$/i;

/**
 * Parses a date literal to the instant it names, or undefined when it is not one. A prefix means
 * the start of that period in UTC; a missing offset means UTC. Like a record date, the literal
 * and the instant it names (after its offset) must lie in the years 0001-9999: Postgres has no
 * year 0 and the record format no five-digit years, so anything else would fail in the database.
 */
export function parseDateLiteral(text: string): Date | undefined {
  const m = DATE_LITERAL.exec(text.trim());
  if (!m) return undefined;
  const [, y, mo = '01', d = '01', h = '00', mi = '00', s = '00', frac = '', zone] = m;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const hour = Number(h);
  const minute = Number(mi);
  const second = Number(s);
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return undefined;
  const ms = frac === '' ? 0 : Number(frac.padEnd(3, '0').slice(0, 3));
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, ms);
  if (date.getUTCDate() !== day) return undefined; // 2024-02-30 and friends
  let offsetMinutes = 0;
  if (zone && zone.toUpperCase() !== 'Z') {
    const sign = zone.startsWith('-') ? -1 : 1;
    const digits = zone.slice(1).replace(':', '');
    const oh = Number(digits.slice(0, 2));
    const om = digits.length > 2 ? Number(digits.slice(2, 4)) : 0;
    if (oh > 23 || om > 59) return undefined;
    offsetMinutes = sign * (oh * 60 + om);
  }
  const result = new Date(date.getTime() - offsetMinutes * 60_000);
  if (Number.isNaN(result.getTime()) || !isRecordYear(year) || !isRecordYear(result.getUTCFullYear())) return undefined;
  return result;
}
