/** The `bool` field type: `false` when empty; a required bool must be true (PocketBase's rule). */
import { fail, readBool, readSingle, succeed, type CoerceResult } from '../coerce-value.js';
import { sameInput, type JsonSchema } from '../field-schemas.js';
import { defineFieldType, SINGLE_VALUE_ONLY, type FieldBase } from '../field-type-spec.js';

/** A bool field's declaration. */
export interface BoolFieldDefinition extends FieldBase {
  type: 'bool';
}

/** Reads a boolean; null is false (an unticked form field sends nothing). */
function coerceBool(raw: unknown): CoerceResult {
  if (raw === null || raw === undefined) return succeed(false);
  const b = readBool(raw);
  return b === undefined ? fail('validation_invalid_value', 'Must be a boolean.') : succeed(b);
}

/** The bool type (docs/collections.md). */
export const boolField = defineFieldType<BoolFieldDefinition>({
  type: 'bool',
  storage: 'bool',
  coerce: (_field, raw) => readSingle(raw, SINGLE_VALUE_ONLY, coerceBool),
  describe(field) {
    const input: JsonSchema = field.required ? { type: 'boolean', const: true } : { type: 'boolean' };
    return sameInput({ type: 'boolean' }, input);
  },
});
