/** The `select` field type: one of `values` (`""` when empty), or a list of them with `maxSelect` > 1. */
import { SchemaError } from '../../errors.js';
import { describeListModifiers, listOf, sameInput, type JsonSchema } from '../field-schemas.js';
import { defineFieldType } from '../field-type-spec.js';
import { checkMaxSelect } from './check-limit.js';
import { constrainItems, describeListBehaviour, TOO_MANY_VALUES, type ListFieldDefinition } from './list-field.js';

/** A select field's declaration. */
export interface SelectFieldDefinition extends ListFieldDefinition {
  type: 'select';
  /** The allowed values. */
  values: string[];
}

/** The select type (docs/collections.md). */
export const selectField = defineFieldType<SelectFieldDefinition>({
  type: 'select',
  keys: ['values', 'maxSelect'],
  ...describeListBehaviour<SelectFieldDefinition>(TOO_MANY_VALUES),
  checkSettings(def, where) {
    if (!Array.isArray(def.values) || def.values.length === 0 || def.values.some((v) => typeof v !== 'string')) {
      throw new SchemaError(`${where}: a select field needs "values", a non-empty array of strings`);
    }
    checkMaxSelect(where, def.maxSelect);
  },
  constraints: (field) => constrainItems(field, { type: 'string', enum: [...field.definition.values] }, field.definition.maxSelect),
  describe(field) {
    const def = field.definition;
    const item: JsonSchema = { type: 'string', enum: [...def.values] };
    if (field.multiple) {
      return { ...sameInput({ type: 'array', items: item }, listOf(field, item, def.maxSelect)), ...describeListModifiers(field, item, item) };
    }
    const single: JsonSchema = field.required ? item : { type: 'string', enum: [...new Set([...def.values, ''])] };
    return sameInput(single, single);
  },
});
