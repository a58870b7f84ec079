/**
 * Record validation: checks the values a write will store, and turns them into the full set of
 * field values to write, or a ValidationError naming every failing field (docs/collections.md).
 *
 * It runs last in a write, after the request was read into a NormalizedWrite
 * (lib/records/normalize-write.ts: coercion, modifiers, uploads), after the rules and after the
 * before-hooks, so a hook cannot store an invalid value. Values are coerced once more on the way
 * in (idempotent for values already read, and what makes a hook's `views = "3"` a number), then
 * checked: `required` and each type's own value check in code, every declarative constraint
 * (lengths, pattern, formats, enum, maxItems, bounds, integers) by one ajv schema compiled once
 * per collection from each field type's `constraints` (lib/schema/fields/), failures worded by
 * the type where it has its own wording. The definitions themselves were checked when the schema
 * was built.
 */
import { Ajv, type CodeOptions, type ErrorObject, type ValidateFunction } from 'ajv';
import { SchemaError, ValidationError, type FieldError } from '../errors.js';
import type { RecordValues } from '../db/record-store.js';
import { createFieldError, quoteValue } from '../schema/coerce-value.js';
import type { CollectionSchema, DeclaredFieldSchema } from '../schema/collection-schema.js';
import type { ConstraintKeyword, ValueContext } from '../schema/field-type-spec.js';
import { collectFormats, fieldTypeOf, type AnyFieldTypeSpec } from '../schema/field-types.js';
import { OverflowSafeRegExp } from '../schema/overflow-safe-regexp.js';
import { isEmptyValue } from '../schema/storage-kinds.js';
import { defineValue, readStoredValue } from './normalize-write.js';

/** What one validation call reads. */
export interface ValidateOptions {
  /**
   * Field name -> value for every field the write touches: a NormalizedWrite's `data`, as a
   * before-hook may have changed it. Keys that are not fields (and system fields) are ignored.
   */
  data: Record<string, unknown>;
  /** The stored record on update; absent on create (empty values are the base then). */
  existing?: RecordValues;
  /** Failures found earlier (coercion, uploads): reported with the rest; those fields are not checked again. */
  errors?: Readonly<Record<string, FieldError>>;
  /** Stored names of files uploaded with this request: file fields may take them besides their current names. */
  uploadedNames?: ReadonlySet<string>;
}

/** A collection's compiled validator; build it once per collection with compileValidator. */
export interface RecordValidator {
  readonly collection: CollectionSchema;
  /**
   * Returns the full set of non-system field values (`data` over `existing`, or over empty
   * values on create), so the caller can write the row as is. Throws ValidationError with every
   * failing field. Checks run on the merged values, so an update cannot leave a required field
   * empty. Relation ids are checked for shape only; the caller checks that they exist.
   */
  validate(options: ValidateOptions): Record<string, unknown>;
}

const NO_UPLOADS: ReadonlySet<string> = new Set();

interface FieldPlan {
  readonly field: DeclaredFieldSchema;
  /** The field's type, looked up once here rather than per write. */
  readonly spec: AnyFieldTypeSpec;
  /** The field's property in ajv's data: `f<index>`, so no field name ever meets ajv's own handling of `__proto__`. */
  readonly key: string;
  /** The field type's constraints on a non-empty value; null when coercion guarantees everything. */
  readonly constraints: Record<string, unknown> | null;
}

/** Ajv keywords in the order their error is preferred when one field fails several. */
const KEYWORD_RANK: Readonly<Record<string, number>> = {
  type: 0,
  enum: 1,
  maxItems: 1,
  minLength: 2,
  maxLength: 2,
  minimum: 2,
  maximum: 2,
  pattern: 3,
  format: 3,
};

/**
 * Ajv's regex engine for `pattern`. Called only while a schema compiles (there is no `$data`),
 * so no regex is ever built from a request. Tries unicode mode first, for code-point-correct
 * matching, and falls back to the plain mode in which the schema check accepted the pattern.
 */
const compilePattern: NonNullable<CodeOptions['regExp']> = Object.assign(
  (pattern: string, flags: string): RegExp => {
    if (flags !== '') {
      try {
        return new OverflowSafeRegExp(pattern, flags);
      } catch {
        // Some valid non-unicode patterns (`\_`, a lone `{`) are syntax errors in unicode mode.
      }
    }
    return new OverflowSafeRegExp(pattern);
  },
  { code: 'recordbaseCompilePattern' },
);

/** Builds the one ajv validator of a collection: every field with constraints, keyed `f<index>`. */
function compileAjv(collection: CollectionSchema, plans: readonly FieldPlan[]): ValidateFunction {
  const properties: Record<string, unknown> = {};
  for (const plan of plans) {
    if (plan.constraints !== null) properties[plan.key] = plan.constraints;
  }
  const ajv = new Ajv({
    allErrors: true,
    strict: true,
    messages: false,
    formats: collectFormats(),
    code: { regExp: compilePattern },
  });
  try {
    return ajv.compile({ type: 'object', properties });
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new SchemaError(`collection "${collection.name}": cannot compile field constraints: ${reason}`);
  }
}

