/** The `date` field type: a record-format date (`YYYY-MM-DD hh:mm:ss.mmmZ`, UTC), `null` when empty, optionally bounded. */
import { SchemaError, type FieldError } from '../../errors.js';
import { fail, readSingle, succeed, type CoerceResult } from '../coerce-value.js';
import { sameInput, type JsonSchema } from '../field-schemas.js';
import { defineFieldType, withoutUnset, type FieldBase } from '../field-type-spec.js';
import { formatRecordDate, parseDateInput, RECORD_DATE_PATTERN } from '../record-date.js';

/** A date field's declaration. */
export interface DateFieldDefinition extends FieldBase {
  type: 'date';
  /** The earliest value allowed, in any form a date field accepts; `""` (PocketBase's "unset") is none. */
  min?: string;
  /** The latest value allowed, likewise. */
  max?: string;
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

/** A bound as the record format, which orders as text; undefined when unset. */
function readBound(value: string | undefined): string | undefined {
  return value === undefined ? undefined : (parseDateInput(value) ?? undefined);
}

/** Refuses a bound that is not a date, and bounds that exclude every date. */
function checkDateSettings(def: DateFieldDefinition, where: string): void {
  const bounds: Record<string, string | undefined> = {};
  for (const key of ['min', 'max'] as const) {
    const value = def[key];
    if (value === undefined || value === null || value === '') continue;
    const parsed = typeof value === 'string' ? parseDateInput(value.trim()) : null;
    if (parsed === null) throw new SchemaError(`${where}: ${key} must be a date ("2024-05-01 10:00:00.000Z", ISO 8601 or "2024-05-01")`);
    bounds[key] = parsed;
  }
  if (bounds.min !== undefined && bounds.max !== undefined && bounds.min > bounds.max) throw new SchemaError(`${where}: min is after max`);
}

/** The date type (docs/collections.md). */
export const dateField = defineFieldType<DateFieldDefinition>({
  type: 'date',
  keys: ['min', 'max'],
  storage: 'date',
  tooManyError: NOT_A_DATE,
  checkSettings: checkDateSettings,
  normalize(def) {
    const out = withoutUnset(def, ['min', 'max']);
    // The bounds in the record format, so that checks and descriptions compare and quote one form.
    if (out.min !== undefined) out.min = readBound(out.min.trim());
    if (out.max !== undefined) out.max = readBound(out.max.trim());
    return out;
  },
  coerce: (_field, raw) => readSingle(raw, NOT_A_DATE, coerceDate),
  /** Record-format dates order as text (fixed width, UTC, years 0001-9999). Codes as PocketBase's validator gives them. */
  checkValue({ definition: def }, value) {
    if (typeof value !== 'string') return null;
    if (def.min !== undefined && value < def.min) return { code: 'validation_min_greater_equal_than_required', message: `Must be no less than ${def.min}.` };
    if (def.max !== undefined && value > def.max) return { code: 'validation_max_less_equal_than_required', message: `Must be no greater than ${def.max}.` };
    return null;
  },
  describe(field) {
    const def = field.definition;
    const type = field.required ? 'string' : ['string', 'null'];
    const record = { type, pattern: RECORD_DATE_PATTERN, description: 'YYYY-MM-DD hh:mm:ss.mmmZ (UTC)' + (field.required ? '.' : ', or null when empty.') };
    const range = [def.min !== undefined ? ` Not before ${def.min}.` : '', def.max !== undefined ? ` Not after ${def.max}.` : ''].join('');
    const input: JsonSchema = { type, description: DATE_INPUT_DESCRIPTION + range };
    return sameInput(record, input);
  },
});
