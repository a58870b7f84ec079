/**
 * What select, relation and file fields share: `maxSelect` > 1 makes them multi-valued (a
 * de-duplicated list of strings, stored as a jsonb array), otherwise they hold one string; they
 * take the list modifiers (`f+`, `+f`, `f-`), a single-valued one as a list of at most one.
 */
import type { FieldError } from '../../errors.js';
import { coerceStringList, coerceText, readSingle, type CoerceResult } from '../coerce-value.js';
import type { JsonSchema } from '../field-schemas.js';
import type { FieldSchemaOf, FieldTypeSpec, TypedFieldDefinition } from '../field-type-spec.js';

/** A declaration with `maxSelect`. */
export interface ListFieldDefinition extends TypedFieldDefinition {
  /** More than 1 makes the field multi-valued (an array). Default 1. */
  maxSelect?: number;
}

/** Several values for a single select or relation. */
export const TOO_MANY_VALUES: FieldError = { code: 'validation_too_many_values', message: 'Select no more than 1.' };

/** Reads a list field's value: a string list when multi-valued, else one text value. */
function coerceListValue(field: { readonly multiple: boolean }, raw: unknown, tooMany: FieldError): CoerceResult {
  if (field.multiple) return coerceStringList(raw);
  return readSingle(raw, tooMany, coerceText);
}

/** The parts of a list type's spec that follow from being a list (spread into defineFieldType). */
export function describeListBehaviour<D extends ListFieldDefinition>(tooManyError: FieldError): Pick<FieldTypeSpec<D>, 'storage' | 'modifiers' | 'tooManyError' | 'isMultiple' | 'coerce'> {
  return {
    storage: 'text',
    modifiers: 'list',
    tooManyError,
    isMultiple: (def: D) => (def.maxSelect ?? 1) > 1,
    coerce: (field: FieldSchemaOf<D>, raw: unknown) => coerceListValue(field, raw, tooManyError),
  };
}

/** A constraint on one item, as a list of at most `maxSelect` of them when the field is multi-valued. */
export function constrainItems(field: { readonly multiple: boolean }, item: JsonSchema, maxSelect: number | undefined): JsonSchema {
  if (!field.multiple) return item;
  return { type: 'array', items: item, maxItems: maxSelect ?? 1 };
}
