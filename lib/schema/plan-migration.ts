import { SchemaError } from '../errors.js';
import { quoteIdent as q } from '../sql-fragment.js';
import { isSearchColumnName, shortenIdentifier, type CollectionSchema, type FieldSchema, type IndexSchema, type SearchIndexSchema } from './collection-schema.js';
import { storageKindOfType } from './storage-conversions.js';
import { STORAGE_KINDS } from './storage-kinds.js';

/** What a collection looked like when it was last synced (stored in META_TABLE). */
export interface AppliedCollection {
  id: string;
  fields: { name: string; type: string; multiple: boolean }[];
}

/**
 * The bookkeeping as an applied migration's `up` found it (recorded with the migration): what
 * the release before that migration had synced.
 */
export interface SchemaBeforeMigration {
  readonly migration: string;
  readonly applied: ReadonlyMap<string, AppliedCollection>;
}

/** What the database holds now, as read by readDatabaseState (lib/db/schema/sync-database-schema.ts). */
export interface DatabaseState {
  /** Table name -> column name -> information_schema data_type. */
  tables: Map<string, Map<string, string>>;
  /** Names of the database views among the names asked about (a view collection's, or another's in its way). */
  views?: Set<string>;
  /** Names of existing indexes in the schema. */
  indexes: Set<string>;
  /** Collection name -> last applied definition (empty when META_TABLE is new). */
  applied: Map<string, AppliedCollection>;
  metaTableExists: boolean;
  settingsTableExists: boolean;
  /**
   * The schema before each applied migration that recorded it, newest first: a declared field
   * of the type it had before a migration changed it tells that this code is older than the
   * database, and the refusal says so.
   */
  before?: readonly SchemaBeforeMigration[];
}

/**
 * What the database holds that no declared collection or field names: a newer release's (during
 * a rolling deploy or after a rollback), or a field taken out of the code and not yet dropped.
 * Left alone: never read, written or dropped.
 */
export interface UndeclaredObjects {
  /** Tables of collections recorded in the bookkeeping that no collection declares. */
  tables: string[];
  /** Columns of declared collections' tables that no field declares. */
  columns: { collection: string; column: string }[];
}

/** The DDL to run, in order, the bookkeeping rows to write afterwards, and what is left alone. */
export interface MigrationPlan {
  statements: string[];
  applied: Map<string, AppliedCollection>;
  undeclared: UndeclaredObjects;
}

/** Where a user reads how to change what the additive sync refuses (a migration's helpers). */
const MIGRATION_HINT = 'a migration (docs/collections.md, Changing your schema)';

/** A field's column in DDL: the system fields' own, else its storage kind's (lib/schema/storage-kinds.ts). */
function columnDefinition(field: FieldSchema): string {
  if (field.name === 'id') return 'text PRIMARY KEY';
  if (field.system) return 'timestamptz(3) NOT NULL DEFAULT now()';
  return STORAGE_KINDS[field.storage].columnDdl;
}

interface IndexStatement {
  name: string;
  sql: string;
}

/** An index a base collection gets without declaring it: built with `method` (GIN for a multi-valued column). */
export interface AutomaticIndex extends IndexSchema {
  readonly method: 'btree' | 'gin';
  /** Indexes `lower(column)`: the unique index that makes ids differing by case alone one id. */
  readonly lowercased?: boolean;
}

/**
 * The indexes every base collection gets without asking: `(created, id)` (the default list
 * order), each single relation column, a GIN index on each multi-valued field, and, where the id
 * pattern allows capitals, a unique index on `lower(id)` (a create's check for a case twin is an
 * index lookup, not a scan of the table, and two creates racing with `A1` and `a1` cannot both
 * commit). The schema sync creates them; the dashboard lists them beside the declared ones.
 */
