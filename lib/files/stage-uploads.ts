import type { FieldError } from '../errors.js';
import type { CollectionSchema } from '../schema/collection-schema.js';
import type { FileFieldDefinition, FileFieldSchema } from '../schema/fields/file.js';
import { parseModifierKey } from '../schema/field-modifiers.js';
import { createStoredFileName } from './file-names.js';
import type { Upload } from './upload.js';

/** How an upload joins its field: `docs` sets (with the names resent as text), `docs+` appends, `+docs` prepends. */
export type UploadOperation = 'set' | 'append' | 'prepend';

/** An upload that passed its field's checks and got its stored name. */
export interface StagedUpload {
  readonly upload: Upload;
  readonly field: FileFieldSchema;
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
function resolveTarget(collection: CollectionSchema, partName: string): { field: FileFieldSchema; operation: UploadOperation } | undefined {
  const { name, kind } = parseModifierKey(partName);
  const field = collection.field(name);
  if (field?.type !== 'file' || kind === 'remove' || kind === 'autogenerate') return undefined;
  return { field, operation: kind };
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
 * (docs/files.md). Parts that name no file field are dropped. The first failure per field
 * is reported under the field's name; `maxSelect` is the validator's job, on the merged value.
 */
export function stageUploads(collection: CollectionSchema, uploads: readonly Upload[]): StagedUploads {
  const staged: StagedUpload[] = [];
  const errors: Record<string, FieldError> = {};
  for (const upload of uploads) {
    const target = resolveTarget(collection, upload.field);
    if (!target) continue;
    const failure = checkUpload(target.field.definition, upload);
    if (failure) {
      errors[target.field.name] ??= failure;
      continue;
    }
    staged.push({ upload, field: target.field, operation: target.operation, name: createStoredFileName(upload.originalName, upload.mimeType) });
  }
  return { staged, errors };
}
