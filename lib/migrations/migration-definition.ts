/**
 * What a migration is (docs/collections.md "Changing your schema"): a named `up`, and maybe a
 * `down`, given to the router as a folder of modules or as an array. Types and the option's
 * check only, so that lib/options.ts can name them without loading the runner.
 */
import type { CollectionApi } from '../records/records-api.js';
import type { FieldDefinition, FieldType } from '../schema/definitions.js';

/** A field's definition without its name: a type and its settings (`{ type: 'select', values: ['a', 'b'] }`). */
export type FieldTypeDefinition = FieldDefinition extends infer D ? (D extends { name: string } ? Omit<D, 'name'> : never) : never;

/** Options of `m.changeFieldType`. */
export interface ChangeFieldTypeOptions {
  /**
   * The type to convert to: a type's name (`'number'`), or a definition without its name where the
   * type needs settings (`{ type: 'select', values: ['a', 'b'] }`). Absent: the type the field is
   * declared with now. A `down` must say it: the declarations are the newer release's, not the
   * ones the `down` returns to. Where the column is already of that type's kind (your `m.sql`
   * changed it), nothing is converted: the values are checked and the type is recorded.
   */
  to?: FieldType | FieldTypeDefinition;
  /**
   * The column's new value, an SQL expression over the row's columns (`"priority"::text`,
   * `CASE WHEN "done" THEN 1 ELSE 0 END`). Absent: recordbase's own conversion between the two
   * storage kinds, where there is one (docs/collections.md lists them).
   */
  using?: string;
  /**
   * What to do with converted values the field's type refuses (a `javascript:` text converted to
   * a url, a select's unknown value): `'fail'` (the default) fails the migration, counting them
   * and naming a record; `'clear'` sets each to the field's empty value, and the report counts them.
   */
  invalid?: 'fail' | 'clear';
}

/** What `m.changeFieldType` did beyond the conversion. */
export interface ChangeFieldTypeReport {
  /** Records whose value the field's type refused and `invalid: 'clear'` emptied (0 otherwise). */
  cleared: number;
}

/**
 * The helpers a migration gets, all inside its transaction: each keeps recordbase's records of
 * the collections (the internal `_rb_collections` table, the indexes it named) in step, so nobody
 * edits internal tables by hand.
 */
export interface MigrationContext {
  /** The migration's name. */
  readonly name: string;
  /** Renames a collection's table; its records, files (kept under the collection's id), indexes and realtime capture follow. */
  renameCollection(from: string, to: string): Promise<void>;
  /** Renames a field's column; its values and indexes follow. */
  renameField(collection: string, from: string, to: string): Promise<void>;
  /**
   * Converts a field's column to the type `to` names, or in an `up` without it to the type the
   * field is now declared with; every value is then checked as that type checks a write, and the
   * type is recorded.
   */
  changeFieldType(collection: string, field: string, options?: ChangeFieldTypeOptions): Promise<ChangeFieldTypeReport>;
  /**
   * Adds a field's column (empty in every record) as `field` defines it, and records it: what
   * undoes `dropField` in a `down` (its values stay gone). The column must not exist.
   */
  addField(collection: string, field: FieldDefinition): Promise<void>;
  /** Drops a field's column and its values. In an `up`, the field must no longer be declared. */
  dropField(collection: string, field: string): Promise<void>;
  /** Drops a collection's table and its records (its stored files stay). In an `up`, the collection must no longer be declared. */
  dropCollection(name: string): Promise<void>;
  /**
   * Runs your own SQL (values as `?` bindings) and answers its rows. Afterwards the record of
   * collections and fields forgets what it dropped; a column whose type it changed is recorded
   * with `changeFieldType(collection, field, { to })`, which then converts nothing.
   */
  sql(text: string, bindings?: readonly unknown[]): Promise<Record<string, unknown>[]>;
  /**
   * The server API on one collection as declared now, as a superuser unless a call says `as`
   * (rules bypassed, validation applied), in the migration's transaction. Hooks do not run.
   * Its first call adds the columns and tables the declarations add, so that new fields can be filled.
   */
  records(collection: string): CollectionApi;
}

/** A migration's module: what a file of the migrations folder default-exports. */
export interface MigrationModule {
  /** Its changes; what it resolves with is ignored (so `(m) => m.changeFieldType(...)` is one). */
  up(m: MigrationContext): Promise<unknown> | void;
  /**
   * Undoes `up` (`recordbase migrate down`), with helpers that name their target (`changeFieldType`'s
   * `to`, `addField`); the result is checked against the schema as `up` found it, and a `down` that
   * would leave a schema the release before cannot start on fails, nothing of it applied.
   */
  down?(m: MigrationContext): Promise<unknown> | void;
}

/** A migration given in an array: a module with its name (migrations apply in name order). */
export interface Migration extends MigrationModule {
  name: string;
}

/** The `migrations` option: a folder of `.js`, `.mjs` or `.ts` modules (relative to the working directory), or an array. */
export type MigrationsOption = string | readonly Migration[];

/** What a name may hold: it is a file name too, and is printed and stored as it is. */
const MIGRATION_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$/;

/** Checks a migration's name and functions; `where` says which one in messages. */
export function checkMigrationModule(where: string, value: unknown): MigrationModule {
  const candidate = value as Partial<MigrationModule> | null;
  if (typeof candidate !== 'object' || candidate === null || typeof candidate.up !== 'function') throw new TypeError(`${where} must have an up(m) function`);
  if (candidate.down !== undefined && typeof candidate.down !== 'function') throw new TypeError(`${where}: down must be a function when given`);
  return candidate as MigrationModule;
}

/** Checks a migration's name: letters, digits, `_`, `.` and `-`, at most 200 characters. */
export function checkMigrationName(where: string, name: unknown): string {
  if (typeof name !== 'string' || !MIGRATION_NAME.test(name)) throw new TypeError(`${where}: a migration name must match [A-Za-z0-9][A-Za-z0-9_.-]* (at most 200 characters), got ${JSON.stringify(name)}`);
  return name;
}

/** The `migrations` option's check: a non-empty path, or an array of uniquely named migrations. */
export function checkMigrationsOption(path: string, value: unknown): MigrationsOption {
  if (typeof value === 'string') {
    if (value.trim() === '') throw new TypeError(`${path} must be a folder path or an array of migrations`);
    return value;
  }
  if (!Array.isArray(value)) throw new TypeError(`${path} must be a folder path or an array of { name, up, down? }`);
  const names = new Set<string>();
  value.forEach((migration: unknown, i) => {
    const name = checkMigrationName(`${path}[${i}]`, (migration as { name?: unknown } | null)?.name);
    checkMigrationModule(`${path}[${i}] ("${name}")`, migration);
    if (names.has(name)) throw new TypeError(`${path}: two migrations are named "${name}"`);
    names.add(name);
  });
  return value as readonly Migration[];
}
