/**
 * The JSON Schemas (OpenAPI 3.1 dialect) a field type describes itself with: how a field reads in
 * a record, and what a create or update may send for it, as JSON and as multipart. Each type's
 * `describe` (lib/schema/fields/) builds them with the helpers here; lib/openapi/ assembles the
 * document from them and renders the TypeScript declarations from the document, so each field's
 * shape is written once. Input schemas describe what a client should send; the server is more
 * lenient (multipart strings such as `"12"` are coerced), see docs/records-api.md.
 */

/** A JSON Schema object (the OpenAPI 3.1 dialect of JSON Schema 2020-12). */
export type JsonSchema = { [keyword: string]: unknown };

/** A key an update may send besides the field's own name: `views+`, `+tags`, `tags-`. */
export interface ModifierSchema {
  readonly key: string;
  readonly schema: JsonSchema;
}

/** Everything the document needs about one field. */
export interface FieldSchemas {
  /** The value in a record (responses). */
  readonly record: JsonSchema;
  /** The value in a JSON create; undefined for file fields, which only multipart can upload. */
  readonly create: JsonSchema | undefined;
  /** The value in a JSON update. */
  readonly update: JsonSchema;
  /** The part in a multipart create. */
  readonly createForm: JsonSchema;
  /** The part in a multipart update. */
  readonly updateForm: JsonSchema;
  /** Modifier keys of a JSON update (number and multi-valued fields). */
  readonly updateModifiers: readonly ModifierSchema[];
  /** Modifier keys of a multipart update (files may be appended there). */
  readonly updateFormModifiers: readonly ModifierSchema[];
  /** MIME types a multipart file part may have (the field's `mimeTypes`), for the form's encoding. */
  readonly fileContentTypes: readonly string[] | undefined;
}

/** Either the value or a list of them (what a modifier's operand may be). */
export function oneOrMany(item: JsonSchema): JsonSchema {
  return { anyOf: [item, { type: 'array', items: item }] };
}

/** A string that is either empty (the field's empty value) or satisfies `constraints`. */
function emptyOr(constraints: JsonSchema): JsonSchema {
  return { type: 'string', anyOf: [{ const: '' }, constraints] };
}

/** A string satisfying `constraints`, or also `""` when the field is not required. */
export function emptyUnlessRequired(field: { readonly required: boolean }, constraints: JsonSchema): JsonSchema {
  return field.required ? { type: 'string', ...constraints } : emptyOr(constraints);
}

/** The input schema of a multi-valued field: at most `maxSelect` items, at least one when required. */
export function listOf(field: { readonly required: boolean }, item: JsonSchema, maxSelect: number | undefined): JsonSchema {
  const schema: JsonSchema = { type: 'array', items: item };
  if (field.required) schema.minItems = 1;
  schema.maxItems = maxSelect ?? 1;
  return schema;
}

/** The modifier keys of a multi-valued select or relation: add (`f+`, `+f`) and remove (`f-`). */
export function describeListModifiers(field: { readonly name: string }, addItem: JsonSchema, removeItem: JsonSchema): Pick<FieldSchemas, 'updateModifiers' | 'updateFormModifiers'> {
  const modifiers = [
    { key: `${field.name}+`, schema: { ...oneOrMany(addItem), description: 'Values to add at the end.' } },
    { key: `+${field.name}`, schema: { ...oneOrMany(addItem), description: 'Values to add at the start.' } },
    { key: `${field.name}-`, schema: { ...oneOrMany(removeItem), description: 'Values to remove.' } },
  ];
  return { updateModifiers: modifiers, updateFormModifiers: modifiers };
}

/** A field whose JSON and multipart inputs are the same, and that takes no modifiers. */
export function sameInput(record: JsonSchema, input: JsonSchema): FieldSchemas {
  return { record, create: input, update: input, createForm: input, updateForm: input, updateModifiers: [], updateFormModifiers: [], fileContentTypes: undefined };
}
