/** The `date` field type: a record-format date (`YYYY-MM-DD hh:mm:ss.mmmZ`, UTC), `null` when empty. */
import type { FieldError } from '../../errors.js';
import { fail, readSingle, succeed, type CoerceResult } from '../coerce-value.js';
import { sameInput } from '../field-schemas.js';
import { defineFieldType, type FieldBase } from '../field-type-spec.js';
import { formatRecordDate, parseDateInput, RECORD_DATE_PATTERN } from '../record-date.js';

/** A date field's declaration. */
export interface DateFieldDefinition extends FieldBase {
  type: 'date';
}

const NOT_A_DATE: FieldError = { code: 'validation_invalid_date', message: 'Must be a valid date.' };
/** What a date field accepts; the server checks the value itself. */
const DATE_INPUT_DESCRIPTION = 'A date: "2024-05-01 10:00:00.000Z" (the record format), ISO 8601 with any offset, or "2024-05-01" (midnight UTC).';

/** Reads a date in any accepted form (lib/schema/record-date.ts) into the record format. */
function coerceDate(raw: unknown): CoerceResult {
  if (raw === null || raw === undefined || raw === '') return succeed(null);
  if (typeof raw === 'string') {
    const s = raw.trim();
    if (s === '') return succeed(null);
    const parsed = parseDateInput(s);
    if (parsed !== null) return succeed(parsed);
  }
  if (raw instanceof Date) {
    try {
      return succeed(formatRecordDate(raw));
    } catch {
      // An invalid or out-of-range Date is an invalid date like any other.
    }
  }
  return fail(NOT_A_DATE.code, NOT_A_DATE.message);
}

/** The date type (docs/collections.md). */
export const dateField = defineFieldType<DateFieldDefinition>({
  type: 'date',
  storage: 'date',
  tooManyError: NOT_A_DATE,
  coerce: (_field, raw) => readSingle(raw, NOT_A_DATE, coerceDate),
  describe(field) {
    const type = field.required ? 'string' : ['string', 'null'];
    const record = { type, pattern: RECORD_DATE_PATTERN, description: 'YYYY-MM-DD hh:mm:ss.mmmZ (UTC)' + (field.required ? '.' : ', or null when empty.') };
    return sameInput(record, { type, description: DATE_INPUT_DESCRIPTION });
  },
});
