import { createHash } from 'node:crypto';
import { SchemaError } from '../errors.js';
import type { CollectionDefinition, FieldDefinition, FieldType, FileFieldDefinition, Rule } from './definitions.js';
import { parseThumbSize } from './thumb-size.js';

/**
 * How a field's value is kept in its column. The query compiler and the record service read
 * this, never the field type, to decide SQL shapes.
 * - `text`: text NOT NULL DEFAULT '' (text, email, url, single select/relation/file)
 * - `array`: jsonb array of strings NOT NULL DEFAULT '[]' (multi-valued select/relation/file)
 * - `bool`: boolean NOT NULL DEFAULT false
 * - `number`: double precision, NULL when empty
 * - `date`: timestamptz(3), NULL when empty
 * - `json`: jsonb, NULL when empty
 */
export type StorageKind = 'text' | 'array' | 'bool' | 'number' | 'date' | 'json';

/** A checked field. `column` is the SQL column name (always quoted in SQL). */
export interface FieldSchema {
  readonly name: string;
  readonly type: FieldType | 'id' | 'autodate';
  readonly column: string;
  readonly storage: StorageKind;
  /** maxSelect > 1 for select, relation and file fields. */
  readonly multiple: boolean;
  readonly hidden: boolean;
  readonly required: boolean;
  /** True for id, created and updated. */
  readonly system: boolean;
  /** Target collection name, for relation fields. */
  readonly relationTo?: string;
  /** The user's declaration (absent for system fields). */
  readonly definition?: FieldDefinition;
}

/** The five rules, each `null` (superusers only), `""` (everyone) or an expression. */
export interface ResolvedRules {
  readonly list: Rule;
  readonly view: Rule;
  readonly create: Rule;
  readonly update: Rule;
  readonly delete: Rule;
}

/** A checked index: columns in order, each ascending or descending. */
export interface IndexSchema {
  readonly name: string;
  readonly columns: { column: string; descending: boolean }[];
  readonly unique: boolean;
}

/** A checked collection. `fields` lists system fields first (id, created, updated). */
export interface CollectionSchema {
  readonly id: string;
  readonly name: string;
  /** SQL table name (the collection name). */
  readonly table: string;
  readonly fields: readonly FieldSchema[];
  readonly rules: ResolvedRules;
  readonly indexes: readonly IndexSchema[];
  /** A field by name, system fields included. */
  field(name: string): FieldSchema | undefined;
}

/** A relation field of another (or the same) collection that points at a given collection. */
export interface BackRelation {
  readonly collection: CollectionSchema;
  readonly field: FieldSchema;
}

/** All collections of one router, looked up by name or id. */
export interface SchemaRegistry {
  readonly collections: readonly CollectionSchema[];
  /** A collection by name or by id. */
  get(nameOrId: string): CollectionSchema | undefined;
  /** Relation fields anywhere that point at `target` (for `x_via_y` and delete cascades). */
  backRelations(target: CollectionSchema): readonly BackRelation[];
}

/** Names every record carries; no declared field may use them. */
export const SYSTEM_FIELD_NAMES = ['id', 'created', 'updated', 'collectionId', 'collectionName', 'expand'] as const;

const COLLECTION_NAME = /^[a-z_][a-z0-9_]*$/;
const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const COLLECTION_ID = /^[A-Za-z0-9_]{1,63}$/;
const FIELD_TYPES: readonly FieldType[] = ['text', 'number', 'bool', 'email', 'url', 'date', 'select', 'json', 'relation', 'file'];
/** Postgres truncates identifiers beyond 63 bytes; refusing them keeps names unambiguous. */
const MAX_IDENTIFIER = 63;