/** Translates an ajv error on one field into the documented code and a human message: the field type's wording first. */
function translateAjvError(spec: AnyFieldTypeSpec, error: ErrorObject, value: unknown): FieldError {
  const limit = (error.params as { limit?: unknown }).limit;
  const { messages } = spec;
  const own = Object.prototype.hasOwnProperty.call(messages, error.keyword) ? messages[error.keyword as ConstraintKeyword] : undefined;
  if (own !== undefined) return own(limit);
  switch (error.keyword) {
    case 'type':
      if ((error.params as { type?: unknown }).type === 'integer') return createFieldError('validation_not_integer', 'Must be an integer.');
      return createFieldError('validation_invalid_value', 'Invalid value type.');
    case 'minLength':
      return createFieldError('validation_min_text_constraint', `Must be at least ${String(limit)} character(s).`);
    case 'maxLength':
      return createFieldError('validation_max_text_constraint', `Must be no more than ${String(limit)} character(s).`);
    case 'pattern':
    case 'format':
      return createFieldError('validation_invalid_format', 'Invalid value format.');
    case 'enum':
      return createFieldError('validation_invalid_value', typeof value === 'string' ? `Invalid value ${quoteValue(value)}.` : 'Invalid value.');
    case 'maxItems':
      return createFieldError('validation_too_many_values', `Select no more than ${String(limit)}.`);
    case 'minimum':
      return createFieldError('validation_min_number', `Must be no less than ${String(limit)}.`);
    case 'maximum':
      return createFieldError('validation_max_number', `Must be no more than ${String(limit)}.`);
    default:
      return createFieldError('validation_invalid_value', 'Invalid value.');
  }
}

/** Finds the failing element for a message: the field value, or the list item the path points at. */
function locateValue(value: unknown, segments: readonly string[]): unknown {
  if (segments.length === 0 || !Array.isArray(value)) return value;
  return value[Number(segments[0])];
}

/**
 * Compiles a collection's validator. Call it once per collection (at router setup): it builds the
 * ajv schema, so a request only runs compiled code.
 */
export function compileValidator(collection: CollectionSchema): RecordValidator {
  const plans: FieldPlan[] = collection.fields
    .filter((f): f is DeclaredFieldSchema => !f.system)
    .map((field, i) => {
      const spec = fieldTypeOf(field);
      return { field, spec, key: `f${i}`, constraints: spec.constraints(field) };
    });
  const planByKey = new Map(plans.map((p) => [p.key, p]));
  const checkConstraints = compileAjv(collection, plans);

  /** Runs the code-level checks that ajv cannot express; null when the field passes them. */
  function checkInCode(plan: FieldPlan, value: unknown, context: ValueContext): FieldError | null {
    const { field } = plan;
    if (field.required && isEmptyValue(field, value)) return createFieldError('validation_required', 'Cannot be blank.');
    return plan.spec.checkValue(field, value, context);
  }

  function validate(options: ValidateOptions): Record<string, unknown> {
    const { data } = options;
    const values = new Map<FieldPlan, unknown>();
    const errors = new Map<FieldPlan, FieldError>();
    const checked: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
    const earlier = options.errors ?? {};

    for (const plan of plans) {
      const { field } = plan;
      const failed = Object.prototype.hasOwnProperty.call(earlier, field.name) ? earlier[field.name] : undefined;
      if (failed !== undefined) {
        errors.set(plan, failed);
        continue;
      }
      const previous = readStoredValue(field, options.existing);
      const touched = Object.prototype.hasOwnProperty.call(data, field.name);
      let value = previous;
      if (touched) {
        const coerced = plan.spec.coerce(field, data[field.name], 'json');
        if (!coerced.ok) {
          errors.set(plan, coerced.error);
          continue;
        }
        value = coerced.value;
      }
      values.set(plan, value);
      const failure = checkInCode(plan, value, { touched, previous, uploaded: options.uploadedNames ?? NO_UPLOADS });
      if (failure !== null) errors.set(plan, failure);
      else if (plan.constraints !== null && !isEmptyValue(field, value)) checked[plan.key] = value;
    }

    if (!checkConstraints(checked)) {
      const best = new Map<FieldPlan, ErrorObject>();
      for (const error of checkConstraints.errors ?? []) {
        const [, key = '', ...rest] = error.instancePath.split('/');
        const plan = planByKey.get(key);
        if (plan === undefined || errors.has(plan)) continue;
        const current = best.get(plan);
        if (current === undefined || (KEYWORD_RANK[error.keyword] ?? 9) < (KEYWORD_RANK[current.keyword] ?? 9)) {
          best.set(plan, { ...error, data: locateValue(values.get(plan), rest) });
        }
      }
      for (const [plan, error] of best) errors.set(plan, translateAjvError(plan.spec, error, error.data));
    }

    if (errors.size > 0) {
      const report: Record<string, FieldError> = {};
      for (const plan of plans) {
        const error = errors.get(plan);
        if (error !== undefined) defineValue(report, plan.field.name, error);
      }
      throw new ValidationError(report);
    }
    const out: Record<string, unknown> = {};
    for (const plan of plans) defineValue(out, plan.field.name, values.get(plan));
    return out;
  }

  return { collection, validate };
}
