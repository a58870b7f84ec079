import { createHash } from 'node:crypto';
import { SchemaError } from '../errors.js';
import { SEARCH_LANGUAGES, type CollectionDefinition, type FieldDefinition, type Rule, type SearchIndexDefinition, type SearchLanguage, type ViewCollectionDefinition } from './definitions.js';
import { checkCollectionId, checkCollectionName, checkFieldName, isFieldName, MAX_IDENTIFIER } from './collection-names.js';
import { checkFieldBase, checkFieldRules, FIELD_BASE_KEYS } from './field-type-spec.js';
import { FIELD_TYPES, findFieldType, type DeclaredFieldSchema, type FieldSchema, type SystemFieldSchema } from './field-types.js';
import { checkIdField, DEFAULT_RECORD_ID_FORMAT, type IdFieldDefinition, type RecordIdFormat } from './record-id.js';

// The checked model is read from here by every layer above the schema.
export type { StorageKind } from './storage-kinds.js';
export type { DeclaredFieldSchema, FieldSchema, SystemFieldSchema } from './field-types.js';

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

/**
 * A checked search index (docs/search.md): a generated `tsvector` column over the fields, in a
 * GIN index. Both names carry a hash of the language and the fields, so a changed declaration
 * makes a new column and index beside the old ones (lib/schema/plan-migration.ts).
 */
export interface SearchIndexSchema {
  /** The generated column: `_rb_search$` and 8 hex digits, a name no field can have (`$`). */
  readonly column: string;
  /** The GIN index on it (`_rb_search_<collection>_<hash>`). */
  readonly index: string;
  /** The searched fields' columns, most important first. */
  readonly columns: readonly string[];
  readonly language: SearchLanguage;
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
  /** The full-text search index, when one is declared (`indexes: [{ search: [...] }]`). */
  readonly search?: SearchIndexSchema;
  /**
   * `base`: records in a table; `view`: the rows of a database view made from `viewQuery`,
   * read-only, whose fields are known once the schema sync has asked the database
   * (lib/schema/view-schema.ts): until then a view has its `id` only.
   */
  readonly type: 'base' | 'view';
  /** A view's SELECT, as declared. */
  readonly viewQuery?: string;
  /** A view's computed columns shown although its query reads a hidden field (lib/schema/view-schema.ts). */
  readonly shownColumns?: readonly string[];
  /** A field by name, system fields included. */
  field(name: string): FieldSchema | undefined;
  /** What a new record's id must be and how one is made: the declared `id` field's settings, or the default (lib/schema/record-id.ts). */
  readonly recordId: RecordIdFormat;
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


/** The keys each part of a definition may have: anything else is a typo or another product's option. */
const COLLECTION_KEYS = ['name', 'id', 'type', 'fields', 'rules', 'indexes'];
const VIEW_KEYS = ['name', 'id', 'type', 'viewQuery', 'rules', 'shownColumns'];
const RULE_KEYS = ['list', 'view', 'create', 'update', 'delete'];
const INDEX_KEYS = ['fields', 'unique'];

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

const SYSTEM_FIELDS: readonly SystemFieldSchema[] = [
  { name: 'id', type: 'id', column: 'id', storage: 'text', multiple: false, hidden: false, required: true, system: true },
  { name: 'created', type: 'autodate', column: 'created', storage: 'date', multiple: false, hidden: false, required: false, system: true },
  { name: 'updated', type: 'autodate', column: 'updated', storage: 'date', multiple: false, hidden: false, required: false, system: true },
];

/** The default collection id: stable for a name, so it survives restarts and redeploys. */
export function deriveCollectionId(name: string): string {
  return 'pbc_' + createHash('sha256').update(name).digest('hex').slice(0, 10);
}

/**
 * Checks one declared field: its name, its type, its keys, then its type's own settings
 * (lib/schema/fields/), and builds the checked field from what the type says of it.
 */
function checkField(collection: string, def: FieldDefinition, names: Set<string>): DeclaredFieldSchema {
  const where = `collection "${collection}", field "${String(def?.name)}"`;
  if (!def || typeof def !== 'object') throw new SchemaError(`collection "${collection}": every field must be an object`);
  checkFieldName(where, def.name);
  if ((SYSTEM_FIELD_NAMES as readonly string[]).includes(def.name)) {
    throw new SchemaError(`${where}: "${def.name}" is a system field and cannot be declared`);
  }
  if (names.has(def.name)) throw new SchemaError(`${where}: declared twice`);
  names.add(def.name);
  const spec = findFieldType(def.type);
  if (!spec) {
    throw new SchemaError(`${where}: unknown type "${String((def as { type: unknown }).type)}" (one of ${FIELD_TYPES.map((t) => t.type).join(', ')})`);
  }
  checkKnownKeys(where, def, [...FIELD_BASE_KEYS, ...spec.keys]);
  checkFieldBase(def, where);
  const rules = checkFieldRules(def, where);
  spec.checkSettings(def, where);
  const settings = spec.normalize(def);
  const multiple = spec.isMultiple(settings);
  // The spec came from def.type, so the field built here is of def's own type.
  return {
    name: def.name,
    type: def.type,
    column: def.name,
    storage: multiple ? 'array' : spec.storage,
    multiple,
    hidden: def.hidden === true,
    required: def.required === true,
    system: false,
    ...(rules === undefined ? {} : { rules }),
    relationTo: spec.relationTarget(settings),
    definition: settings,
  } as DeclaredFieldSchema;
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
    if (def.type === 'view' && action !== 'list' && action !== 'view' && rule !== undefined && rule !== null) {
      throw new SchemaError(`collection "${collection}": a view collection is read-only; its "${action}" rule can only be null`);
    }
    out[action] = rule ?? null;
  }
  return out as unknown as ResolvedRules;
}