/** The keys each part of a definition may have: anything else is a typo or another product's option. */
const COLLECTION_KEYS = ['name', 'id', 'fields', 'rules', 'indexes'];
const RULE_KEYS = ['list', 'view', 'create', 'update', 'delete'];
const INDEX_KEYS = ['fields', 'unique'];
const FIELD_BASE_KEYS = ['name', 'type', 'required', 'hidden'];
const FIELD_KEYS: Readonly<Record<FieldType, readonly string[]>> = {
  text: ['min', 'max', 'pattern'],
  number: ['min', 'max', 'onlyInt'],
  bool: [],
  email: [],
  url: [],
  date: [],
  select: ['values', 'maxSelect'],
  json: ['maxSize'],
  relation: ['collection', 'maxSelect', 'cascadeDelete'],
  file: ['maxSelect', 'maxSize', 'mimeTypes', 'thumbs', 'protected'],
};

/**
 * Refuses keys a definition part does not know, naming the first and the known ones. PocketBase's
 * `listRule`-style keys get a pointer to `rules`, since that is the likeliest cause.
 */
function checkKnownKeys(where: string, value: object, known: readonly string[]): void {
  const unknown = Object.keys(value).find((key) => !known.includes(key));
  if (unknown === undefined) return;
  const rule = /^(list|view|create|update|delete)Rule$/.exec(unknown);
  const hint = rule ? ` (rules are written as rules: { ${rule[1]}: ... })` : ` (known: ${known.join(', ')})`;
  throw new SchemaError(`${where}: unknown key "${unknown}"${hint}`);
}

/** Refuses a limit that validation could not enforce (a negative length, a non-numeric bound). */
function checkLimit(where: string, options: { name: string; value: unknown; integer: boolean }): void {
  const { value } = options;
  if (value === undefined) return;
  const ok = typeof value === 'number' && Number.isFinite(value) && (!options.integer || (Number.isInteger(value) && value >= 0));
  if (!ok) throw new SchemaError(`${where}: ${options.name} must be ${options.integer ? 'a non-negative integer' : 'a finite number'}`);
}

const SYSTEM_FIELDS: readonly FieldSchema[] = [
  { name: 'id', type: 'id', column: 'id', storage: 'text', multiple: false, hidden: false, required: true, system: true },
  { name: 'created', type: 'autodate', column: 'created', storage: 'date', multiple: false, hidden: false, required: false, system: true },
  { name: 'updated', type: 'autodate', column: 'updated', storage: 'date', multiple: false, hidden: false, required: false, system: true },
];

/** The default collection id: stable for a name, so it survives restarts and redeploys. */
export function deriveCollectionId(name: string): string {
  return 'pbc_' + createHash('sha256').update(name).digest('hex').slice(0, 10);
}

/** True when the field holds several values (maxSelect > 1). */
function isMultiple(def: FieldDefinition): boolean {
  return (def.type === 'select' || def.type === 'relation' || def.type === 'file') && (def.maxSelect ?? 1) > 1;
}

function storageOf(def: FieldDefinition): StorageKind {
  if (isMultiple(def)) return 'array';
  switch (def.type) {
    case 'bool':
      return 'bool';
    case 'number':
      return 'number';
    case 'date':
      return 'date';
    case 'json':
      return 'json';
    default:
      return 'text';
  }
}

