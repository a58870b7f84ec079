/**
 * The record id (docs/collections.md, "The id field"). The one place that knows its format: the
 * default (15 characters of `[a-z0-9]`), the settings a collection may declare for its `id` field
 * (PocketBase's: `pattern`, `min`, `max`, `autogeneratePattern`), the characters no id may hold
 * whatever those settings say, the generator, the check of a client's id, and the patterns the
 * validator and the OpenAPI document quote.
 *
 * Every id goes into storage keys and paths on disk and in S3, URLs, realtime topics and
 * relation columns. PocketBase lists the characters it forbids in an id (`.`, `/`, `\`, `|`,
 * quotes, `<>:?*%$`, white space and NUL) and the names Windows reserves (`CON`, `NUL`, `COM1`,
 * ...); recordbase is stricter and lists what it allows instead: ASCII letters, digits, `_` and
 * `-` (URL-unreserved, the same on every file system and in every key), none of the reserved
 * names, at most MAX_RECORD_ID_LENGTH characters. That covers the subjects of Clerk, Firebase,
 * Supabase and any uuid; Auth0's `auth0|...` holds a `|` (docs/auth.md says what to do).
 */
import { randomInt } from 'node:crypto';
import { SchemaError, type FieldError } from '../errors.js';
import { compileRandomPattern, RandomPatternError, type RandomPattern } from './compile-random-pattern.js';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
const LENGTH = 15;
/** The alphabet as a regular expression class; kept beside ALPHABET so the two cannot drift. */
const ID_BODY = `[a-z0-9]{${LENGTH}}`;

/** The default record id as a JSON Schema (and ajv) pattern. */
export const RECORD_ID_PATTERN = `^${ID_BODY}$`;
/** A default record id or `""` (a single relation's "none"), as a JSON Schema pattern. */
export const OPTIONAL_RECORD_ID_PATTERN = `^(${ID_BODY})?$`;

/** The longest id any collection may have: one path segment on every file system, with room to spare in an S3 key. */
export const MAX_RECORD_ID_LENGTH = 100;
/** What any id may be, whatever its collection's settings. */
const SAFE_BODY = `[A-Za-z0-9_-]{1,${MAX_RECORD_ID_LENGTH}}`;
/** Any safe id, as a JSON Schema pattern: what a relation may name before the target is asked. */
export const SAFE_RECORD_ID_PATTERN = `^${SAFE_BODY}$`;
/** A safe id or `""`, as a JSON Schema pattern. */
export const OPTIONAL_SAFE_RECORD_ID_PATTERN = `^(${SAFE_BODY})?$`;

const SAFE_ID = new RegExp(SAFE_RECORD_ID_PATTERN);
/** Device names Windows reserves in any case, whatever follows (PocketBase's list): never an id, since an id is a folder's name. */
const RESERVED_NAME = /^(con|prn|aux|nul|com[1-9]|lpt[1-9])$/i;
const DEFAULT_ID = new RegExp(RECORD_ID_PATTERN);
/** PocketBase's default id pattern (its core/field_text.go's defaultLowercaseRecordIdPattern). */
const DEFAULT_PATTERN = '^[a-z0-9]+$';

/** A new default record id from a CSPRNG (about 77 bits), so ids can be neither guessed nor enumerated. */
export function generateRecordId(): string {
  let id = '';
  for (let i = 0; i < LENGTH; i++) id += ALPHABET[randomInt(ALPHABET.length)];
  return id;
}

/** True for an id in the default format (15 characters of `[a-z0-9]`). */
export function isRecordId(value: unknown): value is string {
  return typeof value === 'string' && DEFAULT_ID.test(value);
}

/**
 * True for an id that is safe wherever an id goes (storage keys, paths, URLs, topics): what a
 * path may name, what a relation may hold and what a storage key may carry, in any collection.
 * Whether it matches a collection's own settings is checked on create only: a collection whose
 * settings changed still serves the records it has.
 */
export function isSafeRecordId(value: unknown): value is string {
  return typeof value === 'string' && SAFE_ID.test(value) && !RESERVED_NAME.test(value);
}

/** The `id` field as a collection may declare it among its fields (PocketBase's id field, as its exports write it). */
export interface IdFieldDefinition {
  name: 'id';
  type: 'text';
  /** A regular expression every new id must match (required, as in PocketBase; its default field has `^[a-z0-9]+$`). */
  pattern: string;
  /** Fewest characters; unset or 0: 1. */
  min?: number;
  /** Most characters, at most MAX_RECORD_ID_LENGTH; unset or 0: that. */
  max?: number;
  /** What a create without an id gets (compile-random-pattern.ts); unset or `""`: a create must send an id. */
  autogeneratePattern?: string;
  /** PocketBase's exports write these; only their values there are accepted. */
  primaryKey?: true;
  required?: true;
  system?: true;
  hidden?: false;
  presentable?: false;
  /** PocketBase's field id (`text3208210256`): accepted and ignored. */
  id?: string;
  help?: string;
}