export function automaticIndexes(c: CollectionSchema): AutomaticIndex[] {
  const index = (name: string, columns: string[], method: AutomaticIndex['method'] = 'btree'): AutomaticIndex => ({
    name: shortenIdentifier(name),
    columns: columns.map((column) => ({ column, descending: false })),
    unique: false,
    method,
  });
  const out = [index(`idx_${c.table}_created`, ['created', 'id'])];
  if (!c.recordId.lowercaseOnly) out.push({ ...index(`idx_${c.table}_id_lower`, ['id']), unique: true, lowercased: true });
  for (const f of c.fields) {
    if (f.system) continue;
    if (f.multiple) out.push(index(`idx_${c.table}_${f.column}_gin`, [f.column], 'gin'));
    else if (f.relationTo !== undefined) out.push(index(`idx_${c.table}_${f.column}`, [f.column]));
  }
  return out;
}

/** The indexes every collection gets without asking, then the declared ones. */
function indexesOf(c: CollectionSchema): IndexStatement[] {
  const t = q(c.table);
  const out: IndexStatement[] = automaticIndexes(c).map((index) => ({
    name: index.name,
    sql: `CREATE ${index.unique ? 'UNIQUE ' : ''}INDEX IF NOT EXISTS ${q(index.name)} ON ${t} ${index.method === 'gin' ? 'USING gin ' : ''}(${index.columns.map((col) => (index.lowercased ? `lower(${q(col.column)})` : q(col.column))).join(', ')})`,
  }));
  for (const index of c.indexes) {
    const columns = index.columns.map((col) => `${q(col.column)}${col.descending ? ' DESC' : ''}`).join(', ');
    // Empty text ('') is a field's "no value": a unique index must not make two empty values collide.
    const textColumns = index.columns.filter((col) => c.field(col.column)?.storage === 'text' && col.column !== 'id');
    const where = index.unique && textColumns.length > 0 ? ' WHERE ' + textColumns.map((col) => `${q(col.column)} <> ''`).join(' AND ') : '';
    out.push({ name: index.name, sql: `CREATE ${index.unique ? 'UNIQUE ' : ''}INDEX IF NOT EXISTS ${q(index.name)} ON ${t} (${columns})${where}` });
  }
  return out;
}

/**
 * Characters of each searched field that its search vector covers. A tsvector holds at most 1 MB,
 * and a text of n characters makes at most about 7n bytes of one (lexemes, their entries and
 * positions), so four fields of this many stay below it: a longer text is still stored, and
 * searched over its beginning, instead of failing the write.
 */
export const MAX_SEARCHED_CHARACTERS = 32_768;

/** A search index's generated column in SQL: the name is made by the schema check (`_rb_search$` + hex), so it is quoted here, not by quoteIdent. */
export function searchColumnSql(search: SearchIndexSchema, alias?: string): string {
  if (!isSearchColumnName(search.column)) throw new Error(`recordbase: refusing search column ${JSON.stringify(search.column)}`);
  return `${alias === undefined ? '' : `${q(alias)}.`}"${search.column}"`;
}

/**
 * The expression of a search index's column: each field's words, weighted A, B, C, D in the
 * declared order so that `@rank` puts a match in an earlier field first. The language is one of
 * SEARCH_LANGUAGES, checked at start; every function here is immutable, as a generated column needs.
 */
function searchVectorSql(search: SearchIndexSchema): string {
  const weights = ['A', 'B', 'C', 'D'];
  return search.columns
    .map((column, i) => `setweight(to_tsvector('${search.language}'::regconfig, left(coalesce(${q(column)}, ''), ${MAX_SEARCHED_CHARACTERS})), '${weights[i]}')`)
    .join(' || ');
}

/**
 * The statements that give `c` its search index: the generated column, then its GIN index. A
 * changed declaration has another column name (its hash), so it adds a new column and index and
 * leaves the old ones to the release that still reads them (listed as undeclared, dropped by a
 * migration: docs/search.md). Adding a stored generated column rewrites the table.
 */
function planSearchIndex(c: CollectionSchema, columns: Map<string, string> | undefined, indexes: Set<string>): string[] {
  const search = c.search;
  if (!search) return [];
  const statements: string[] = [];
  if (!columns?.has(search.column)) {
    statements.push(`ALTER TABLE ${q(c.table)} ADD COLUMN IF NOT EXISTS ${searchColumnSql(search)} tsvector GENERATED ALWAYS AS (${searchVectorSql(search)}) STORED`);
  }
  if (!indexes.has(search.index)) statements.push(`CREATE INDEX IF NOT EXISTS ${q(search.index)} ON ${q(c.table)} USING gin (${searchColumnSql(search)})`);
  return statements;
}