const SEARCH_COLUMN = /^_rb_search\$[0-9a-f]{8}$/;

/** Whether `name` is a search index's generated column (of this declaration or another): never a field. */
export function isSearchColumnName(name: string): boolean {
  return SEARCH_COLUMN.test(name);
}

/** The GIN index of the search column `column` on `table`: the table's name and the column's hash. */
export function searchIndexName(table: string, column: string): string {
  return shortenIdentifier(`_rb_search_${table}_${column.slice(column.indexOf('$') + 1)}`);
}

/** The field types a search index may cover: text a reader sees as words. */
export const SEARCHABLE_FIELD_TYPES: readonly string[] = ['text', 'editor', 'email', 'url'];
/** Most fields one search index covers: one per ts_rank weight (A to D). */
export const MAX_SEARCH_FIELDS = 4;
const SEARCH_INDEX_KEYS = ['search', 'language'];

/**
 * Checks the one search index a collection may have. A field that is hidden or has a view rule is
 * refused: a match (or its rank) would tell a caller what the field holds.
 */
function checkSearchIndex(def: CollectionDefinition, index: SearchIndexDefinition, i: number, field: (name: string) => FieldSchema | undefined): SearchIndexSchema {
  const where = `collection "${def.name}", index ${i}`;
  checkKnownKeys(where, index, SEARCH_INDEX_KEYS);
  const names: unknown = index.search;
  if (!Array.isArray(names) || names.length === 0 || names.length > MAX_SEARCH_FIELDS || names.some((n) => typeof n !== 'string')) {
    throw new SchemaError(`${where}: "search" needs 1 to ${MAX_SEARCH_FIELDS} field names`);
  }
  const language = index.language ?? 'simple';
  if (!(SEARCH_LANGUAGES as readonly unknown[]).includes(language)) {
    throw new SchemaError(`${where}: unknown search language ${JSON.stringify(String(language)).slice(0, 60)} (one of ${SEARCH_LANGUAGES.join(', ')})`);
  }
  const columns = (names as string[]).map((name) => {
    const f = field(name);
    if (!f) throw new SchemaError(`${where}: search names unknown field "${name}"`);
    if (!SEARCHABLE_FIELD_TYPES.includes(f.type) || f.multiple) {
      throw new SchemaError(`${where}: search field "${name}" is ${f.type}; only ${SEARCHABLE_FIELD_TYPES.join(', ')} fields can be searched`);
    }
    if (f.hidden || f.rules?.view !== undefined) {
      throw new SchemaError(`${where}: search field "${name}" is ${f.hidden ? 'hidden' : 'guarded by a view rule'}; its matches would tell callers what it holds, so it cannot be searched`);
    }
    return f.column;
  });
  if (new Set(columns).size !== columns.length) throw new SchemaError(`${where}: search names a field twice`);
  const hash = createHash('sha256').update(`${language}\u0000${columns.join(',')}`).digest('hex').slice(0, 8);
  const column = `_rb_search$${hash}`;
  return { column, index: searchIndexName(def.name, column), columns, language };
}