/** The keys the id field may have: PocketBase's export of it, and nothing else. */
const ID_FIELD_KEYS = ['name', 'type', 'pattern', 'min', 'max', 'autogeneratePattern', 'primaryKey', 'required', 'system', 'hidden', 'presentable', 'id', 'help'];
/** The values a PocketBase export writes for the keys that are not settings. */
const FIXED_VALUES: Readonly<Record<string, readonly unknown[]>> = { primaryKey: [true], required: [true], system: [true, false], hidden: [false], presentable: [false] };

/** A collection's checked id settings: what a client's id must be on create, and how one is generated. */
export interface RecordIdFormat {
  readonly pattern: string;
  readonly min: number;
  readonly max: number;
  readonly autogeneratePattern: string;
  /** False when ids may differ by case alone (`A1` and `a1`): creates then refuse an id that differs from a stored one only by case. */
  readonly lowercaseOnly: boolean;
  /** A new id (the autogeneratePattern's, checked as a client's would be); undefined without an autogeneratePattern (a create must then send one). */
  generate(): string | undefined;
  /** Why a client's id cannot be this collection's, or null. */
  check(value: unknown): FieldError | null;
}

/** How many generated samples the settings check tries (PocketBase's number). */
const SAMPLES_CHECKED = 10;
/** How often generate() draws before it gives up on a pattern that rarely yields a safe id. */
const GENERATE_ATTEMPTS = 20;

function compileFormat(settings: { pattern: string; min: number; max: number; autogeneratePattern: string }): RecordIdFormat {
  const pattern = compilePattern(settings.pattern);
  const generator = settings.autogeneratePattern === '' ? undefined : compileRandomPattern(settings.autogeneratePattern);
  const isDefault = settings.pattern === DEFAULT_PATTERN && settings.min === LENGTH && settings.max === LENGTH && settings.autogeneratePattern === ID_BODY;
  const check = (value: unknown): FieldError | null => {
    // The default's one answer, as before ids had settings.
    if (isDefault) return isRecordId(value) ? null : { code: 'validation_invalid_format', message: 'Must be 15 characters of a-z and 0-9.' };
    if (typeof value !== 'string' || !isSafeRecordId(value)) {
      return { code: 'validation_invalid_format', message: `An id is 1 to ${MAX_RECORD_ID_LENGTH} characters of A-Z, a-z, 0-9, _ and -, and not a name Windows reserves.` };
    }
    if (value.length < settings.min) return { code: 'validation_min_text_constraint', message: `Must be at least ${settings.min} character(s).` };
    if (value.length > settings.max) return { code: 'validation_max_text_constraint', message: `Must be no more than ${settings.max} character(s).` };
    return pattern.test(value) ? null : { code: 'validation_invalid_format', message: `Must match ${settings.pattern}.` };
  };
  return {
    ...settings,
    // PocketBase's test: only its default pattern is known to keep ids apart by more than case.
    lowercaseOnly: settings.pattern === DEFAULT_PATTERN,
    check,
    generate() {
      if (isDefault) return generateRecordId();
      if (generator === undefined) return undefined;
      for (let i = 0; i < GENERATE_ATTEMPTS; i++) {
        const id = generator.generate();
        if (check(id) === null) return id;
      }
      throw new Error(`the id autogeneratePattern ${settings.autogeneratePattern} produced no valid id in ${GENERATE_ATTEMPTS} attempts`);
    },
  };
}

/** The default: PocketBase's id field (`^[a-z0-9]+$`, 15 characters, generated from `[a-z0-9]{15}`). */
export const DEFAULT_RECORD_ID_FORMAT: RecordIdFormat = compileFormat({ pattern: DEFAULT_PATTERN, min: LENGTH, max: LENGTH, autogeneratePattern: ID_BODY });

/** An id as a JSON Schema: the default's pattern, or what any stored id is where the collection declares its own (records made before a change of settings keep theirs). */
export function describeStoredRecordId(format: RecordIdFormat): { type: 'string'; pattern: string; maxLength?: number } {
  return format === DEFAULT_RECORD_ID_FORMAT ? { type: 'string', pattern: RECORD_ID_PATTERN } : { type: 'string', pattern: SAFE_RECORD_ID_PATTERN, maxLength: MAX_RECORD_ID_LENGTH };
}

/** What a create may send as `id`, as a JSON Schema: the collection's settings (and, besides them, only letters, digits, `_` and `-`). */
export function describeNewRecordId(format: RecordIdFormat): { type: 'string'; pattern: string; minLength?: number; maxLength?: number; description?: string } {
  if (format === DEFAULT_RECORD_ID_FORMAT) return { type: 'string', pattern: RECORD_ID_PATTERN };
  return { type: 'string', pattern: format.pattern, minLength: format.min, maxLength: format.max, description: 'Only A-Z, a-z, 0-9, _ and - (docs/collections.md, "The id field").' };
}

