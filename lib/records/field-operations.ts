/**
 * What one write request does to each field, read once from the body and the uploads: the one
 * representation of a write that rules (`@request.body`), hooks, validation, file staging and the
 * clearing of a multipart update all work from. Modifier keys are split by
 * lib/schema/field-modifiers.ts, the one parser of them.
 */
import type { FieldError } from '../errors.js';
import { stageUploads, type StagedUpload } from '../files/stage-uploads.js';
import type { Upload } from '../files/upload.js';
import type { InputSource } from '../schema/coerce-value.js';
import type { CollectionSchema, DeclaredFieldSchema } from '../schema/collection-schema.js';
import { acceptsOperation, parseModifierKey, type FieldOperationKind } from '../schema/field-modifiers.js';

/** What one request does to one field. */
export interface FieldWrite {
  readonly field: DeclaredFieldSchema;
  /** The raw values the body sent, by operation (`set` for the plain key); only keys that were sent. */
  readonly sent: ReadonlyMap<FieldOperationKind, unknown>;
  /** New files joining a file field, by operation, in the order they were sent. */
  readonly uploads: ReadonlyMap<Exclude<FieldOperationKind, 'remove'>, readonly StagedUpload[]>;
}

/** A write request as operations per field; build it with readWriteOperations. */
export interface WriteOperations {
  readonly collection: CollectionSchema;
  /** Multipart values are strings: a JSON field's string is JSON text to parse. */
  readonly source: InputSource;
  /** Whether the body sent `id`, and what (a create may choose its record's id). */
  readonly requestedId: { readonly sent: boolean; readonly value: unknown };
  /** The touched fields, in declaration order. */
  readonly fields: readonly FieldWrite[];
  /** Every upload that passed its field's own checks, whether or not the write keeps it. */
  readonly uploads: readonly StagedUpload[];
  /** The uploads' own 422s (size, type), by field name. */
  readonly uploadErrors: Readonly<Record<string, FieldError>>;
  /** The fields a replace-mode multipart update clears because it did not send them, by name. */
  readonly cleared: readonly string[];
}

/** What readWriteOperations reads. */
export interface WriteRequest {
  /** The body: a JSON object, or multipart text parts with `@jsonPayload` merged. */
  readonly body: Record<string, unknown>;
  readonly source: InputSource;
  /** File parts of a multipart body. */
  readonly uploads?: readonly Upload[];
  /**
   * A multipart update in replace mode (option `multipartUpdate`, docs/files.md): every field the
   * request does not touch is cleared, as if sent empty. Hidden fields, and fields with a view or
   * update rule (DESIGN 24), only when `includeHidden` (a superuser): a client that never received
   * a field cannot resend it, and a field it may not set is not set by leaving it out.
   */
  readonly clearUnsent?: { readonly includeHidden: boolean };
  /** An update: the body's `id` is the record's and changes nothing, so it is not part of the write. */
  readonly update?: boolean;
}

/**
 * Reads a write request into operations per field: body keys through parseModifierKey (unknown
 * fields, system fields and modifiers a field does not take are ignored, as PocketBase does),
 * uploads checked against their field's size and type and named (lib/files/stage-uploads.ts),
 * and, for a replace-mode multipart update, every untouched field cleared.
 */
export function readWriteOperations(collection: CollectionSchema, request: WriteRequest): WriteOperations {
  const { staged, errors } = stageUploads(collection, request.uploads ?? []);
  const byField = new Map<DeclaredFieldSchema, { sent: Map<FieldOperationKind, unknown>; uploads: Map<Exclude<FieldOperationKind, 'remove'>, StagedUpload[]> }>();
  const entryOf = (field: DeclaredFieldSchema) => {
    let entry = byField.get(field);
    if (!entry) byField.set(field, (entry = { sent: new Map(), uploads: new Map() }));
    return entry;
  };
  const body = request.body;
  for (const key of Object.keys(body)) {
    const { name, kind } = parseModifierKey(key);
    const field = collection.field(name);
    if (!field || field.system || !acceptsOperation(field, kind)) continue;
    entryOf(field).sent.set(kind, body[key]);
  }
  for (const upload of staged) {
    const list = entryOf(upload.field).uploads;
    list.set(upload.operation, [...(list.get(upload.operation) ?? []), upload]);
  }
  const cleared: string[] = [];
  if (request.clearUnsent) {
    for (const field of collection.fields) {
      if (field.system || byField.has(field) || (isGuarded(field) && !request.clearUnsent.includeHidden)) continue;
      entryOf(field).sent.set('set', null);
      cleared.push(field.name);
    }
  }
  const fields = collection.fields.filter((f): f is DeclaredFieldSchema => !f.system && byField.has(f)).map((field) => ({ field, ...byField.get(field)! }));
  const sentId = request.update !== true && Object.prototype.hasOwnProperty.call(body, 'id');
  return {
    collection,
    source: request.source,
    requestedId: { sent: sentId, value: sentId ? body.id : undefined },
    fields,
    uploads: staged,
    uploadErrors: errors,
    cleared,
  };
}

/** Whether a replace-mode multipart update leaves the field alone for a non-superuser: hidden, or under a view or update rule. */
function isGuarded(field: DeclaredFieldSchema): boolean {
  return field.hidden || field.rules?.view !== undefined || field.rules?.update !== undefined;
}
