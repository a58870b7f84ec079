/**
 * The `file` field type: the stored name of an uploaded file (`""` for none), or a list of names
 * with `maxSelect` > 1. Uploads are staged by lib/files/stage-uploads.ts against `maxSize` and
 * `mimeTypes`; downloads read `thumbs` and `protected` (docs/files.md).
 */
import { SchemaError, type FieldError } from '../../errors.js';
import { createFieldError, quoteValue } from '../coerce-value.js';
import { listOf, oneOrMany, type FieldSchemas, type JsonSchema } from '../field-schemas.js';
import { defineFieldType, withoutUnset, type FieldSchemaOf } from '../field-type-spec.js';
import { parseThumbSize } from '../thumb-size.js';
import { checkMaxSelect } from './check-limit.js';
import { constrainItems, describeListBehaviour, type ListFieldDefinition } from './list-field.js';

/** A file field's declaration. */
export interface FileFieldDefinition extends ListFieldDefinition {
  type: 'file';
  /** Maximum size of one file in bytes; 0 (PocketBase's "unset") is none beyond the router's maxFileSize. */
  maxSize?: number;
  /** Allowed MIME types, sniffed from the bytes. Empty or absent: any. */
  mimeTypes?: string[];
  /** Allowed thumbnail sizes (`100x100`, `0x50`, ...). Absent: any up to 2048 per side. */
  thumbs?: string[];
  /** Downloads need an identity that passes the collection's view rule. */
  protected?: boolean;
}

/** A checked file field: `definition` holds its file settings, typed. */
export type FileFieldSchema = FieldSchemaOf<FileFieldDefinition>;

const TOO_MANY_FILES: FieldError = { code: 'validation_too_many_files', message: 'Too many files; at most 1 allowed.' };
const MIME_TYPE = /^[a-z0-9.+-]+\/[a-z0-9.+-]+$/i;
const BINARY_PART: JsonSchema = { type: 'string', format: 'binary', contentMediaType: 'application/octet-stream', description: 'A file part.' };

/**
 * A file field's limits, checked at creation: a typo here (`'100X100'`, a negative size) would
 * otherwise only show up later as every upload or thumbnail request failing.
 */
function checkFileSettings(def: FileFieldDefinition, where: string): void {
  checkMaxSelect(where, def.maxSelect);
  if (def.maxSize !== undefined && def.maxSize !== null && (!Number.isSafeInteger(def.maxSize) || def.maxSize < 0)) {
    throw new SchemaError(`${where}: maxSize must be a positive integer (bytes), or 0 for none`);
  }
  if (def.mimeTypes !== undefined && def.mimeTypes !== null && (!Array.isArray(def.mimeTypes) || def.mimeTypes.some((m) => typeof m !== 'string' || !MIME_TYPE.test(m)))) {
    throw new SchemaError(`${where}: mimeTypes must be an array of MIME types such as "image/png"`);
  }
  if (def.thumbs !== undefined && def.thumbs !== null) {
    if (!Array.isArray(def.thumbs)) throw new SchemaError(`${where}: thumbs must be an array of sizes such as "100x100"`);
    for (const size of def.thumbs) {
      const parsed = parseThumbSize(size);
      if ('error' in parsed) throw new SchemaError(`${where}: thumbs entry ${JSON.stringify(size)} is not a thumbnail size: ${parsed.error}`);
    }
  }
}

/** A file field's names as a list, whichever shape it has. */
function listNames(value: unknown): string[] {
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string');
  return typeof value === 'string' && value !== '' ? [value] : [];
}

/** The size and type limits a form part's description quotes. */
function describeFileLimits(def: FileFieldDefinition): string {
  const limits: string[] = [];
  if (def.maxSize !== undefined) limits.push(`at most ${def.maxSize} bytes per file`);
  if (def.mimeTypes !== undefined && def.mimeTypes.length > 0) limits.push(`types (sniffed from the bytes): ${def.mimeTypes.join(', ')}`);
  return limits.length > 0 ? ` Limits: ${limits.join('; ')}.` : '';
}

/** Records hold names; a JSON write may keep, reorder or remove them, only multipart uploads new files. */
function describeFile(field: FileFieldSchema): FieldSchemas {
  const def = field.definition;
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

/** The file type (docs/collections.md, docs/files.md). */
export const fileField = defineFieldType<FileFieldDefinition>({
  type: 'file',
  keys: ['maxSelect', 'maxSize', 'mimeTypes', 'thumbs', 'protected'],
  ...describeListBehaviour<FileFieldDefinition>(TOO_MANY_FILES),
  messages: { maxItems: (limit) => ({ code: 'validation_too_many_files', message: `Too many files; at most ${String(limit)} allowed.` }) },
  checkSettings: checkFileSettings,
  normalize: (def) => withoutUnset(def, ['maxSize', 'maxSelect']),
  constraints: (field) => constrainItems(field, { type: 'string' }, field.definition.maxSelect),
  /** A write may keep current names and add this request's uploads, never name a file it did not upload. */
  checkValue(_field, value, context) {
    if (!context.touched) return null;
    const known = new Set(listNames(context.previous));
    const unknown = listNames(value).find((name) => !known.has(name) && !context.uploaded.has(name));
    return unknown === undefined ? null : createFieldError('validation_invalid_value', `Unknown file ${quoteValue(unknown)}; new files must be uploaded.`);
  },
  describe: describeFile,
});