function checkField(collection: string, def: FieldDefinition, names: Set<string>): FieldSchema {
  const where = `collection "${collection}", field "${String(def?.name)}"`;
  if (!def || typeof def !== 'object') throw new SchemaError(`collection "${collection}": every field must be an object`);
  if (typeof def.name !== 'string' || !FIELD_NAME.test(def.name) || def.name.length > MAX_IDENTIFIER) {
    throw new SchemaError(`${where}: a field name must match [A-Za-z_][A-Za-z0-9_]* (at most ${MAX_IDENTIFIER} characters)`);
  }
  if ((SYSTEM_FIELD_NAMES as readonly string[]).includes(def.name)) {
    throw new SchemaError(`${where}: "${def.name}" is a system field and cannot be declared`);
  }
  if (names.has(def.name)) throw new SchemaError(`${where}: declared twice`);
  names.add(def.name);
  if (!FIELD_TYPES.includes(def.type)) {
    throw new SchemaError(`${where}: unknown type "${String((def as { type: unknown }).type)}" (one of ${FIELD_TYPES.join(', ')})`);
  }
  checkKnownKeys(where, def, [...FIELD_BASE_KEYS, ...FIELD_KEYS[def.type]]);
  if (def.type === 'text') {
    checkLimit(where, { name: 'min', value: def.min, integer: true });
    checkLimit(where, { name: 'max', value: def.max, integer: true });
    if (def.pattern !== undefined && typeof def.pattern !== 'string') throw new SchemaError(`${where}: pattern must be a string`);
  }
  if (def.type === 'number') {
    checkLimit(where, { name: 'min', value: def.min, integer: false });
    checkLimit(where, { name: 'max', value: def.max, integer: false });
  }
  if (def.type === 'json') checkLimit(where, { name: 'maxSize', value: def.maxSize, integer: true });
  if (def.type === 'select' && (!Array.isArray(def.values) || def.values.length === 0 || def.values.some((v) => typeof v !== 'string'))) {
    throw new SchemaError(`${where}: a select field needs "values", a non-empty array of strings`);
  }
  if (def.type === 'relation' && (typeof def.collection !== 'string' || def.collection === '')) {
    throw new SchemaError(`${where}: a relation field needs "collection", the target collection's name`);
  }
  if ('maxSelect' in def && def.maxSelect !== undefined && (!Number.isInteger(def.maxSelect) || def.maxSelect < 1)) {
    throw new SchemaError(`${where}: maxSelect must be a positive integer`);
  }
  if (def.type === 'file') checkFileOptions(where, def);
  if (def.type === 'text' && def.pattern !== undefined) {
    try {
      new RegExp(def.pattern);
    } catch {
      throw new SchemaError(`${where}: pattern is not a valid regular expression`);
    }
  }
  return {
    name: def.name,
    type: def.type,
    column: def.name,
    storage: storageOf(def),
    multiple: isMultiple(def),
    hidden: def.hidden === true,
    required: def.required === true,
    system: false,
    relationTo: def.type === 'relation' ? def.collection : undefined,
    definition: def,
  };
}

/**
 * A file field's limits, checked at creation: a typo here (`'100X100'`, a negative size) would
 * otherwise only show up later as every upload or thumbnail request failing.
 */
function checkFileOptions(where: string, def: FileFieldDefinition): void {
  if (def.maxSize !== undefined && (!Number.isSafeInteger(def.maxSize) || def.maxSize < 1)) {
    throw new SchemaError(`${where}: maxSize must be a positive integer (bytes)`);
  }
  if (def.mimeTypes !== undefined && (!Array.isArray(def.mimeTypes) || def.mimeTypes.some((m) => typeof m !== 'string' || !/^[a-z0-9.+-]+\/[a-z0-9.+-]+$/i.test(m)))) {
    throw new SchemaError(`${where}: mimeTypes must be an array of MIME types such as "image/png"`);
  }
  if (def.thumbs !== undefined) {
    if (!Array.isArray(def.thumbs)) throw new SchemaError(`${where}: thumbs must be an array of sizes such as "100x100"`);
    for (const size of def.thumbs) {
      const parsed = parseThumbSize(size);
      if ('error' in parsed) throw new SchemaError(`${where}: thumbs entry ${JSON.stringify(size)} is not a thumbnail size: ${parsed.error}`);
    }
  }
}

function checkRules(collection: string, def: CollectionDefinition): ResolvedRules {
  const rules = def.rules ?? {};
  if (typeof rules !== 'object' || rules === null) throw new SchemaError(`collection "${collection}": "rules" must be an object`);
  checkKnownKeys(`collection "${collection}", rules`, rules, RULE_KEYS);
  const out: Record<string, Rule> = {};
  for (const action of ['list', 'view', 'create', 'update', 'delete'] as const) {
    const rule = rules[action];
    if (rule !== undefined && rule !== null && typeof rule !== 'string') {
      throw new SchemaError(`collection "${collection}": rule "${action}" must be null, "" or a filter expression`);
    }
    out[action] = rule ?? null;
  }
  return out as unknown as ResolvedRules;
}

