/**
 * The JSON Schemas (OpenAPI 3.1 dialect) of one field: how it reads in a record, and what a
 * create or update may send for it, as JSON and as multipart. The OpenAPI document is built from
 * these, and the TypeScript declarations are rendered from the document, so each field's shape
 * is written once, here. Input schemas describe what a client should send; the server is more
 * lenient (multipart strings such as `"12"` are coerced), see docs/records-api.md.
 */
import type { FieldSchema } from '../schema/collection-schema.js';
import type { FieldDefinition } from '../schema/definitions.js';

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

/** A record id (generated, or a valid unused one a client sends on create). */
export const RECORD_ID_PATTERN = '^[a-z0-9]{15}$';
/** `created`, `updated` and date fields in a record: `YYYY-MM-DD hh:mm:ss.mmmZ`, UTC. */
export const RECORD_DATE_PATTERN = '^\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z$';
/** What a date field accepts; the server checks the value itself. */
const DATE_INPUT_DESCRIPTION = 'A date: "2024-05-01 10:00:00.000Z" (the record format), ISO 8601 with any offset, or "2024-05-01" (midnight UTC).';
/** The `url` field accepts absolute http(s) URLs only. */
const HTTP_URL_PATTERN = '^[Hh][Tt][Tt][Pp][Ss]?://';
/** RFC 5321's limit, which the server enforces before it checks the address. */
const MAX_EMAIL_LENGTH = 254;

const BINARY_PART: JsonSchema = { type: 'string', format: 'binary', contentMediaType: 'application/octet-stream', description: 'A file part.' };

/** Either the value or a list of them (what a modifier's operand may be). */
function oneOrMany(item: JsonSchema): JsonSchema {
  return { anyOf: [item, { type: 'array', items: item }] };
}

/** A string that is either empty (the field's empty value) or satisfies `constraints`. */
function emptyOr(constraints: JsonSchema, base: JsonSchema = { type: 'string' }): JsonSchema {
  return { ...base, anyOf: [{ const: '' }, constraints] };
}

/** The input schema of a multi-valued field: at most `maxSelect` items, at least one when required. */
function listOf(field: FieldSchema, item: JsonSchema, maxSelect: number | undefined): JsonSchema {
  const schema: JsonSchema = { type: 'array', items: item };
  if (field.required) schema.minItems = 1;
  schema.maxItems = maxSelect ?? 1;
  return schema;
}

function describeText(field: FieldSchema, def: Extract<FieldDefinition, { type: 'text' }>): FieldSchemas {
  const input: JsonSchema = { type: 'string' };
  if (field.required) {
    input.minLength = Math.max(def.min ?? 1, 1);
    if (def.max !== undefined) input.maxLength = def.max;
    if (def.pattern) input.pattern = def.pattern;
  } else {
    if (def.max !== undefined) input.maxLength = def.max;
    const nonEmpty: JsonSchema = {};
    if (def.min !== undefined && def.min > 0) nonEmpty.minLength = def.min;
    if (def.pattern) nonEmpty.pattern = def.pattern;
    if (Object.keys(nonEmpty).length > 0) input.anyOf = [{ const: '' }, nonEmpty];
  }
  return sameInput({ type: 'string' }, input);
}

function describeNumber(field: FieldSchema, def: Extract<FieldDefinition, { type: 'number' }>): FieldSchemas {
  const type = def.onlyInt === true ? 'integer' : 'number';
  const nullable = field.required ? type : [type, 'null'];
  const input: JsonSchema = { type: nullable };
  if (def.min !== undefined) input.minimum = def.min;
  if (def.max !== undefined) input.maximum = def.max;
  const operand: JsonSchema = { type: 'number' };
  const modifiers = [
    { key: `${field.name}+`, schema: { ...operand, description: `Adds to ${field.name}.` } },
    { key: `${field.name}-`, schema: { ...operand, description: `Subtracts from ${field.name}.` } },
  ];
  return { ...sameInput({ type: nullable }, input), updateModifiers: modifiers, updateFormModifiers: modifiers };
}

