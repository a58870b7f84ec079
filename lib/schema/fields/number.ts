/** The `number` field type: a double, `null` when empty, with optional bounds; takes `f+` and `f-`. */
import type { FieldError } from '../../errors.js';
import { fail, readNumber, readSingle, succeed, type CoerceResult } from '../coerce-value.js';
import { sameInput, type JsonSchema } from '../field-schemas.js';
import { defineFieldType, type FieldBase } from '../field-type-spec.js';
import { checkLimit } from './check-limit.js';

/** A number field's declaration. */
export interface NumberFieldDefinition extends FieldBase {
  type: 'number';
  min?: number;
  max?: number;
  /** Refuse non-integers with `validation_not_integer`. */
  onlyInt?: boolean;
}

/** A value that is not a finite number (also the result of a modifier that overflows). */
export const NOT_A_NUMBER: FieldError = { code: 'validation_invalid_number', message: 'Must be a valid number.' };

/** Reads a number value: `""`, null and whitespace are the empty value. */
function coerceNumber(raw: unknown): CoerceResult {
  if (raw === null || raw === undefined || (typeof raw === 'string' && raw.trim() === '')) return succeed(null);
  const n = readNumber(raw);
  return n === undefined ? fail(NOT_A_NUMBER.code, NOT_A_NUMBER.message) : succeed(n);
}

/**
 * Reads the operand of a number modifier (`views+: 1`). Unlike a plain value, an empty operand is
 * not a way to clear the field, so it is refused.
 */
export function coerceNumberOperand(raw: unknown): CoerceResult {
  const single = Array.isArray(raw) && raw.length === 1 ? raw[0] : raw;
  const result = coerceNumber(single);
  if (result.ok && result.value === null) return fail(NOT_A_NUMBER.code, NOT_A_NUMBER.message);
  return result;
}

/** The number type (docs/collections.md). */
export const numberField = defineFieldType<NumberFieldDefinition>({
  type: 'number',
  keys: ['min', 'max', 'onlyInt'],
  storage: 'number',
  modifiers: 'number',
  tooManyError: NOT_A_NUMBER,
  checkSettings(def, where) {
    checkLimit(where, { name: 'min', value: def.min, integer: false });
    checkLimit(where, { name: 'max', value: def.max, integer: false });
  },
  coerce: (_field, raw) => readSingle(raw, NOT_A_NUMBER, coerceNumber),
  constraints({ definition: def }) {
    const schema: JsonSchema = { type: def.onlyInt === true ? 'integer' : 'number' };
    if (def.min !== undefined) schema.minimum = def.min;
    if (def.max !== undefined) schema.maximum = def.max;
    return schema;
  },
  describe(field) {
    const def = field.definition;
    const type = def.onlyInt === true ? 'integer' : 'number';
    const nullable = field.required ? type : [type, 'null'];
    const input: JsonSchema = { type: nullable };
    if (def.min !== undefined) input.minimum = def.min;
    if (def.max !== undefined) input.maximum = def.max;
    const operand: JsonSchema = { type: 'number' };
    const modifiers = [
      { key: `${field.name}+`, schema: { ...operand, description: `Adds to ${field.name}.` } },
      { key: `${field.name}-`, schema: { ...operand, description: `Subtracts from ${field.name}.` } },
    ];
    return { ...sameInput({ type: nullable }, input), updateModifiers: modifiers, updateFormModifiers: modifiers };
  },
});
