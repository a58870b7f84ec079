import type { FieldError } from '../errors.js';
import type { RecordValues } from '../db/record-store.js';
import type { StagedUpload } from '../files/stage-uploads.js';
import { coerceStringList, type CoerceResult } from '../schema/coerce-value.js';
import { acceptsOperation, classifyModifiers, MODIFIER_ORDER, type FieldOperationKind } from '../schema/field-modifiers.js';
import { coerceFieldValue, fieldTypeOf, type DeclaredFieldSchema } from '../schema/field-types.js';
import { coerceNumberOperand, NOT_A_NUMBER } from '../schema/fields/number.js';
import { autogenerateText } from '../schema/fields/text.js';
import { emptyValueOf } from '../schema/storage-kinds.js';
import type { FieldWrite, WriteOperations } from './field-operations.js';

/**
 * A write in record values: what each touched field will hold once the request is applied. This
 * is the `@request.body` the rules see, the `data` a before-hook may change, and what validation
 * checks; so what a rule allows and what the write stores can never differ.
 */
export interface NormalizedWrite {
  readonly operations: WriteOperations;
  /**
   * Field name -> the value the field will hold, for every touched field: coerced to its type,
   * modifiers applied over the current value, new uploads' stored names joined in, a cleared field
   * as its empty value. A field whose value could not be read holds `null` (its error is in
   * `errors`). `id` is there when the body sent one.
   */
  readonly data: Record<string, unknown>;
  /** Fields whose sent value could not be read as their type, and the uploads' own failures. */
  readonly errors: Readonly<Record<string, FieldError>>;
}

/**
 * Applies write operations over the current record (`existing`, absent on create, where every
 * field starts from its empty value). Pure: nothing is checked against constraints here (that is
 * validation's job, after the rules and hooks), only read.
 */
export function normalizeWrite(operations: WriteOperations, existing?: RecordValues): NormalizedWrite {
  const data: Record<string, unknown> = {};
  const errors: Record<string, FieldError> = { ...operations.uploadErrors };
  if (operations.requestedId.sent) defineValue(data, 'id', operations.requestedId.value);
  for (const write of operations.fields) {
    // A field only the server writes (autodate) is no part of a client's write, not even as one a multipart update clears.
    if (!acceptsOperation(write.field, 'set')) continue;
    const result = applyFieldWrite(write, { previous: readStoredValue(write.field, existing), source: operations.source });
    if (result.ok) defineValue(data, write.field.name, result.value);
    else {
      defineValue(data, write.field.name, null);
      errors[write.field.name] ??= result.error;
    }
  }
  return { operations, data, errors };
}

/** The stored value of a field in record-value shape (a Date from the driver becomes a string). */
export function readStoredValue(field: DeclaredFieldSchema, existing: RecordValues | undefined): unknown {
  if (existing === undefined || !Object.prototype.hasOwnProperty.call(existing, field.name)) return emptyValueOf(field);
  const value = existing[field.name];
  if (value === undefined) return emptyValueOf(field);
  if (field.storage === 'json') return value;
  const coerced = coerceFieldValue(field, value, 'json');
  return coerced.ok ? coerced.value : value;
}

/** Defines an own property, so a key named `__proto__` or `constructor` stays plain data. */
export function defineValue(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

function applyFieldWrite(write: FieldWrite, options: { previous: unknown; source: 'json' | 'multipart' }): CoerceResult {
  const { field } = write;
  let value = options.previous;
  if (write.sent.has('set')) {
    const coerced = coerceFieldValue(field, write.sent.get('set'), options.source);
    if (!coerced.ok) return coerced;
    value = coerced.value;
  }
  const setUploads = write.uploads.get('set');
  if (setUploads) {
    // `docs` with files: the names resent as text, then the new files (only what is sent stays, docs/files.md).
    const resent = write.sent.has('set') ? readList(field, value) : [];
    const names = [...new Set([...resent, ...namesOf(setUploads)])];
    if (!field.multiple && names.length > 1) return tooMany(field);
    value = field.multiple ? names : (names[0] ?? '');
  }
  if (write.sent.has('autogenerate')) {
    // Generated here, once per write, so the rules' `@request.body` sees the value that is stored.
    const prefix = coerceFieldValue(field, write.sent.get('autogenerate'), options.source);
    if (!prefix.ok) return prefix;
    value = autogenerateText(field, prefix.value as string);
  }
  if (MODIFIER_ORDER.some((kind) => write.sent.has(kind) || write.uploads.has(kind as Exclude<FieldOperationKind, 'remove'>))) {
    return applyModifiers(write, value);
  }
  return { ok: true, value };
}

/** Applies `+f`, `f+` and `f-` (body operands, then the uploads of that operation) over `value`. */
function applyModifiers(write: FieldWrite, value: unknown): CoerceResult {
  const { field } = write;
  if (classifyModifiers(field) === 'number') {
    let n = typeof value === 'number' ? value : 0;
    for (const kind of MODIFIER_ORDER) {
      if (!write.sent.has(kind)) continue;
      const operand = coerceNumberOperand(write.sent.get(kind));
      if (!operand.ok) return operand;
      n = kind === 'remove' ? n - (operand.value as number) : n + (operand.value as number);
    }
    if (!Number.isFinite(n)) return { ok: false, error: { ...NOT_A_NUMBER } };
    return { ok: true, value: n };
  }
  let list = readList(field, value);
  for (const kind of MODIFIER_ORDER) {
    let operand: string[] = [];
    if (write.sent.has(kind)) {
      const coerced = coerceStringList(write.sent.get(kind));
      if (!coerced.ok) return coerced;
      operand = coerced.value as string[];
    }
    const uploads = kind === 'remove' ? undefined : write.uploads.get(kind);
    if (uploads) operand = kind === 'prepend' ? [...namesOf(uploads), ...operand] : [...operand, ...namesOf(uploads)];
    if (!write.sent.has(kind) && !uploads) continue;
    if (kind === 'prepend') list = [...operand, ...list];
    else if (kind === 'append') list = [...list, ...operand];
    else {
      const removed = new Set(operand);
      list = list.filter((v) => !removed.has(v));
    }
  }
  list = [...new Set(list)];
  if (field.multiple) return { ok: true, value: list };
  if (list.length > 1) return tooMany(field);
  return { ok: true, value: list[0] ?? '' };
}

/** A list-like field's value as a list: a single-valued field is a list of zero or one. */
function readList(field: DeclaredFieldSchema, value: unknown): string[] {
  if (field.multiple) return Array.isArray(value) ? (value as string[]) : [];
  return typeof value === 'string' && value !== '' ? [value] : [];
}

function namesOf(uploads: readonly StagedUpload[]): string[] {
  return uploads.map((upload) => upload.name);
}

/** Several values left in a single-valued list field (select, relation, file), worded by its type. */
function tooMany(field: DeclaredFieldSchema): CoerceResult {
  return { ok: false, error: { ...fieldTypeOf(field).tooManyError } };
}
