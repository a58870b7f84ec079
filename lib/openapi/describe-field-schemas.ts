/**
 * The JSON Schemas (OpenAPI 3.1 dialect) of one declared field, as its type describes itself
 * (`describe` in lib/schema/fields/): how it reads in a record, and what a create or update may
 * send for it, as JSON and as multipart. The OpenAPI document is built from these, and the
 * TypeScript declarations are rendered from the document, so each field's shape is written once.
 */
import type { FieldSchema } from '../schema/collection-schema.js';
import type { FieldSchemas, JsonSchema, ModifierSchema } from '../schema/field-schemas.js';
import type { FieldRuleAction } from '../schema/field-type-spec.js';
import { fieldTypeOf } from '../schema/field-types.js';

export type { FieldSchemas, JsonSchema, ModifierSchema } from '../schema/field-schemas.js';
export { RECORD_DATE_PATTERN } from '../schema/record-date.js';

/**
 * What a field's own rule (DESIGN 24) means for a caller, said after what the type says. As for
 * a collection's rules, the expression itself stays private; undefined where the rule restricts no one.
 */
function describeFieldRule(field: FieldSchema, action: FieldRuleAction): string | undefined {
  const rule = field.rules?.[action];
  if (rule === undefined) return undefined;
  if (action === 'view') {
    if (rule === null) return 'Superusers only: absent for everyone else, as a hidden field is.';
    return "Absent where the field's view rule refuses the caller (superusers always see it), as a hidden field is.";
  }
  if (rule === null) return 'Set by superusers only: sending it otherwise answers 403.';
  return `Set only where the field's ${action} rule admits the caller (superusers always): sending it otherwise answers 403.`;
}

/** The schemas of one declared field, with its `help` and `presentable` hints and what its own rules mean. System fields (id, created, updated) are the document's own. */
export function describeFieldSchemas(field: FieldSchema): FieldSchemas {
  if (field.system) throw new Error(`recordbase: field "${field.name}" has no definition (system fields are described by the document)`);
  const schemas = fieldTypeOf(field).describe(field);
  const { help, presentable } = field.definition;
  if ((help === undefined || help === '') && presentable !== true && field.rules === undefined) return schemas;
  const annotate = (schema: JsonSchema | undefined, action: FieldRuleAction): JsonSchema | undefined => {
    if (schema === undefined) return undefined;
    const out: JsonSchema = { ...schema };
    // The field's own help comes first; what the type says of its values follows it, then what its rule says of callers.
    const description = [help, schema.description, describeFieldRule(field, action)].filter((text) => typeof text === 'string' && text !== '');
    if (description.length > 0) out.description = description.join(' ');
    if (presentable === true) out['x-recordbase-presentable'] = true;
    return out;
  };
  const annotateModifiers = (modifiers: readonly ModifierSchema[]): ModifierSchema[] =>
    modifiers.map((modifier) => ({ ...modifier, schema: annotate(modifier.schema, 'update')! }));
  return {
    ...schemas,
    record: annotate(schemas.record, 'view')!,
    create: annotate(schemas.create, 'create'),
    update: annotate(schemas.update, 'update'),
    createForm: annotate(schemas.createForm, 'create'),
    updateForm: annotate(schemas.updateForm, 'update'),
    updateModifiers: annotateModifiers(schemas.updateModifiers),
    updateFormModifiers: annotateModifiers(schemas.updateFormModifiers),
  };
}
