/**
 * What a field type is made of (after PocketBase's `core/field_*.go`): one object per type in
 * lib/schema/fields/, listed once in lib/schema/field-types.ts, and every part of recordbase that
 * behaves differently per type asks that object. A new field type is one new file and one line
 * in the registry (docs/contributing.md).
 */
import { SchemaError, type FieldError } from '../errors.js';
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
  /** A hint for tools and the dashboard (PocketBase's: the value labels a relation's preview); changes no behaviour. */
  presentable?: boolean;
  /** A text explaining the field, for tools and the dashboard; the OpenAPI document's `description`. Changes no behaviour. */
  help?: string;
  /** PocketBase's stable field id, as its exports carry it: accepted and kept, not used. */
  id?: string;
  /** PocketBase's export marks its own fields `system: true`; recordbase has its own (id, created, updated), so only `false` is accepted. */
  system?: boolean;
  /**
   * Who may read and write this field, per record (DESIGN 24, docs/collections.md "Field rules"):
   * each a rule as a collection's (`null` superusers only, `""` or absent everyone, otherwise a
   * filter evaluated against the record and the same `@request`).
   */
  rules?: FieldRules;
}

/** A field's own rules: `view` (the field is absent where false), `create` and `update` (a write that sends it is refused where false). */
export interface FieldRules {
  view?: string | null;
  create?: string | null;
  update?: string | null;
}

/** The actions a field rule guards, in the order they are checked and reported. */
export const FIELD_RULE_ACTIONS = ['view', 'create', 'update'] as const;

/** One of FIELD_RULE_ACTIONS. */
export type FieldRuleAction = (typeof FIELD_RULE_ACTIONS)[number];

/**
 * A field's rules as checked: only the actions that restrict someone (`null` or an expression);
 * `""` and absent ones are left out, so `field.rules?.view !== undefined` says "the view is guarded".
 */
export type CheckedFieldRules = { readonly [A in FieldRuleAction]?: string | null };

/** The keys of FieldBase and `type`: every declaration may have them besides its type's own. */
export const FIELD_BASE_KEYS: readonly string[] = ['name', 'type', 'required', 'hidden', 'presentable', 'help', 'id', 'system', 'rules'];

/**
 * Checks the settings every declaration may have (FieldBase), with a SchemaError prefixed by
 * `where`: the hints are data for tools, so a wrong type there is a typo to report, not to guess.
 */
export function checkFieldBase(def: FieldBase, where: string): void {
  for (const key of ['required', 'hidden', 'presentable', 'system'] as const) {
    if (def[key] !== undefined && typeof def[key] !== 'boolean') throw new SchemaError(`${where}: ${key} must be true or false`);
  }
  for (const key of ['help', 'id'] as const) {
    if (def[key] !== undefined && typeof def[key] !== 'string') throw new SchemaError(`${where}: ${key} must be a string`);
  }
  if (def.system === true) {
    throw new SchemaError(`${where}: system fields are recordbase's own (id, created, updated); leave PocketBase's system fields out of the definition`);
  }
}

/**
 * A declaration's `rules` as checked (CheckedFieldRules), or undefined when none restricts anyone.
 * Refuses what is not an object of the three actions, each `null` or a string, and a view rule on
 * a hidden field (hidden already keeps it from everyone but superusers). Whether each rule
 * compiles is checked with the collection's rules (lib/records/access-rules.ts).
 */
export function checkFieldRules(def: FieldBase, where: string): CheckedFieldRules | undefined {
  const rules = def.rules;
  if (rules === undefined) return undefined;
  if (typeof rules !== 'object' || rules === null || Array.isArray(rules)) throw new SchemaError(`${where}: rules must be an object ({ view, create, update })`);
  const unknown = Object.keys(rules).find((key) => !(FIELD_RULE_ACTIONS as readonly string[]).includes(key));
  if (unknown !== undefined) throw new SchemaError(`${where}: rules has an unknown key "${unknown}" (a field's rules are view, create and update)`);
  const checked: { [A in FieldRuleAction]?: string | null } = {};
  for (const action of FIELD_RULE_ACTIONS) {
    const rule = rules[action];
    if (rule === undefined || rule === '') continue;
    if (rule !== null && typeof rule !== 'string') throw new SchemaError(`${where}: rule "${action}" must be null, "" or a filter expression`);
    checked[action] = rule;
  }
  if (checked.view !== undefined && def.hidden === true) {
    throw new SchemaError(`${where}: a hidden field is already kept from everyone but superusers; give it a view rule or hidden, not both`);
  }
  return Object.keys(checked).length === 0 ? undefined : checked;
}

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
  /** The field's own rules that restrict someone (checkFieldRules); undefined when none does. */
  readonly rules?: CheckedFieldRules;
  /** Target collection name, for relation fields. */
  readonly relationTo?: string;
  /** The user's declaration, normalised (FieldTypeSpec.normalize): PocketBase's spellings of "unset" left out. */
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