function checkIndexes(def: CollectionDefinition, field: (name: string) => FieldSchema | undefined): IndexSchema[] {
  return (def.indexes ?? []).map((index, i) => {
    if (!index || !Array.isArray(index.fields) || index.fields.length === 0) {
      throw new SchemaError(`collection "${def.name}": index ${i} needs "fields", a non-empty array`);
    }
    checkKnownKeys(`collection "${def.name}", index ${i}`, index, INDEX_KEYS);
    const columns = index.fields.map((raw) => {
      const descending = raw.startsWith('-');
      const name = descending ? raw.slice(1) : raw;
      const f = field(name);
      if (!f) throw new SchemaError(`collection "${def.name}": index ${i} names unknown field "${name}"`);
      return { column: f.column, descending };
    });
    const unique = index.unique === true;
    const name = `idx_${def.name}_${columns.map((c) => c.column).join('_')}${unique ? '_uniq' : ''}`;
    return { name: shortenIdentifier(name), columns, unique };
  });
}

/** Keeps generated identifiers within Postgres's 63 bytes while staying unique per input. */
export function shortenIdentifier(name: string): string {
  if (name.length <= MAX_IDENTIFIER) return name;
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 8);
  return name.slice(0, MAX_IDENTIFIER - 9) + '_' + hash;
}

function checkCollection(def: CollectionDefinition): CollectionSchema {
  if (!def || typeof def !== 'object') throw new SchemaError('every collection must be an object');
  if (typeof def.name !== 'string' || !COLLECTION_NAME.test(def.name) || def.name.length > MAX_IDENTIFIER) {
    throw new SchemaError(`collection "${String(def.name)}": a collection name must match [a-z_][a-z0-9_]* (at most ${MAX_IDENTIFIER} characters)`);
  }
  if (def.name.startsWith('_rb') || def.name.startsWith('_recordbase')) {
    throw new SchemaError(`collection "${def.name}": names starting with "_rb" or "_recordbase" are reserved`);
  }
  checkKnownKeys(`collection "${def.name}"`, def, COLLECTION_KEYS);
  const id = def.id ?? deriveCollectionId(def.name);
  if (typeof id !== 'string' || !COLLECTION_ID.test(id)) {
    throw new SchemaError(`collection "${def.name}": id must match [A-Za-z0-9_]{1,63}`);
  }
  if (!Array.isArray(def.fields)) throw new SchemaError(`collection "${def.name}": "fields" must be an array`);
  const names = new Set<string>();
  const fields = [...SYSTEM_FIELDS, ...def.fields.map((f) => checkField(def.name, f, names))];
  const byName = new Map(fields.map((f) => [f.name, f]));
  const field = (name: string) => byName.get(name);
  return {
    id,
    name: def.name,
    table: def.name,
    fields,
    rules: checkRules(def.name, def),
    indexes: checkIndexes(def, field),
    field,
  };
}

/**
 * Checks the declared collections and builds the registry. Throws SchemaError naming the
 * collection and field on the first problem (bad names, duplicates, dangling relations).
 */
export function buildSchemaRegistry(definitions: readonly CollectionDefinition[]): SchemaRegistry {
  if (!Array.isArray(definitions)) throw new SchemaError('"collections" must be an array of collection definitions');
  const collections = definitions.map(checkCollection);
  const byKey = new Map<string, CollectionSchema>();
  for (const c of collections) {
    for (const key of [c.name, c.id]) {
      const other = byKey.get(key);
      if (other && other !== c) throw new SchemaError(`collection "${c.name}": name or id "${key}" is used by "${other.name}" too`);
      byKey.set(key, c);
    }
  }
  const back = new Map<CollectionSchema, BackRelation[]>();
  for (const c of collections) {
    for (const f of c.fields) {
      if (f.relationTo === undefined) continue;
      const target = byKey.get(f.relationTo);
      if (!target || target.name !== f.relationTo) {
        throw new SchemaError(`collection "${c.name}", field "${f.name}": relation target "${f.relationTo}" is not a declared collection`);
      }
      const list = back.get(target) ?? [];
      list.push({ collection: c, field: f });
      back.set(target, list);
    }
  }
  return {
    collections,
    get: (nameOrId) => byKey.get(nameOrId),
    backRelations: (target) => back.get(target) ?? [],
  };
}
