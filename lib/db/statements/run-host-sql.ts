import { hasRecordDateShape } from '../../schema/record-date.js';
import type { Statement, StatementResult } from './run-statement.js';
import type { StatementRunner } from './statement-runner.js';

/**
 * The host's own SQL of a migration (`m.sql`, docs/collections.md), sent through recordbase's
 * send path on the migration's transaction. It keeps what `m.sql` has always answered, when Knex's
 * `raw` sent it: the rows of the statement (of the last one, in a text of several), read as
 * node-postgres reads them by default, so a timestamptz is a Date (the send path reads a UTC one as
 * record-format text: it is turned back here); values as `?` bindings, a `\\?` a question mark.
 */
export async function runHostSql(trx: StatementRunner, text: string, bindings?: readonly unknown[]): Promise<Record<string, unknown>[]> {
  const answer: StatementResult | StatementResult[] = await trx.query(bindHostSql(text, bindings));
  const last = Array.isArray(answer) ? answer.at(-1) : answer;
  if (last === undefined || !Array.isArray(last.rows)) return [];
  return withDriverDates(last);
}

/**
 * The statement of `text` and its bindings, refused before anything is sent where they do not
 * match, as Knex's `raw` refused them: a count other than the placeholders' (`Expected 2 bindings,
 * saw 1`), or an undefined value (null is SQL NULL). Without bindings the text goes as it is (a
 * `?` in it is then a parameter the database finds no value for). Knex's `??` (an identifier
 * binding, quoted by the host's Knex) is refused: write the quoted name in the text.
 */
export function bindHostSql(text: string, bindings: readonly unknown[] | undefined): Statement {
  if (bindings === undefined) return { sql: text, bindings: [] };
  const values = [...bindings];
  let placeholders = 0;
  // Knex's own reading of a raw text: `\?` stays a question mark, `??` an identifier, any other match a value.
  for (const match of text.matchAll(/\\?\?\??/g)) {
    if (match[0] === '\\?') continue;
    if (match[0] === '??') throw new TypeError(`m.sql takes values as ? bindings, not identifiers as ??: write the quoted name in the text (${text})`);
    placeholders++;
  }
  if (placeholders !== values.length) throw new Error(`Expected ${values.length} bindings, saw ${placeholders}`);
  const undefinedAt = values.flatMap((value, index) => (containsUndefined(value) ? [index] : []));
  if (undefinedAt.length > 0) throw new Error(`Undefined binding(s) detected for keys [${undefinedAt.join(',')}] when compiling RAW query: ${text}`);
  // Knex wrote a `\??` match as one placeholder, dropping its backslash; the send path would read it as `\?` then `?`.
  return { sql: text.replace(/\\\?\?/g, '?'), bindings: values };
}

/** Whether `value` is undefined, or an array or plain object holding one (what Knex's raw refused). */
function containsUndefined(value: unknown): boolean {
  if (value === undefined) return true;
  if (Array.isArray(value)) return value.some(containsUndefined);
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) return Object.values(value).some(containsUndefined);
  return false;
}

const TIMESTAMPTZ_OID = 1184;

/** The rows of `result` with each timestamptz column a Date, as node-postgres's own parser gives it. */
function withDriverDates(result: StatementResult): Record<string, unknown>[] {
  const fields = (result as { fields?: readonly { name: string; dataTypeID: number }[] }).fields ?? [];
  // A name given twice is the last column of that name in a row object: its type is that column's.
  const dated = [...new Map(fields.map((field) => [field.name, field.dataTypeID === TIMESTAMPTZ_OID])).entries()].filter(([, isDate]) => isDate).map(([name]) => name);
  if (dated.length === 0) return result.rows.slice();
  return result.rows.map((row) => {
    const copy = { ...row };
    for (const name of dated) copy[name] = timestamptzAsDate(copy[name]);
    return copy;
  });
}

/**
 * A timestamptz as the send path read it, as a Date: its record-format text (UTC) read as ISO
 * 8601 (the same instant, to the millisecond, as the Date node-postgres makes of it), any other
 * value as it came (a Date already, or null).
 */
export function timestamptzAsDate(value: unknown): unknown {
  if (typeof value !== 'string' || !hasRecordDateShape(value)) return value;
  return new Date(`${value.slice(0, 10)}T${value.slice(11)}`);
}