function describeBool(field: FieldSchema): FieldSchemas {
  // PocketBase's rule: a required bool must be true.
  const input: JsonSchema = field.required ? { type: 'boolean', const: true } : { type: 'boolean' };
  return sameInput({ type: 'boolean' }, input);
}

function describeEmail(field: FieldSchema): FieldSchemas {
  const format: JsonSchema = { format: 'email' };
  const record = field.required ? { type: 'string', ...format } : emptyOr(format);
  return sameInput(record, { ...record, maxLength: MAX_EMAIL_LENGTH });
}

function describeUrl(field: FieldSchema): FieldSchemas {
  const format: JsonSchema = { format: 'uri' };
  const record = field.required ? { type: 'string', ...format } : emptyOr(format);
  const httpUrl: JsonSchema = { format: 'uri', pattern: HTTP_URL_PATTERN };
  const input = field.required ? { type: 'string', ...httpUrl } : emptyOr(httpUrl);
  return sameInput(record, { ...input, description: 'An absolute http(s) URL.' });
}

function describeDate(field: FieldSchema): FieldSchemas {
  const type = field.required ? 'string' : ['string', 'null'];
  return sameInput({ type, pattern: RECORD_DATE_PATTERN, description: 'YYYY-MM-DD hh:mm:ss.mmmZ (UTC)' + (field.required ? '.' : ', or null when empty.') }, { type, description: DATE_INPUT_DESCRIPTION });
}

function describeSelect(field: FieldSchema, def: Extract<FieldDefinition, { type: 'select' }>): FieldSchemas {
  const item: JsonSchema = { type: 'string', enum: [...def.values] };
  if (field.multiple) {
    return { ...sameInput({ type: 'array', items: item }, listOf(field, item, def.maxSelect)), ...listModifiers(field, item, item) };
  }
  const single: JsonSchema = field.required ? item : { type: 'string', enum: [...new Set([...def.values, ''])] };
  return sameInput(single, single);
}

function describeRelation(field: FieldSchema, def: Extract<FieldDefinition, { type: 'relation' }>): FieldSchemas {
  const target = `"${def.collection}"`;
  const id: JsonSchema = { type: 'string', pattern: RECORD_ID_PATTERN };
  const extension = { 'x-recordbase-relation': def.collection };
  if (field.multiple) {
    const record = { type: 'array', items: { type: 'string' }, description: `Ids of ${target} records.`, ...extension };
    const input = { ...listOf(field, id, def.maxSelect), description: `Ids of ${target} records.`, ...extension };
    return { ...sameInput(record, input), ...listModifiers(field, id, id) };
  }
  const description = field.required ? `Id of a ${target} record.` : `Id of a ${target} record, or "" for none.`;
  const record = { type: 'string', description, ...extension };
  const input = { type: 'string', pattern: field.required ? RECORD_ID_PATTERN : '^([a-z0-9]{15})?$', description, ...extension };
  return sameInput(record, input);
}