/** The declared column indexes, and the search index (at most one). */
function checkIndexes(def: CollectionDefinition, field: (name: string) => FieldSchema | undefined): { indexes: IndexSchema[]; search?: SearchIndexSchema } {
  let search: SearchIndexSchema | undefined;
  const declared = (def.indexes ?? []).map((index, i) => {
    if (index && typeof index === 'object' && index.search !== undefined) {
      if (search) throw new SchemaError(`collection "${def.name}": index ${i} is a second search index; a collection has at most one`);
      search = checkSearchIndex(def, index, i, field);
      return undefined;
    }
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
  const indexes = declared.filter((index) => index !== undefined);
  return search ? { indexes, search } : { indexes };
}

/** Keeps generated identifiers within Postgres's 63 bytes while staying unique per input. */
export function shortenIdentifier(name: string): string {
  if (name.length <= MAX_IDENTIFIER) return name;
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 8);
  return name.slice(0, MAX_IDENTIFIER - 9) + '_' + hash;
}

/**
 * Checks one declared collection, as PocketBase's validator does: what every collection shares
 * first, whatever its type (an object, its name by lib/schema/collection-names.ts, its type, its
 * keys, its id), then what its type asks.
 */
function checkCollection(def: CollectionDefinition): CollectionSchema {
  if (!def || typeof def !== 'object') throw new SchemaError('every collection must be an object');
  const where = `collection "${String(def.name)}"`;
  checkCollectionName(where, def.name);
  const type = def.type ?? 'base';
  if (type !== 'base' && type !== 'view') throw new SchemaError(`${where}: unknown type "${String(type)}" (base, the default, or view)`);
  if (type === 'view') {
    // Keys a base collection has, refused with what to do instead of as unknown ones.
    if ((def as { fields?: unknown }).fields !== undefined) throw new SchemaError(`${where}: a view collection's fields are inferred from its viewQuery; remove "fields"`);
    if ((def as { indexes?: unknown }).indexes !== undefined) throw new SchemaError(`${where}: a view collection cannot have indexes`);
  }
  checkKnownKeys(where, def, type === 'view' ? VIEW_KEYS : COLLECTION_KEYS);
  const id = def.id ?? deriveCollectionId(def.name);
  checkCollectionId(where, id);
  return type === 'view' ? checkViewCollection(def as ViewCollectionDefinition, id) : checkBaseCollection(def, id);
}

/** A base collection's own part: its fields (system fields first), rules and indexes. */
function checkBaseCollection(def: CollectionDefinition, id: string): CollectionSchema {
  if (def.fields !== undefined && !Array.isArray(def.fields)) throw new SchemaError(`collection "${def.name}": "fields" must be an array`);
  const names = new Set<string>();
  const declared = def.fields ?? [];
  const idFields = declared.filter(isIdField) as unknown[] as IdFieldDefinition[];
  if (idFields.length > 1) throw new SchemaError(`collection "${def.name}": the id field is declared twice`);
  const recordId = idFields.length === 1 ? checkIdField(`collection "${def.name}", field "id"`, idFields[0]) : DEFAULT_RECORD_ID_FORMAT;
  const fields = [...SYSTEM_FIELDS, ...declared.filter((f) => !isIdField(f)).map((f) => checkField(def.name, f, names))];
  const field = lookupFields(fields);
  return { id, name: def.name, table: def.name, type: 'base', fields, rules: checkRules(def.name, def), ...checkIndexes(def, field), field, recordId };
}

/** The one system field a collection may declare: `id`, with its settings (docs/collections.md, "The id field"). */
function isIdField(def: unknown): boolean {
  return typeof def === 'object' && def !== null && (def as { name?: unknown }).name === 'id';
}

function lookupFields(fields: readonly FieldSchema[]): (name: string) => FieldSchema | undefined {
  const byName = new Map(fields.map((f) => [f.name, f]));
  return (name) => byName.get(name);
}

/**
 * A view collection's own part: its query, shown columns and rules. Its fields come from the
 * database once the view exists (buildViewCollection); until then it has its `id`, which every
 * view must select.
 */
function checkViewCollection(def: ViewCollectionDefinition, id: string): CollectionSchema {
  const where = `collection "${def.name}"`;
  if (typeof def.viewQuery !== 'string' || def.viewQuery.trim() === '') {
    throw new SchemaError(`${where}: a view collection needs "viewQuery", a SELECT statement`);
  }
  const shown: unknown = def.shownColumns;
  if (shown !== undefined && (!Array.isArray(shown) || shown.some((name) => !isFieldName(name)))) {
    throw new SchemaError(`${where}: shownColumns must be an array of the viewQuery's column names`);
  }
  const fields = [SYSTEM_FIELDS[0]];
  const rules = checkRules(def.name, def);
  return { id, name: def.name, table: def.name, type: 'view', viewQuery: def.viewQuery, ...(shown !== undefined ? { shownColumns: [...(shown as string[])] } : {}), fields, rules, indexes: [], field: lookupFields(fields), recordId: DEFAULT_RECORD_ID_FORMAT };
}

/** What the schema sync learnt of a view's columns (lib/schema/view-schema.ts): its fields, and the system dates it selects. */
export interface InferredViewFields {
  /** The columns besides `id`, `created` and `updated`, as declared fields would be written. */
  readonly fields: readonly FieldDefinition[];
  /** `created` and `updated`, where the query selects them as dates: system fields, as on a table. */
  readonly systemDates: readonly ('created' | 'updated')[];
}

/**
 * A view collection with its inferred fields: `id`, the system dates it selects, then the others,
 * each checked as a declared field is (a clone of a relation still needs a declared target).
 */
export function buildViewCollection(view: CollectionSchema, inferred: InferredViewFields): CollectionSchema {
  const names = new Set<string>();
  const system = SYSTEM_FIELDS.filter((f) => f.name === 'id' || (inferred.systemDates as readonly string[]).includes(f.name));
  const fields = [...system, ...inferred.fields.map((f) => checkField(view.name, f, names))];
  return { ...view, fields, field: lookupFields(fields) };
}

/**
 * Checks the declared collections and builds the registry. Throws SchemaError naming the
 * collection and field on the first problem (bad names, duplicates, dangling relations).
 */
export function buildSchemaRegistry(definitions: readonly CollectionDefinition[]): SchemaRegistry {
  if (!Array.isArray(definitions)) throw new SchemaError('"collections" must be an array of collection definitions');
  return assembleSchemaRegistry(definitions.map(checkCollection));
}

/**
 * The registry of checked collections: lookups by name and id (each unique), and the back-relations
 * of every relation field, whose targets must be among them. Also what completes the views
 * (lib/schema/view-schema.ts) once their fields are known.
 */
export function assembleSchemaRegistry(collections: readonly CollectionSchema[]): SchemaRegistry {
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