/**
 * The bookkeeping row of `c`: its declared fields, then the fields `before` recorded that `c` does
 * not declare but whose column is still there. Older code on a newer database keeps the newer
 * fields' record, so that the newer code, started again, finds it as it left it (a field of the
 * same name declared later with another type is still refused); a column dropped since (a
 * migration's dropField) takes its record with it.
 */
function describeApplied(c: CollectionSchema, before: AppliedCollection | undefined, columns: Map<string, string> | undefined): AppliedCollection {
  const declared = c.fields.filter((f) => !f.system).map((f) => ({ name: f.name, type: f.type, multiple: f.multiple }));
  const kept = (before?.fields ?? []).filter((f) => !c.field(f.name) && columns?.has(f.name) === true);
  return { id: c.id, fields: [...declared, ...kept] };
}

/** Compares field by field: jsonb does not keep key order, so serialised forms may differ. */
function isSameApplied(a: AppliedCollection, b: AppliedCollection): boolean {
  return (
    a.id === b.id &&
    a.fields.length === b.fields.length &&
    a.fields.every((f, i) => f.name === b.fields[i].name && f.type === b.fields[i].type && f.multiple === b.fields[i].multiple)
  );
}

/** One reason a change is refused, naming its collection and field; all are reported together. */
interface Refusal {
  readonly field?: string;
  readonly message: string;
}

/** A recorded field's type as messages write it. */
function describeType(field: { type: string; multiple: boolean }): string {
  return `${field.type}${field.multiple ? ' (multiple)' : ''}`;
}

/**
 * The refusal of a declared field the database holds as another type, when the database held
 * it as declared before an applied migration: this code is older than the database (a rollback
 * of the code alone), and the way out is the newer code or that migration's `down`.
 */
function describeOlderCode(c: CollectionSchema, field: FieldSchema, state: DatabaseState): Refusal | undefined {
  const migration = state.before?.find((earlier) => {
    const was = earlier.applied.get(c.name)?.fields.find((f) => f.name === field.name);
    return was !== undefined && was.type === field.type && was.multiple === field.multiple;
  })?.migration;
  if (migration === undefined) return undefined;
  return {
    field: field.name,
    message:
      `collection "${c.name}", field "${field.name}": this code declares it ${describeType(field)}, as the database held it before migration "${migration}" changed it: ` +
      `this code is older than the database. Deploy the newer release's code, or revert "${migration}" first with \`recordbase migrate down\`, run with a migrations folder that holds it (docs/collections.md, Rolling back a migration)`,
  };
}

function checkAgainstApplied(c: CollectionSchema, before: AppliedCollection, state: DatabaseState): Refusal[] {
  if (before.id !== c.id) {
    return [{ message: `collection "${c.name}": its id changed from "${before.id}" to "${c.id}"; file keys use the id, so recordbase refuses to change it` }];
  }
  const problems: Refusal[] = [];
  for (const old of before.fields) {
    const now = c.field(old.name);
    if (!now) continue; // not declared here: a newer release's field, left alone
    if (now.type !== old.type || now.multiple !== old.multiple) {
      problems.push(
        describeOlderCode(c, now, state) ?? { field: old.name, message: `collection "${c.name}", field "${old.name}": type change from ${describeType(old)} to ${describeType(now)} cannot be applied safely; change it in ${MIGRATION_HINT}` },
      );
    }
  }
  return problems;
}

/**
 * The DDL that completes `c`'s table: the table, or its missing columns. A column of another type
 * than the field's storage kind is refused; a column no field declares is named in `undeclared`
 * and otherwise left alone.
 */
