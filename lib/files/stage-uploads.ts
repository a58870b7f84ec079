import type { FieldError } from '../errors.js';
import type { CollectionSchema, FieldSchema } from '../schema/collection-schema.js';
import type { FileFieldDefinition } from '../schema/definitions.js';
import { createStoredFileName } from './file-names.js';
import type { Upload } from './upload.js';

/** How an upload joins its field: `docs` sets (with the names resent as text), `docs+` appends, `+docs` prepends. */
export type UploadOperation = 'set' | 'append' | 'prepend';

/** An upload that passed its field's checks and got its stored name. */
export interface StagedUpload {
  readonly upload: Upload;
  readonly field: FieldSchema;
  readonly operation: UploadOperation;
  /** The name it will be stored under (`createStoredFileName`). */
  readonly name: string;
}

/** The uploads of one request, checked: what to store, and the per-field 422 errors. */
export interface StagedUploads {
  readonly staged: readonly StagedUpload[];
  readonly errors: Record<string, FieldError>;
}

/** The file field a part name targets, with its operation; undefined for anything else (ignored, as PocketBase does). */
function resolveTarget(collection: CollectionSchema, partName: string): { field: FieldSchema; operation: UploadOperation } | undefined {
  let name = partName;
  let operation: UploadOperation = 'set';
  if (name.endsWith('+')) {
    name = name.slice(0, -1);
    operation = 'append';
  } else if (name.startsWith('+')) {
    name = name.slice(1);
    operation = 'prepend';
  }
  const field = collection.fields.find((f) => f.name === name);
  return field?.type === 'file' ? { field, operation } : undefined;
}

/** The field's own limits: size and MIME type (sniffed); null when the upload passes them. */
function checkUpload(definition: FileFieldDefinition, upload: Upload): FieldError | null {
  if (definition.maxSize !== undefined && upload.size > definition.maxSize) {
    return { code: 'validation_file_size_limit', message: `Failed to upload "${upload.originalName}": the maximum allowed file size is ${definition.maxSize} bytes.` };
  }
  const allowed = definition.mimeTypes ?? [];
  if (allowed.length > 0 && !allowed.includes(upload.mimeType)) {
    return {
      code: 'validation_invalid_mime_type',
      message: `Failed to upload "${upload.originalName}": the file type ${upload.mimeType} is not allowed (allowed: ${allowed.join(', ')}).`,
    };
  }
  return null;
}

/**
 * Matches each upload to its file field and checks the field's `maxSize` and `mimeTypes`
 * (DESIGN.md section 5). Parts that name no file field are dropped. The first failure per field
 * is reported under the field's name; `maxSelect` is the validator's job, on the merged value.
 */
export function stageUploads(collection: CollectionSchema, uploads: readonly Upload[]): StagedUploads {
  const staged: StagedUpload[] = [];
  const errors: Record<string, FieldError> = {};
  for (const upload of uploads) {
    const target = resolveTarget(collection, upload.field);
    if (!target) continue;
    const failure = checkUpload(target.field.definition as FileFieldDefinition, upload);
    if (failure) {
      errors[target.field.name] ??= failure;
      continue;
    }
    staged.push({ upload, field: target.field, operation: target.operation, name: createStoredFileName(upload.originalName) });
  }
  return { staged, errors };
}

/** A text value sent for a file field as a list of names: `''`/null clear, a string is one name. */
function readNames(value: unknown): unknown[] {
  if (value === undefined || value === null || value === '') return [];
  return Array.isArray(value) ? value : [value];
}

/**
 * The body with the staged uploads' names joined to their fields, ready for the validator: `docs`
 * becomes the names resent as text followed by the new ones (interface 4.7: only what is sent
 * stays), `docs+` / `+docs` gain the new names at their end / start. A single file field with
 * exactly one name gets it as a string, so an upload simply replaces the old file.
 */
export function joinUploadNames(data: Record<string, unknown>, staged: readonly StagedUpload[]): Record<string, unknown> {
  const out: Record<string, unknown> = { ...data };
  const keyOf = (upload: StagedUpload) => (upload.operation === 'append' ? `${upload.field.name}+` : upload.operation === 'prepend' ? `+${upload.field.name}` : upload.field.name);
  const groups = new Map<string, StagedUpload[]>();
  for (const upload of staged) groups.set(keyOf(upload), [...(groups.get(keyOf(upload)) ?? []), upload]);
  for (const [key, uploads] of groups) {
    const sent = readNames(data[key]);
    const added = uploads.map((u) => u.name);
    const names = uploads[0]!.operation === 'prepend' ? [...added, ...sent] : [...sent, ...added];
    out[key] = !uploads[0]!.field.multiple && names.length === 1 ? names[0] : names;
  }
  return out;
}
