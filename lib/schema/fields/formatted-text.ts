/**
 * What email and url share: a text value (`""` when empty) that must satisfy an ajv format when
 * not empty, with the type's own wording when it does not.
 */
import type { FieldError } from '../../errors.js';
import { coerceText, readSingle } from '../coerce-value.js';
import { SINGLE_VALUE_ONLY, type FieldTypeSpec, type TypedFieldDefinition } from '../field-type-spec.js';

/** The parts of a formatted text type's spec (spread into defineFieldType). */
export function describeFormattedText<D extends TypedFieldDefinition>(options: {
  /** The ajv format's name. */
  format: string;
  /** Whether a non-empty value has the format. */
  test: (value: string) => boolean;
  /** What a value without the format answers. */
  error: FieldError;
}): Pick<FieldTypeSpec<D>, 'storage' | 'formats' | 'messages' | 'coerce' | 'constraints'> {
  return {
    storage: 'text',
    formats: { [options.format]: options.test },
    messages: { format: () => ({ ...options.error }) },
    coerce: (_field, raw) => readSingle(raw, SINGLE_VALUE_ONLY, coerceText),
    constraints: () => ({ type: 'string', format: options.format }),
  };
}