function planTable(c: CollectionSchema, columns: Map<string, string> | undefined, found: { problems: Refusal[]; undeclared: UndeclaredObjects; state: DatabaseState }): string[] {
  const t = q(c.table);
  if (!columns) {
    return [`CREATE TABLE ${t} (${c.fields.map((f) => `${q(f.column)} ${columnDefinition(f)}`).join(', ')})`];
  }
  const statements: string[] = [];
  for (const f of c.fields) {
    const existing = columns.get(f.column);
    if (existing === undefined) {
      statements.push(`ALTER TABLE ${t} ADD COLUMN ${q(f.column)} ${columnDefinition(f)}`);
    } else if (existing !== STORAGE_KINDS[f.storage].dataType) {
      found.problems.push(describeOlderCode(c, f, found.state) ?? {
        field: f.name,
        message: `collection "${c.name}", field "${f.name}": the column is ${existing} but the field needs ${STORAGE_KINDS[f.storage].dataType}; change its type in ${MIGRATION_HINT}, or declare the field as the column is`,
      });
    }
  }
  for (const column of columns.keys()) {
    // The search index's own column is ours, not drift; another one is an older or newer declaration's.
    if (!c.field(column) && column !== c.search?.column) found.undeclared.columns.push({ collection: c.name, column });
  }
  return statements;
}

/** The state of a database recordbase has never touched: what a dry run plans against when there is none yet. */
export function emptyDatabaseState(): DatabaseState {
  return { tables: new Map(), views: new Set(), indexes: new Set(), applied: new Map(), metaTableExists: false, settingsTableExists: false };
}

/**
 * Compares the declared collections with the database and returns the DDL that brings their
 * tables up to date (lib/db/schema/sync-database-schema.ts puts its bookkeeping tables first). Pure:
 * the same inputs give the same plan, which is what `recordbase migrate --dry-run` prints.
 * Tables and columns no declaration names are left alone and listed in `undeclared` (code one
 * release behind the database starts and serves). Throws one SchemaError naming every collection
 * and field it cannot apply without losing data (a declared field whose column or recorded type
 * differs, an id change), so that a refused change is fixed in one go rather than one restart per
 * field.
 */
export function planMigration(collections: readonly CollectionSchema[], state: DatabaseState): MigrationPlan {
  const statements: string[] = [];
  const problems: string[] = [];
  const applied = new Map<string, AppliedCollection>();
  const undeclared: UndeclaredObjects = { tables: [], columns: [] };
  for (const c of collections) {
    // A view collection's database view is made once the tables exist (lib/db/schema/sync-views.ts).
    if (c.type === 'view') {
      if (state.tables.has(c.table)) {
        problems.push(`collection "${c.name}": a view collection needs its name free, but the table "${c.table}" exists; recordbase never drops it (rename or drop it in a migration)`);
      }
      continue;
    }
    if (state.views?.has(c.table)) {
      problems.push(`collection "${c.name}": the database view "${c.table}" holds its name (was it a view collection?); drop the view (DROP VIEW "${c.table}") in a migration first`);
      continue;
    }
    const before = state.applied.get(c.name);
    const refused = before ? checkAgainstApplied(c, before, state) : [];
    const columns = state.tables.get(c.table);
    statements.push(...planTable(c, columns, { problems: refused, undeclared, state }));
    // A type change shows in the bookkeeping and in the column: say it once per field.
    const reported = new Set<string>();
    for (const refusal of refused) {
      if (refusal.field !== undefined && reported.has(refusal.field)) continue;
      if (refusal.field !== undefined) reported.add(refusal.field);
      problems.push(refusal.message);
    }
    for (const index of indexesOf(c)) {
      if (!state.indexes.has(index.name)) statements.push(index.sql);
    }
    statements.push(...planSearchIndex(c, columns, state.indexes));
    const now = describeApplied(c, before, columns);
    if (!before || !isSameApplied(before, now)) applied.set(c.name, now);
  }
  const tables = new Set(collections.map((c) => c.table));
  // A base collection's table is named after it (lib/schema/collection-schema.ts).
  for (const name of state.applied.keys()) if (!tables.has(name) && state.tables.has(name)) undeclared.tables.push(name);
  if (problems.length === 1) throw new SchemaError(problems[0]);
  if (problems.length > 1) throw new SchemaError(`${problems.length} schema changes cannot be applied safely:\n${problems.map((p) => `- ${p}`).join('\n')}`);
  return { statements, applied, undeclared };
}