function describeFile(field: FieldSchema, def: Extract<FieldDefinition, { type: 'file' }>): FieldSchemas {
  const keepName: JsonSchema = { type: 'string', description: 'The stored name of a current file, to keep it.' };
  const newOrKept: JsonSchema = { anyOf: [BINARY_PART, keepName] };
  const limits = describeFileLimits(def);
  const contentTypes = def.mimeTypes !== undefined && def.mimeTypes.length > 0 ? [...def.mimeTypes] : undefined;
  if (field.multiple) {
    const removeNames = { key: `${field.name}-`, schema: { ...oneOrMany({ type: 'string' }), description: 'Stored names of files to remove.' } };
    const addFiles = (key: string, where: string) => ({ key, schema: { ...oneOrMany(BINARY_PART), description: `Files to add ${where}.` } });
    return {
      record: { type: 'array', items: { type: 'string' }, description: 'Stored file names.' },
      create: undefined,
      update: { type: 'array', items: { type: 'string' }, description: 'The stored names to keep; [] removes every file. New files need multipart.' },
      createForm: { ...listOf(field, BINARY_PART, def.maxSelect), description: `One part per file.${limits}` },
      updateForm: { ...listOf(field, newOrKept, def.maxSelect), description: `One part per file: a new file, or a text part with the stored name of a file to keep; files not sent are removed.${limits}` },
      updateModifiers: [removeNames],
      updateFormModifiers: [addFiles(`${field.name}+`, 'after the current ones'), addFiles(`+${field.name}`, 'before the current ones'), removeNames],
      fileContentTypes: contentTypes,
    };
  }
  return {
    record: { type: 'string', description: 'The stored file name, or "" for none.' },
    create: undefined,
    update: { type: ['string', 'null'], description: 'The current stored name (keeps the file), or "" or null to remove it. New files need multipart.' },
    createForm: { ...BINARY_PART, description: `The file.${limits}` },
    updateForm: { ...newOrKept, description: `A new file, or a text part with the current stored name to keep it ("" removes it).${limits}` },
    updateModifiers: [],
    updateFormModifiers: [],
    fileContentTypes: contentTypes,
  };
}

function describeFileLimits(def: Extract<FieldDefinition, { type: 'file' }>): string {
  const limits: string[] = [];
  if (def.maxSize !== undefined) limits.push(`at most ${def.maxSize} bytes per file`);
  if (def.mimeTypes !== undefined && def.mimeTypes.length > 0) limits.push(`types (sniffed from the bytes): ${def.mimeTypes.join(', ')}`);
  return limits.length > 0 ? ` Limits: ${limits.join('; ')}.` : '';
}

function describeJson(field: FieldSchema, def: Extract<FieldDefinition, { type: 'json' }>): FieldSchemas {
  const size = def.maxSize !== undefined ? ` At most ${def.maxSize} bytes serialised.` : '';
  return sameInput({ description: 'Any JSON value; null when empty.' }, { description: `Any JSON value.${size}` });
}

/** The modifier keys of a multi-valued select or relation: add (`f+`, `+f`) and remove (`f-`). */
function listModifiers(field: FieldSchema, addItem: JsonSchema, removeItem: JsonSchema): Pick<FieldSchemas, 'updateModifiers' | 'updateFormModifiers'> {
  const modifiers = [
    { key: `${field.name}+`, schema: { ...oneOrMany(addItem), description: 'Values to add at the end.' } },
    { key: `+${field.name}`, schema: { ...oneOrMany(addItem), description: 'Values to add at the start.' } },
    { key: `${field.name}-`, schema: { ...oneOrMany(removeItem), description: 'Values to remove.' } },
  ];
  return { updateModifiers: modifiers, updateFormModifiers: modifiers };
}

/** A field whose JSON and multipart inputs are the same, and that takes no modifiers. */
function sameInput(record: JsonSchema, input: JsonSchema): FieldSchemas {
  return { record, create: input, update: input, createForm: input, updateForm: input, updateModifiers: [], updateFormModifiers: [], fileContentTypes: undefined };
}

/** The schemas of one declared field. System fields (id, created, updated) are the document's own. */
export function describeFieldSchemas(field: FieldSchema): FieldSchemas {
  const def = field.definition;
  if (def === undefined) throw new Error(`recordbase: field "${field.name}" has no definition (system fields are described by the document)`);
  switch (def.type) {
    case 'text':
      return describeText(field, def);
    case 'number':
      return describeNumber(field, def);
    case 'bool':
      return describeBool(field);
    case 'email':
      return describeEmail(field);
    case 'url':
      return describeUrl(field);
    case 'date':
      return describeDate(field);
    case 'select':
      return describeSelect(field, def);
    case 'relation':
      return describeRelation(field, def);
    case 'file':
      return describeFile(field, def);
    case 'json':
      return describeJson(field, def);
  }
}
