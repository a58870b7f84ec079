/** The `relation` field type: the id of a record of `collection` (`""` for none), or a list of ids with `maxSelect` > 1. */
import { SchemaError } from '../../errors.js';
import { describeListModifiers, listOf, sameInput, type JsonSchema } from '../field-schemas.js';
import { defineFieldType, withoutUnset } from '../field-type-spec.js';
import { OPTIONAL_RECORD_ID_PATTERN, RECORD_ID_PATTERN, SAFE_RECORD_ID_PATTERN } from '../record-id.js';
import { checkLimit, checkMaxSelect } from './check-limit.js';
import { constrainItems, describeListBehaviour, TOO_MANY_VALUES, type ListFieldDefinition } from './list-field.js';

/** A relation field's declaration. */
export interface RelationFieldDefinition extends ListFieldDefinition {
  type: 'relation';
  /** Name of the target collection. */
  collection: string;
  /** Delete this record when the referenced record is deleted. */
  cascadeDelete?: boolean;
  /** At least this many ids when the field is not empty (`validation_not_enough_values`); an empty field is `required`'s business. */
  minSelect?: number;
}

/**
 * The relation type (docs/collections.md). Validation checks only that each id is safe (an unsafe
 * one cannot exist, hence the wording); the record service checks that they exist in the target,
 * so an id is held to the target's own settings (its `id` field). The OpenAPI document quotes the
 * default id pattern here and the target's own where it declares one (lib/openapi/).
 */
export const relationField = defineFieldType<RelationFieldDefinition>({
  type: 'relation',
  keys: ['collection', 'maxSelect', 'cascadeDelete', 'minSelect'],
  ...describeListBehaviour<RelationFieldDefinition>(TOO_MANY_VALUES),
  messages: { pattern: () => ({ code: 'validation_missing_rel_records', message: 'Failed to find all relation records with the provided ids.' }) },
  checkSettings(def, where) {
    if (typeof def.collection !== 'string' || def.collection === '') {
      throw new SchemaError(`${where}: a relation field needs "collection", the target collection's name`);
    }
    checkMaxSelect(where, def.maxSelect);
    checkLimit(where, { name: 'minSelect', value: def.minSelect, integer: true });
    // PocketBase's rule: maxSelect is at least minSelect (a single relation holds one id).
    if (typeof def.minSelect === 'number' && def.minSelect > Math.max(def.maxSelect ?? 1, 1)) {
      throw new SchemaError(`${where}: minSelect (${def.minSelect}) is more than maxSelect (${def.maxSelect ?? 1})`);
    }
  },
  normalize: (def) => withoutUnset(def, ['maxSelect', 'minSelect']),
  relationTarget: (def) => def.collection,
  constraints: (field) => constrainItems(field, { type: 'string', pattern: SAFE_RECORD_ID_PATTERN }, field.definition.maxSelect),
  checkValue({ definition: def }, value) {
    const count = Array.isArray(value) ? value.length : typeof value === 'string' && value !== '' ? 1 : 0;
    if (def.minSelect === undefined || count === 0 || count >= def.minSelect) return null;
    return { code: 'validation_not_enough_values', message: `Select at least ${def.minSelect}.` };
  },
  describe(field) {
    const def = field.definition;
    const target = `"${def.collection}"`;
    const id: JsonSchema = { type: 'string', pattern: RECORD_ID_PATTERN };
    const extension = { 'x-recordbase-relation': def.collection };
    if (field.multiple) {
      const record = { type: 'array', items: { type: 'string' }, description: `Ids of ${target} records.`, ...extension };
      const input: JsonSchema = { ...listOf(field, id, def.maxSelect), description: `Ids of ${target} records.`, ...extension };
      if (def.minSelect !== undefined && def.minSelect > 1) {
        if (field.required) input.minItems = def.minSelect;
        else input.anyOf = [{ maxItems: 0 }, { minItems: def.minSelect }];
        input.description = field.required ? `Ids of ${target} records: at least ${def.minSelect}.` : `Ids of ${target} records: none, or at least ${def.minSelect}.`;
      }
      return { ...sameInput(record, input), ...describeListModifiers(field, id, id) };
    }
    const description = field.required ? `Id of a ${target} record.` : `Id of a ${target} record, or "" for none.`;
    const record = { type: 'string', description, ...extension };
    const input = { type: 'string', pattern: field.required ? RECORD_ID_PATTERN : OPTIONAL_RECORD_ID_PATTERN, description, ...extension };
    return sameInput(record, input);
  },
});
