/** The `json` field type: any JSON value, `null` when empty, at most `maxSize` bytes serialised. */
import { fail, succeed, type CoerceResult, type InputSource } from '../coerce-value.js';
import { sameInput } from '../field-schemas.js';
import { defineFieldType, withoutUnset, type FieldBase } from '../field-type-spec.js';
import { checkLimit } from './check-limit.js';

/** A json field's declaration. */
export interface JsonFieldDefinition extends FieldBase {
  type: 'json';
  /** Maximum size of the serialised JSON in bytes. Default (and 0, as PocketBase writes it) 1 MiB. */
  maxSize?: number;
}

/** Default limit for the serialised size of a JSON field (docs/collections.md: 1 MiB). */
export const DEFAULT_JSON_MAX_SIZE = 1024 * 1024;

/** Measures the serialised size of a JSON value; null when it cannot be serialised (cycles, BigInt). */
function measureJson(value: unknown): number | null {
  try {
    const text = JSON.stringify(value);
    return text === undefined ? 0 : Buffer.byteLength(text, 'utf8');
  } catch {
    return null;
  }
}

/** Reads a JSON value: from multipart a string is JSON text to parse, from a JSON body it is the value itself. */
function coerceJson(def: JsonFieldDefinition, raw: unknown, source: InputSource): CoerceResult {
  let value: unknown = raw === undefined ? null : raw;
  if (source === 'multipart' && typeof value === 'string') {
    if (value.trim() === '') return succeed(null);
    try {
      value = JSON.parse(value) as unknown;
    } catch {
      return fail('validation_invalid_json', 'Must be valid JSON.');
    }
  }
  const size = measureJson(value);
  if (size === null) return fail('validation_invalid_json', 'Must be valid JSON.');
  const maxSize = def.maxSize ?? DEFAULT_JSON_MAX_SIZE;
  if (size > maxSize) {
    return fail('validation_json_size_limit', `The maximum allowed JSON size is ${maxSize} bytes.`);
  }
  return succeed(value);
}

/** The json type (docs/collections.md). A list is a value here, so nothing is unwrapped. */
export const jsonField = defineFieldType<JsonFieldDefinition>({
  type: 'json',
  keys: ['maxSize'],
  storage: 'json',
  checkSettings: (def, where) => checkLimit(where, { name: 'maxSize', value: def.maxSize, integer: true }),
  normalize: (def) => withoutUnset(def, ['maxSize']),
  coerce: (field, raw, source) => coerceJson(field.definition, raw, source),
  describe({ definition: def }) {
    const size = def.maxSize !== undefined ? ` At most ${def.maxSize} bytes serialised.` : '';
    return sameInput({ description: 'Any JSON value; null when empty.' }, { description: `Any JSON value.${size}` });
  },
});
