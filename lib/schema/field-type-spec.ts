/**
 * What a field type is made of (after PocketBase's `core/field_*.go`): one object per type in
 * lib/schema/fields/, listed once in lib/schema/field-types.ts, and every part of recordbase that
 * behaves differently per type asks that object. A new field type is one new file and one line
 * in the registry (docs/contributing.md).
 */
import type { FieldError } from '../errors.js';
import type { CoerceResult, InputSource } from './coerce-value.js';
import type { FieldSchemas, JsonSchema } from './field-schemas.js';
import type { StorageKind } from './storage-kinds.js';

/** What every field declaration has, whatever its type. */
export interface FieldBase {
  /** `[A-Za-z_][A-Za-z0-9_]*`, unique within the collection, not a system field name. */
  name: string;
  /** Empty values are refused with `validation_required`. */
  required?: boolean;
  /** Never in responses, nor usable in filter/sort, for anyone but a superuser; rules may use it. */
  hidden?: boolean;
}

/** The keys of FieldBase and `type`: every declaration may have them besides its type's own. */
export const FIELD_BASE_KEYS: readonly string[] = ['name', 'type', 'required', 'hidden'];

/** A declaration of some field type: the base and the `type` that selects the rest. */
export interface TypedFieldDefinition extends FieldBase {
  type: string;
}

/**
 * A checked declared field whose declaration is `D`. The union of these over every type is a
 * discriminated union on `type` (lib/schema/field-types.ts), so `field.type === 'file'` makes
 * `field.definition` a FileFieldDefinition without a cast. `column` is the SQL column name.
 */
export interface FieldSchemaOf<D extends TypedFieldDefinition> {
  readonly name: string;
  readonly type: D['type'];
  readonly column: string;
  readonly storage: StorageKind;
  /** Holds a list of values (`maxSelect` > 1). */
  readonly multiple: boolean;
  readonly hidden: boolean;
  readonly required: boolean;
  readonly system: false;
  /** Target collection name, for relation fields. */
  readonly relationTo?: string;
  /** The user's declaration. */
  readonly definition: D;
}

/**
 * Which modifier keys (`f+`, `+f`, `f-`) a type takes: `list` types all three (a single-valued one
 * as a list of at most one), `number` `f+` and `f-`, the others none.
 */
export type ModifierSupport = 'list' | 'number' | 'none';

/** What a value check beyond the declarative constraints may read (the file-name rule). */
export interface ValueContext {
  /** The write sent the field. */
  readonly touched: boolean;
  /** The stored value (the empty value on create). */
  readonly previous: unknown;
  /** Stored names of the files uploaded with this request. */
  readonly uploaded: ReadonlySet<string>;
}

/** A JSON Schema keyword a constraint may fail on, as ajv reports it. */
export type ConstraintKeyword = 'type' | 'enum' | 'maxItems' | 'minLength' | 'maxLength' | 'minimum' | 'maximum' | 'pattern' | 'format';

/**
 * Everything recordbase knows about one field type. Methods, not function properties: the
 * registry holds specs of different declarations side by side, which TypeScript allows for
 * method parameters only.
 */
export interface FieldTypeSpec<D extends TypedFieldDefinition> {
  readonly type: D['type'];
  /** The declaration keys this type adds to FIELD_BASE_KEYS; any other key is refused as a typo. */
  readonly keys: readonly string[];
  /** How a single value is stored; a multi-valued field (isMultiple) is `array` whatever this says. */
  readonly storage: StorageKind;
  readonly modifiers: ModifierSupport;
  /** The error for several values sent to the field while it holds one (after modifiers and uploads too, for list types). */
  readonly tooManyError: FieldError;
  /** Ajv formats the constraints name, by format name (registered once for every type). */
  readonly formats: Readonly<Record<string, (value: string) => boolean>>;
  /** This type's wording of a failed constraint, where it differs from the general one (lib/records/validate-record.ts). */
  readonly messages: Readonly<Partial<Record<ConstraintKeyword, (limit: unknown) => FieldError>>>;
  /** Refuses a setting validation could not enforce, with a SchemaError prefixed by `where`. */
  checkSettings(def: D, where: string): void;
  isMultiple(def: D): boolean;
  /** The collection a relation points at; undefined for other types. */
  relationTarget(def: D): string | undefined;
  /**
   * The one coercion (lib/schema/coerce-value.ts): a client's value as the record value, or the
   * field's validation error. `source` matters where multipart strings carry other types (JSON).
   */
  coerce(field: FieldSchemaOf<D>, raw: unknown, source: InputSource): CoerceResult;
  /** The JSON Schema a non-empty value must satisfy (ajv, compiled once per collection); null: coercion guarantees it all. */
  constraints(field: FieldSchemaOf<D>): JsonSchema | null;
  /** A check ajv cannot express, on the merged value; null when the value passes. */
  checkValue(field: FieldSchemaOf<D>, value: unknown, context: ValueContext): FieldError | null;
  /** The field's OpenAPI schemas, from which the TypeScript declarations are rendered too (lib/openapi/). */
  describe(field: FieldSchemaOf<D>): FieldSchemas;
}

/** What a field type must say; the rest defaults to "nothing special" (see defineFieldType). */
export type FieldTypeOptions<D extends TypedFieldDefinition> = Pick<FieldTypeSpec<D>, 'type' | 'storage' | 'coerce' | 'describe'> &
  Partial<Omit<FieldTypeSpec<D>, 'type' | 'storage' | 'coerce' | 'describe'>>;

/** Several values for a field that holds one, for types that do not word it themselves. */
export const SINGLE_VALUE_ONLY: FieldError = { code: 'validation_invalid_value', message: 'Must be a single value, not a list.' };

/**
 * A field type from what it says, with the defaults of a type that has no settings, no
 * modifiers, no constraints beyond its coercion and a single value.
 */
export function defineFieldType<D extends TypedFieldDefinition>(options: FieldTypeOptions<D>): FieldTypeSpec<D> {
  // Every spec gets the same properties in the same order: one object shape for all types keeps
  // the calls through the registry on the write path monomorphic.
  return {
    type: options.type,
    keys: options.keys ?? [],
    storage: options.storage,
    modifiers: options.modifiers ?? 'none',
    tooManyError: options.tooManyError ?? SINGLE_VALUE_ONLY,
    formats: options.formats ?? {},
    messages: options.messages ?? {},
    checkSettings: options.checkSettings ?? (() => undefined),
    isMultiple: options.isMultiple ?? (() => false),
    relationTarget: options.relationTarget ?? (() => undefined),
    coerce: options.coerce,
    constraints: options.constraints ?? (() => null),
    checkValue: options.checkValue ?? (() => null),
    describe: options.describe,
  };
}