/** A pattern as validation compiles it: unicode mode where the pattern allows it (as text fields do). */
function compilePattern(pattern: string): RegExp {
  try {
    return new RegExp(pattern, 'u');
  } catch {
    return new RegExp(pattern);
  }
}

/**
 * Checks a declared `id` field (`where` names it) and compiles its settings, as PocketBase checks
 * its primary key: unknown keys, bounds out of range, a pattern that is no regular expression, and
 * an autogeneratePattern whose samples the settings refuse (or that holds a character no id may
 * hold) stop the start rather than every create.
 */
export function checkIdField(where: string, def: IdFieldDefinition): RecordIdFormat {
  const unknown = Object.keys(def).find((key) => !ID_FIELD_KEYS.includes(key));
  if (unknown !== undefined) throw new SchemaError(`${where}: unknown key "${unknown}" (the id field takes ${ID_FIELD_KEYS.join(', ')})`);
  if (def.type !== 'text') throw new SchemaError(`${where}: the id field is of type "text"`);
  for (const [key, allowed] of Object.entries(FIXED_VALUES)) {
    const value = (def as unknown as Record<string, unknown>)[key];
    if (value !== undefined && !allowed.includes(value)) throw new SchemaError(`${where}: ${key} can only be ${allowed.map((v) => JSON.stringify(v)).join(' or ')} on the id field`);
  }
  // Declared, the field is PocketBase's: an unset bound is none (an id is never empty, and at most MAX_RECORD_ID_LENGTH).
  const min = Math.max(readBound(where, 'min', def.min), 1);
  const max = readBound(where, 'max', def.max) || MAX_RECORD_ID_LENGTH;
  if (max > MAX_RECORD_ID_LENGTH) throw new SchemaError(`${where}: max (${max}) is more than ${MAX_RECORD_ID_LENGTH}, the longest id recordbase stores`);
  if (max < min) throw new SchemaError(`${where}: max (${max}) is less than min (${min})`);
  const pattern = def.pattern;
  if (typeof pattern !== 'string' || pattern === '') throw new SchemaError(`${where}: the id field needs "pattern", a regular expression every new id must match (PocketBase requires one too)`);
  try {
    new RegExp(pattern);
  } catch {
    throw new SchemaError(`${where}: pattern is not a valid regular expression`);
  }
  const autogeneratePattern = def.autogeneratePattern ?? '';
  if (typeof autogeneratePattern !== 'string') throw new SchemaError(`${where}: autogeneratePattern must be a string`);
  let format: RecordIdFormat;
  try {
    format = compileFormat({ pattern, min, max, autogeneratePattern });
  } catch (err) {
    if (err instanceof RandomPatternError) throw new SchemaError(`${where}: autogeneratePattern cannot generate values: ${err.message}`);
    throw err;
  }
  if (autogeneratePattern === '') return format;
  // PocketBase's own id field, declared as its exports write it, is the default.
  if (pattern === DEFAULT_PATTERN && min === LENGTH && max === LENGTH && autogeneratePattern === ID_BODY) return DEFAULT_RECORD_ID_FORMAT;
  const generator: RandomPattern = compileRandomPattern(autogeneratePattern);
  for (let i = 0; i < SAMPLES_CHECKED; i++) {
    const sample = generator.generate();
    if (format.check(sample) !== null) {
      throw new SchemaError(`${where}: autogeneratePattern could produce ids the settings refuse, such as ${JSON.stringify(sample.slice(0, 60))} (min ${min}, max ${max}, pattern ${pattern}, and only A-Z, a-z, 0-9, _ and -)`);
    }
  }
  return format;
}

/** A length bound: unset (or `null`, PocketBase's unset) is 0; otherwise a whole number from 0. */
function readBound(where: string, name: string, value: unknown): number {
  if (value === undefined || value === null) return 0;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) throw new SchemaError(`${where}: ${name} must be a whole number from 0`);
  return value;
}
/** Longest id a view's record may be asked for by: its ids are the query's own (`ROW_NUMBER()` gives `"1"`), not record ids. */
const MAX_VIEW_ID_LENGTH = 255;

/**
 * Whether an id may name a record of `collection`, so anything else is a 404 without asking the
 * database: a table's ids are safe ids (whatever its settings were when the record was made); a
 * view's are whatever its query selects as `id`.
 */
export function isReadableId(collection: { readonly type: 'base' | 'view' }, id: string): boolean {
  if (collection.type === 'view') return id !== '' && id.length <= MAX_VIEW_ID_LENGTH;
  return isSafeRecordId(id);
}