/** Names one info line lists at most, so that a database far ahead of its code still logs one short line. */
const MAX_NAMED_UNDECLARED = 20;

/**
 * The one line the sync logs about what it left alone, or undefined when there is nothing:
 * an operator reads from it that this code is older than its database (or that a removed field
 * still has its column), and what is not served.
 */
export function describeUndeclared(undeclared: UndeclaredObjects): string | undefined {
  const names = [
    ...undeclared.tables.map((table) => `table "${table}"`),
    ...undeclared.columns.map(({ collection, column }) => `column "${collection}"."${column}"`),
  ];
  if (names.length === 0) return undefined;
  const listed = names.length > MAX_NAMED_UNDECLARED ? [...names.slice(0, MAX_NAMED_UNDECLARED), `and ${names.length - MAX_NAMED_UNDECLARED} more`] : names;
  return `schema: left alone, as no collection or field here declares them (a newer release's, or a removed field's not yet dropped): ${listed.join(', ')}`;
}

/**
 * What would stop a release from starting on the database `state` describes, where `before` is
 * the bookkeeping that release had synced (recorded when the migration now reverted ran its
 * `up`; undefined for a migration applied before recordbase recorded it): `recordbase migrate
 * down`'s check of its result. Whatever `before` is, a recorded field whose column is of another
 * kind than its recorded type is refused by any release (the bookkeeping says one type and the
 * column another: SQL changed the column and nothing recorded it). Against `before`, as the
 * planner would refuse that release's declarations: a field recorded or stored as another type,
 * a collection recorded with another id. A field or collection that is gone is no refusal: the
 * release adds it again, empty. Pure; one message per field.
 */
export function findRollbackProblems(before: ReadonlyMap<string, AppliedCollection> | undefined, state: DatabaseState): string[] {
  const problems = new Map<string, string>();
  const report = (collection: string, field: string, message: string) => {
    const key = `${collection}\u0000${field}`;
    if (!problems.has(key)) problems.set(key, `collection "${collection}"${field === '' ? '' : `, field "${field}"`}: ${message}`);
  };
  const dataTypeOf = (field: { type: string; multiple: boolean }) => {
    const kind = storageKindOfType(field.type, field.multiple);
    return kind === undefined ? undefined : STORAGE_KINDS[kind].dataType;
  };
  for (const [name, applied] of state.applied) {
    const columns = state.tables.get(name);
    for (const field of applied.fields) {
      const column = columns?.get(field.name);
      const needs = dataTypeOf(field);
      if (column === undefined || needs === undefined || column === needs) continue;
      report(
        name,
        field.name,
        `recorded as ${describeType(field)} (a ${needs} column), but its column is ${column}; after SQL that changes a column's type, record the field's type with m.changeFieldType("${name}", "${field.name}", { to: '<type>' }) (it converts nothing when the column is already of that type)`,
      );
    }
  }
  for (const [name, was] of before ?? []) {
    const now = state.applied.get(name);
    const columns = state.tables.get(name);
    if (now !== undefined && now.id !== was.id) report(name, '', `recorded with the id "${now.id}", but the release before had "${was.id}"`);
    for (const field of was.fields) {
      const recorded = now?.fields.find((f) => f.name === field.name);
      const column = columns?.get(field.name);
      const needs = dataTypeOf(field);
      if (recorded !== undefined && (recorded.type !== field.type || recorded.multiple !== field.multiple)) {
        report(name, field.name, `the release before has it as ${describeType(field)}, but it is ${describeType(recorded)}; convert it back in the down: m.changeFieldType("${name}", "${field.name}", { to: '${field.type}' })`);
      } else if (column !== undefined && needs !== undefined && column !== needs) {
        report(name, field.name, `the release before has it as ${describeType(field)} (a ${needs} column), but its column is ${column}; convert it back in the down: m.changeFieldType("${name}", "${field.name}", { to: '${field.type}' })`);
      }
    }
  }
  return [...problems.values()];
}
