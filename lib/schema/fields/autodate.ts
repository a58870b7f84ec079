/**
 * The `autodate` field type (PocketBase's `core/field_autodate.go`): a date the server sets,
 * to the write's instant, on create (`onCreate`), on update (`onUpdate`) or both; `null` until
 * then. A client never writes it: a value sent for it is ignored, as PocketBase ignores it, in
 * JSON, multipart, modifiers, batch and the server API alike; a before-hook's value is replaced
 * too. `created` and `updated`, which every record has, are autodate fields of the database's own.
 */
import { SchemaError } from '../../errors.js';
import { readSingle, succeed, type CoerceResult } from '../coerce-value.js';
import { serverOnly } from '../field-schemas.js';
import { defineFieldType, type FieldBase } from '../field-type-spec.js';
import { formatRecordDate, parseDateInput, RECORD_DATE_PATTERN } from '../record-date.js';

/** An autodate field's declaration: at least one of onCreate and onUpdate. */
export interface AutodateFieldDefinition extends FieldBase {
  type: 'autodate';
  /** Set to the write's instant when the record is created. */
  onCreate?: boolean;
  /** Set to the write's instant whenever the record is updated. */
  onUpdate?: boolean;
}

/** Reads a stored value (the record format); anything else reads as empty, as PocketBase's parse ignores it. */
function readStored(raw: unknown): CoerceResult {
  if (typeof raw === 'string') return succeed(parseDateInput(raw.trim()));
  if (raw instanceof Date && !Number.isNaN(raw.getTime())) return succeed(formatRecordDate(raw));
  return succeed(null);
}

/** The autodate type (docs/collections.md). */
export const autodateField = defineFieldType<AutodateFieldDefinition>({
  type: 'autodate',
  keys: ['onCreate', 'onUpdate'],
  storage: 'date',
  serverOnly: true,
  checkSettings(def, where) {
    for (const key of ['onCreate', 'onUpdate'] as const) {
      if (def[key] !== undefined && typeof def[key] !== 'boolean') throw new SchemaError(`${where}: ${key} must be true or false`);
    }
    if (def.onCreate !== true && def.onUpdate !== true) throw new SchemaError(`${where}: an autodate field needs onCreate or onUpdate (or both)`);
    if (def.required === true) throw new SchemaError(`${where}: an autodate field is set by the server; required does not apply`);
  },
  coerce: (_field, raw) => readSingle(raw, { code: 'validation_invalid_date', message: 'Must be a valid date.' }, readStored),
  fill({ definition: def }, _value, context) {
    if (context.creating ? def.onCreate === true : def.onUpdate === true) return formatRecordDate(context.now);
    return context.creating ? null : context.previous;
  },
  describe({ definition: def }) {
    const when = def.onCreate === true && def.onUpdate === true ? 'on create and on every update' : def.onCreate === true ? 'on create' : 'on every update (null until the first)';
    return serverOnly({ type: ['string', 'null'], pattern: RECORD_DATE_PATTERN, readOnly: true, description: `YYYY-MM-DD hh:mm:ss.mmmZ (UTC), set by the server ${when}.` });
  },
});
