/**
 * The JSON Schemas (OpenAPI 3.1 dialect) of one declared field, as its type describes itself
 * (`describe` in lib/schema/fields/): how it reads in a record, and what a create or update may
 * send for it, as JSON and as multipart. The OpenAPI document is built from these, and the
 * TypeScript declarations are rendered from the document, so each field's shape is written once.
 */
import type { FieldSchema } from '../schema/collection-schema.js';
import type { FieldSchemas } from '../schema/field-schemas.js';
import { fieldTypeOf } from '../schema/field-types.js';

export type { FieldSchemas, JsonSchema, ModifierSchema } from '../schema/field-schemas.js';
export { RECORD_DATE_PATTERN } from '../schema/record-date.js';
export { RECORD_ID_PATTERN } from '../schema/record-id.js';

/** The schemas of one declared field. System fields (id, created, updated) are the document's own. */
export function describeFieldSchemas(field: FieldSchema): FieldSchemas {
  if (field.system) throw new Error(`recordbase: field "${field.name}" has no definition (system fields are described by the document)`);
  return fieldTypeOf(field).describe(field);
}
