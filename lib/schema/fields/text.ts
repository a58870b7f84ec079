/**
 * The `text` field type: a string, `""` when empty, with optional length bounds, a pattern, and
 * a pattern the server generates a value from when a create leaves it empty (PocketBase's
 * `autogeneratePattern`).
 */
import { SchemaError } from '../../errors.js';
import { memoizePerObject } from '../../memoize-per-object.js';
import { coerceText, readSingle } from '../coerce-value.js';
import { compileRandomPattern, RandomPatternError, type RandomPattern } from '../compile-random-pattern.js';
import { sameInput, type JsonSchema } from '../field-schemas.js';
import { defineFieldType, SINGLE_VALUE_ONLY, withoutUnset, type FieldBase } from '../field-type-spec.js';
import { checkLimit } from './check-limit.js';

/** A text field's declaration. */
export interface TextFieldDefinition extends FieldBase {
  type: 'text';
  /** Minimum length in characters (checked when the value is not empty). */
  min?: number;
  /** Maximum length in characters; 0 (as PocketBase writes "unset") is no maximum. */
  max?: number;
  /** A regular expression the value must match (when not empty). */
  pattern?: string;
  /**
   * A regular expression the server generates a value from when a create leaves the field empty
   * (`[a-z0-9]{15}`); the value must then pass min, max and pattern like any other.
   */
  autogeneratePattern?: string;
  /** PocketBase's exports mark its `id` field so and write `false` on every other text field: only `false` is accepted (the id is recordbase's own). */
  primaryKey?: boolean;
}

/** How many generated samples the settings check tries against min, max and pattern (PocketBase's number). */
const SAMPLES_CHECKED = 10;

/** The compiled autogeneratePattern of a (normalised) declaration, compiled once. */
const generatorOf = memoizePerObject((def: TextFieldDefinition): RandomPattern => compileRandomPattern(def.autogeneratePattern ?? ''));

/** A pattern as validation compiles it: unicode mode where the pattern allows it (lib/records/validate-record.ts). */
function compileCheck(pattern: string): RegExp {
  try {
    return new RegExp(pattern, 'u');
  } catch {
    return new RegExp(pattern);
  }
}

/** Whether a generated value passes the field's own bounds and pattern, as validation would check it. */
function passesSettings(def: TextFieldDefinition, value: string, pattern: RegExp | undefined): boolean {
  const length = [...value].length;
  if (value === '') return true;
  if (def.min !== undefined && length < def.min) return false;
  if (def.max && length > def.max) return false;
  return pattern === undefined || pattern.test(value);
}

/**
 * Checks the autogeneratePattern: one the generator cannot use, or whose values the field would
 * refuse (tried on a few samples, as PocketBase does), stops the start rather than every create.
 */
function checkAutogenerate(def: TextFieldDefinition, where: string): void {
  const source = def.autogeneratePattern;
  if (source === undefined || source === null || source === '') return;
  if (typeof source !== 'string') throw new SchemaError(`${where}: autogeneratePattern must be a string`);
  let generator: RandomPattern;
  try {
    generator = compileRandomPattern(source);
  } catch (err) {
    if (err instanceof RandomPatternError) throw new SchemaError(`${where}: autogeneratePattern cannot generate values: ${err.message}`);
    throw err;
  }
  const pattern = def.pattern ? compileCheck(def.pattern) : undefined;
  for (let i = 0; i < SAMPLES_CHECKED; i++) {
    const value = generator.generate();
    if (!passesSettings(def, value, pattern)) {
      throw new SchemaError(`${where}: autogeneratePattern could produce values the field refuses (min, max or pattern), such as ${JSON.stringify(value.slice(0, 60))}`);
    }
  }
}

/**
 * PocketBase's `name:autogenerate` modifier, on create and update alike: the prefix sent (already
 * read as text) followed by a value generated from the field's autogeneratePattern; without a
 * pattern, the prefix alone. The result is then validated like any value (max, pattern), so a
 * prefix that makes it too long is the field's 422.
 */
export function autogenerateText(field: { readonly definition: unknown }, prefix: string): string {
  const def = field.definition as TextFieldDefinition;
  return def.autogeneratePattern === undefined ? prefix : prefix + generatorOf(def).generate();
}

/** What a body may send: a non-empty value within the bounds, or also `""` when the field is not required. */
function describeInput(def: TextFieldDefinition, required: boolean): JsonSchema {
  const input: JsonSchema = { type: 'string' };
  if (required) {
    input.minLength = Math.max(def.min ?? 1, 1);
    if (def.max !== undefined) input.maxLength = def.max;
    if (def.pattern) input.pattern = def.pattern;
    return input;
  }
  if (def.max !== undefined) input.maxLength = def.max;
  const nonEmpty: JsonSchema = {};
  if (def.min !== undefined && def.min > 0) nonEmpty.minLength = def.min;
  if (def.pattern) nonEmpty.pattern = def.pattern;
  if (Object.keys(nonEmpty).length > 0) input.anyOf = [{ const: '' }, nonEmpty];
  return input;
}

/** The text type (docs/collections.md). */
export const textField = defineFieldType<TextFieldDefinition>({
  type: 'text',
  keys: ['min', 'max', 'pattern', 'autogeneratePattern', 'primaryKey'],
  storage: 'text',
  checkSettings(def, where) {
    checkLimit(where, { name: 'min', value: def.min, integer: true });
    checkLimit(where, { name: 'max', value: def.max, integer: true });
    if (def.pattern !== undefined && def.pattern !== null) {
      if (typeof def.pattern !== 'string') throw new SchemaError(`${where}: pattern must be a string`);
      try {
        new RegExp(def.pattern);
      } catch {
        throw new SchemaError(`${where}: pattern is not a valid regular expression`);
      }
    }
    checkAutogenerate(def, where);
    if (def.primaryKey !== undefined && def.primaryKey !== false) {
      throw new SchemaError(`${where}: primaryKey is only for the field named id (docs/collections.md, "The id field"); another field cannot be the record's key`);
    }
  },
  normalize: (def) => withoutUnset(def, ['min', 'max', 'pattern', 'autogeneratePattern']),
  coerce(_field, raw) {
    return readSingle(raw, SINGLE_VALUE_ONLY, coerceText);
  },
  constraints({ definition: def }) {
    const schema: JsonSchema = { type: 'string' };
    if (def.min !== undefined) schema.minLength = def.min;
    if (def.max !== undefined) schema.maxLength = def.max;
    if (def.pattern !== undefined) schema.pattern = def.pattern;
    return schema;
  },
  /** PocketBase generates on create only, and only where the value is empty: a client may still choose it. */
  fill(field, value, context) {
    const def = field.definition;
    if (!context.creating || def.autogeneratePattern === undefined || value !== '') return value;
    return generatorOf(def).generate();
  },
  describe(field) {
    const def = field.definition;
    const input = describeInput(def, field.required);
    if (def.autogeneratePattern === undefined) return sameInput({ type: 'string' }, input);
    const create = { ...describeInput(def, false), description: `Generated by the server from the pattern ${def.autogeneratePattern} when empty or not sent.` };
    return { ...sameInput({ type: 'string' }, input), create, createForm: create, filledOnCreate: true };
  },
});
