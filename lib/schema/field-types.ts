/**
 * The field types, one line each (after PocketBase's `core.Fields`): everything that differs per
 * type lives in its module in lib/schema/fields/, and the types a declaration and a checked field
 * may have are derived from this list. Adding a type is a new module and a line here
 * (docs/contributing.md).
 */
import type { InputSource, CoerceResult } from './coerce-value.js';
import type { FieldSchemaOf, FieldTypeSpec, TypedFieldDefinition } from './field-type-spec.js';
import type { StorageKind } from './storage-kinds.js';
import { boolField } from './fields/bool.js';
import { dateField } from './fields/date.js';
import { emailField } from './fields/email.js';
import { fileField } from './fields/file.js';
import { jsonField } from './fields/json.js';
import { numberField } from './fields/number.js';
import { relationField } from './fields/relation.js';
import { selectField } from './fields/select.js';
import { textField } from './fields/text.js';
import { urlField } from './fields/url.js';
import { editorField } from './fields/editor.js';
import { autodateField } from './fields/autodate.js';
import { geoPointField } from './fields/geo-point.js';

/** Every field type, in the order error messages list them. */
export const FIELD_TYPES = [textField, numberField, boolField, emailField, urlField, dateField, selectField, jsonField, relationField, fileField, editorField, autodateField, geoPointField] as const;

/** The declaration a field type spec checks. */
type DefinitionOf<S> = S extends FieldTypeSpec<infer D> ? D : never;

/** One field of a collection, as a user declares it: the declaration of one of FIELD_TYPES. */
export type FieldDefinition = DefinitionOf<(typeof FIELD_TYPES)[number]>;

/** A checked declared field, discriminated on `type` (its `definition` is that type's declaration). */
export type DeclaredFieldSchema = FieldDefinition extends infer D ? (D extends TypedFieldDefinition ? FieldSchemaOf<D> : never) : never;

/** A field every record has (id, created, updated): no declaration, no field type. */
export interface SystemFieldSchema {
  readonly name: string;
  readonly type: 'id' | 'autodate';
  readonly column: string;
  readonly storage: StorageKind;
  readonly multiple: false;
  readonly hidden: false;
  readonly required: boolean;
  readonly system: true;
  readonly rules?: undefined;
  readonly relationTo?: undefined;
  readonly definition?: undefined;
}

/** A checked field: declared (narrow it on `type`) or system (`system: true`). `column` is always quoted in SQL. */
export type FieldSchema = DeclaredFieldSchema | SystemFieldSchema;

/** A field type's spec over any declaration: what code that handles every type calls. */
export type AnyFieldTypeSpec = FieldTypeSpec<FieldDefinition>;

const BY_TYPE: ReadonlyMap<string, AnyFieldTypeSpec> = new Map(FIELD_TYPES.map((spec: AnyFieldTypeSpec) => [spec.type, spec]));

/** The spec of a type name, or undefined for a name no type has (a declaration's typo). */
export function findFieldType(type: unknown): AnyFieldTypeSpec | undefined {
  return typeof type === 'string' ? BY_TYPE.get(type) : undefined;
}

/** The spec of a declared field's type. */
export function fieldTypeOf(field: DeclaredFieldSchema): AnyFieldTypeSpec {
  // Every declared field was checked against this registry when the schema was built.
  return BY_TYPE.get(field.type)!;
}

/**
 * The one coercion of a client's value for a declared field (lib/schema/coerce-value.ts): for
 * validation, for `@request.body` in rules, and for modifiers' current values alike.
 */
export function coerceFieldValue(field: DeclaredFieldSchema, raw: unknown, source: InputSource): CoerceResult {
  return fieldTypeOf(field).coerce(field, raw, source);
}

/** Every format any type's constraints name, for the one validator of a collection. */
export function collectFormats(): Record<string, (value: string) => boolean> {
  return Object.assign({}, ...FIELD_TYPES.map((spec: AnyFieldTypeSpec) => spec.formats)) as Record<string, (value: string) => boolean>;
}
