/**
 * The JSON Schemas (OpenAPI 3.1 dialect) of one declared field, as its type describes itself
 * (`describe` in lib/schema/fields/): how it reads in a record, and what a create or update may
 * send for it, as JSON and as multipart. The OpenAPI document is built from these, and the
 * TypeScript declarations are rendered from the document, so each field's shape is written once.
 */
import type { FieldSchema } from '../schema/collection-schema.js';
import type { FieldSchemas, JsonSchema } from '../schema/field-schemas.js';
import { fieldTypeOf } from '../schema/field-types.js';

export type { FieldSchemas, JsonSchema, ModifierSchema } from '../schema/field-schemas.js';
export { RECORD_DATE_PATTERN } from '../schema/record-date.js';

/** The schemas of one declared field, with its `help` and `presentable` hints. System fields (id, created, updated) are the document's own. */
export function describeFieldSchemas(field: FieldSchema): FieldSchemas {
  if (field.system) throw new Error(`recordbase: field "${field.name}" has no definition (system fields are described by the document)`);
  const schemas = fieldTypeOf(field).describe(field);
  const { help, presentable } = field.definition;
  if ((help === undefined || help === '') && presentable !== true) return schemas;
  const annotate = (schema: JsonSchema | undefined): JsonSchema | undefined => {
    if (schema === undefined) return undefined;
    const out: JsonSchema = { ...schema };
    // The field's own help comes first; what the type says of its values follows it.
    if (help !== undefined && help !== '') out.description = typeof schema.description === 'string' ? `${help} ${schema.description}` : help;
    if (presentable === true) out['x-recordbase-presentable'] = true;
    return out;
  };
  return {
    ...schemas,
    record: annotate(schemas.record)!,
    create: annotate(schemas.create),
    update: annotate(schemas.update),
    createForm: annotate(schemas.createForm),
    updateForm: annotate(schemas.updateForm),
  };
}
