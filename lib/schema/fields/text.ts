/** The `text` field type: a string, `""` when empty, with optional length bounds and a pattern. */
import { SchemaError } from '../../errors.js';
import { coerceText, readSingle } from '../coerce-value.js';
import { sameInput, type JsonSchema } from '../field-schemas.js';
import { defineFieldType, SINGLE_VALUE_ONLY, type FieldBase } from '../field-type-spec.js';
import { checkLimit } from './check-limit.js';

/** A text field's declaration. */
export interface TextFieldDefinition extends FieldBase {
  type: 'text';
  /** Minimum length in characters (checked when the value is not empty). */
  min?: number;
  /** Maximum length in characters. */
  max?: number;
  /** A regular expression the value must match (when not empty). */
  pattern?: string;
}

/** The text type (docs/collections.md). */
export const textField = defineFieldType<TextFieldDefinition>({
  type: 'text',
  keys: ['min', 'max', 'pattern'],
  storage: 'text',
  checkSettings(def, where) {
    checkLimit(where, { name: 'min', value: def.min, integer: true });
    checkLimit(where, { name: 'max', value: def.max, integer: true });
    if (def.pattern === undefined) return;
    if (typeof def.pattern !== 'string') throw new SchemaError(`${where}: pattern must be a string`);
    try {
      new RegExp(def.pattern);
    } catch {
      throw new SchemaError(`${where}: pattern is not a valid regular expression`);
    }
  },
  coerce(_field, raw) {
    return readSingle(raw, SINGLE_VALUE_ONLY, coerceText);
  },
  constraints({ definition: def }) {
    const schema: JsonSchema = { type: 'string' };
    if (def.min !== undefined) schema.minLength = def.min;
    if (def.max !== undefined) schema.maxLength = def.max;
    if (def.pattern !== undefined && def.pattern !== '') schema.pattern = def.pattern;
    return schema;
  },
  describe(field) {
    const def = field.definition;
    const input: JsonSchema = { type: 'string' };
    if (field.required) {
      input.minLength = Math.max(def.min ?? 1, 1);
      if (def.max !== undefined) input.maxLength = def.max;
      if (def.pattern) input.pattern = def.pattern;
    } else {
      if (def.max !== undefined) input.maxLength = def.max;
      const nonEmpty: JsonSchema = {};
      if (def.min !== undefined && def.min > 0) nonEmpty.minLength = def.min;
      if (def.pattern) nonEmpty.pattern = def.pattern;
      if (Object.keys(nonEmpty).length > 0) input.anyOf = [{ const: '' }, nonEmpty];
    }
    return sameInput({ type: 'string' }, input);
  },
});