/** What the server knows when it fills a value of its own (fill): one instant per write. */
export interface FillContext {
  /** A create (an update has a stored record). */
  readonly creating: boolean;
  /** The stored value (the empty value on create). */
  readonly previous: unknown;
  /** The write's instant, the same for every field it fills. */
  readonly now: Date;
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
  /** The server alone writes the field (autodate): a client's key for it is ignored, as PocketBase ignores it. */
  readonly serverOnly: boolean;
  /** The error for several values sent to the field while it holds one (after modifiers and uploads too, for list types). */
  readonly tooManyError: FieldError;
  /** Ajv formats the constraints name, by format name (registered once for every type). */
  readonly formats: Readonly<Record<string, (value: string) => boolean>>;
  /** This type's wording of a failed constraint, where it differs from the general one (lib/records/validate-record.ts). */
  readonly messages: Readonly<Partial<Record<ConstraintKeyword, (limit: unknown) => FieldError>>>;
  /** Refuses a setting validation could not enforce, with a SchemaError prefixed by `where`. */
  checkSettings(def: D, where: string): void;
  /**
   * The declaration as the rest of recordbase reads it: PocketBase's exports spell an unset option
   * `null`, and some `0` or `""` (a text's `max: 0`, a file's `maxSize: 0`), which would otherwise
   * read as a limit of nothing. Called once, after checkSettings.
   */
  normalize(def: D): D;
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
  /**
   * The value to store, from the merged one, where the server sets it (an autodate's instant, a
   * text's autogenerated value on create); validation runs on what this returns. Most types
   * return `value`.
   */
  fill(field: FieldSchemaOf<D>, value: unknown, context: FillContext): unknown;
  /** The field's OpenAPI schemas, from which the TypeScript declarations are rendered too (lib/openapi/). */
  describe(field: FieldSchemaOf<D>): FieldSchemas;
}

/** What a field type must say; the rest defaults to "nothing special" (see defineFieldType). */
export type FieldTypeOptions<D extends TypedFieldDefinition> = Pick<FieldTypeSpec<D>, 'type' | 'storage' | 'coerce' | 'describe'> &
  Partial<Omit<FieldTypeSpec<D>, 'type' | 'storage' | 'coerce' | 'describe'>>;

/** Several values for a field that holds one, for types that do not word it themselves. */
export const SINGLE_VALUE_ONLY: FieldError = { code: 'validation_invalid_value', message: 'Must be a single value, not a list.' };

/**
 * A declaration without the options PocketBase writes for "unset": every `null`, and for `keys`
 * also `0`, `""` and `[]` (where PocketBase reads them as "no limit" or "the default"). A new
 * object; the user's stays as written.
 */
export function withoutUnset<D extends TypedFieldDefinition>(def: D, keys: readonly (keyof D & string)[]): D {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(def)) {
    if (value === null) continue;
    const unset = value === 0 || value === '' || (Array.isArray(value) && value.length === 0);
    if (unset && (keys as readonly string[]).includes(key)) continue;
    out[key] = value;
  }
  return out as D;
}

/** The fill of a type the server never sets: the value as merged. */
function keepValue(_field: unknown, value: unknown): unknown {
  return value;
}

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
    serverOnly: options.serverOnly ?? false,
    tooManyError: options.tooManyError ?? SINGLE_VALUE_ONLY,
    formats: options.formats ?? {},
    messages: options.messages ?? {},
    checkSettings: options.checkSettings ?? (() => undefined),
    normalize: options.normalize ?? ((def: D) => withoutUnset(def, [])),
    isMultiple: options.isMultiple ?? (() => false),
    relationTarget: options.relationTarget ?? (() => undefined),
    coerce: options.coerce,
    constraints: options.constraints ?? (() => null),
    checkValue: options.checkValue ?? (() => null),
    fill: options.fill ?? keepValue,
    describe: options.describe,
  };
}
