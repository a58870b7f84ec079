import {
  addCollectionColumn,
  addDeclaredTables,
  changeColumnKind,
  countUnfitValues,
  dropCollectionColumn,
  dropCollectionRelation,
  readAppliedCollections,
  readTableShape,
  reconcileAppliedCollections,
  renameCollectionColumn,
  recordAppliedField,
  renameCollectionTable,
  type TableShape,
} from '../db/schema/reshape-collections.js';
import { runHostSql } from '../db/statements/run-host-sql.js';
import type { StatementRunner } from '../db/statements/statement-runner.js';
import { SchemaError } from '../errors.js';
import type { CollectionSchema, DeclaredFieldSchema } from '../schema/collection-schema.js';
import { buildSchemaRegistry, SYSTEM_FIELD_NAMES } from '../schema/collection-schema.js';
import { isCollectionName, isFieldName, isReservedName, RESERVED_NAME_PREFIXES } from '../schema/collection-names.js';
import type { CollectionDefinition, FieldDefinition } from '../schema/definitions.js';
import { findStorageConversion, storageKindOfDataType, storageKindOfType } from '../schema/storage-conversions.js';
import { STORAGE_KINDS } from '../schema/storage-kinds.js';
import { quoteIdent as q } from '../sql-fragment.js';
import { checkConvertedValues } from './check-converted-values.js';
import type { MigrationContext } from './migration-definition.js';
import { createTransactionRecords, type MigrationServices } from './transaction-records.js';


/** One migration's context, and what ends it once its transaction is over. */
export interface MigrationRun {
  readonly context: MigrationContext;
  finish(outcome: 'committed' | 'rolled-back'): Promise<void>;
}

/**
 * The helpers of one migration (MigrationContext), each inside `trx`. The declared collections
 * are the code's now: the migration runs against the database as the previous release left it,
 * before the schema sync brings it up to the declarations.
 *
 * On a database recordbase has never synced (no collection recorded), the helpers that reshape
 * existing tables find nothing to reshape and do nothing (an info line says so): the sync then
 * makes every collection as declared. Elsewhere a helper naming what is not there is an error,
 * so a typo never passes for done. In a `down` the declarations are still the newer release's:
 * `changeFieldType` must name its target there, and `dropField`/`dropCollection` may drop what
 * they declare (no sync follows a `down`).
 */
export async function startMigration(trx: StatementRunner, options: { name: string; services: MigrationServices; direction: 'up' | 'down' }): Promise<MigrationRun> {
  const { name, services, direction } = options;
  const declared = services.compiled.registry.collections;
  const fresh = (await readAppliedCollections(trx)).size === 0;
  const records = createTransactionRecords(trx, { services, prepare: () => addDeclaredTables(trx, declared) });
  const declaredCollection = (collection: string): CollectionSchema | undefined => declared.find((c) => c.name === collection);

  /** The table a helper works on; undefined when there is nothing to do on a fresh database. */
  async function requireTable(helper: string, collection: string): Promise<TableShape | undefined> {
    checkName(helper, 'collection', collection);
    const shape = await readTableShape(trx, collection);
    if (shape?.kind === 'view') throw new SchemaError(`${helper}: "${collection}" is a view collection, which holds no records of its own; change its query in the declaration instead`);
    if (shape !== undefined) return shape;
    if (fresh) {
      services.logger.info(`migration "${name}": ${helper} has nothing to do: the database has no collections yet (the schema sync makes them as declared)`);
      return undefined;
    }
    throw new SchemaError(`${helper}: there is no collection "${collection}" in the database`);
  }

  function requireColumn(helper: string, shape: TableShape, collection: string, field: string): void {
    checkName(helper, 'field', field);
    if ((SYSTEM_FIELD_NAMES as readonly string[]).includes(field)) throw new SchemaError(`${helper}: "${field}" is a system field, which no migration changes`);
    if (!shape.columns.has(field)) throw new SchemaError(`${helper}: collection "${collection}" has no field "${field}" in the database`);
  }

  /** The declared collection and field `changeFieldType` converts to when not told `to`. */
  function requireDeclared(helper: string, collection: string, field: string): { collection: CollectionSchema; field: DeclaredFieldSchema } {
    const schema = declaredCollection(collection);
    const target = schema?.field(field);
    if (schema === undefined || target === undefined || target.system) throw new SchemaError(`${helper}: the field is not declared; declare it with its new type, or name the type ({ to: 'number' })`);
    return { collection: schema, field: target };
  }

  const context: MigrationContext = {
    name,
    async renameCollection(from, to) {
      const helper = `renameCollection("${from}", "${to}")`;
      checkName(helper, 'collection', to);
      if ((await requireTable(helper, from)) === undefined) return;
      if ((await readTableShape(trx, to)) !== undefined) throw new SchemaError(`${helper}: "${to}" already exists in the database`);
      const recorded = (await readAppliedCollections(trx)).get(from);
      const now = declaredCollection(to);
      if (recorded !== undefined && now !== undefined && now.id !== recorded.id) {
        throw new SchemaError(
          `${helper}: the collection keeps its id "${recorded.id}" (its stored files are keyed by it), but "${to}" is declared with the id "${now.id}"; declare id: "${recorded.id}" on it`,
        );
      }
      await renameCollectionTable(trx, from, to);
    },

    async renameField(collection, from, to) {
      const helper = `renameField("${collection}", "${from}", "${to}")`;
      const shape = await requireTable(helper, collection);
      if (shape === undefined) return;
      requireColumn(helper, shape, collection, from);
      checkName(helper, 'field', to);
      if ((SYSTEM_FIELD_NAMES as readonly string[]).includes(to) || shape.columns.has(to)) throw new SchemaError(`${helper}: collection "${collection}" already has a column "${to}"`);
      await renameCollectionColumn(trx, { table: collection, from, to });
    },

    async changeFieldType(collection, field, options = {}) {
      const helper = `changeFieldType("${collection}", "${field}")`;
      const invalid = options.invalid ?? 'fail';
      if (invalid !== 'fail' && invalid !== 'clear') throw new SchemaError(`${helper}: invalid must be 'fail' or 'clear'`);
      if (options.to === undefined && direction === 'down') {
        throw new SchemaError(`${helper}: in a down, name the type to convert back to ({ to: 'number' }, or { to: { type: 'select', values: [...] } }): the declarations are the newer release's, not the ones the down returns to`);
      }
      const shape = await requireTable(helper, collection);
      if (shape === undefined) return { cleared: 0 };
      requireColumn(helper, shape, collection, field);
      const recorded = (await readAppliedCollections(trx)).get(collection);
      const was = recorded?.fields.find((f) => f.name === field);
      const { collection: schema, field: target } = options.to !== undefined ? compileField(helper, { collection, recordedId: recorded?.id, field, definition: options.to }) : requireDeclared(helper, collection, field);
      const column = shape.columns.get(field)!;
      // The recorded type, unless SQL changed the column since: then the column says what it holds.
      const recordedKind = was === undefined ? undefined : storageKindOfType(was.type, was.multiple);
      const from =
        recordedKind !== undefined && STORAGE_KINDS[recordedKind].dataType === column
          ? recordedKind
          : STORAGE_KINDS[target.storage].dataType === column
            ? target.storage
            : storageKindOfDataType(column);
      let using = options.using;
      if (using !== undefined && (typeof using !== 'string' || using.trim() === '')) throw new SchemaError(`${helper}: using must be an SQL expression`);
      if (using === undefined) {
        const conversion = from === undefined || from === target.storage ? undefined : findStorageConversion(from, target.storage);
        if (from !== target.storage && conversion === undefined) {
          throw new SchemaError(`${helper}: recordbase has no conversion from ${from ?? `a ${column} column`} to ${target.storage} (${target.type}); pass { using: 'an SQL expression' }`);
        }
        if (conversion?.fits) {
          const unfit = await countUnfitValues(trx, collection, conversion.fits(q(field)));
          if (unfit.count > 0) {
            throw new SchemaError(
              `${helper}: ${unfit.count} record(s) hold values that do not convert from ${from} to ${target.storage} without loss (record "${unfit.example}" among them); pass { using } to say how`,
            );
          }
        }
        using = conversion?.using(q(field));
      }
      const convert = using;
      // Under a savepoint: a migration that catches the refusal goes on from where it was before this helper.
      const refused = await trx.transaction(async () => {
        if (convert !== undefined) await changeColumnKind(trx, { table: collection, column: field, to: target.storage, using: convert });
        const found = await checkConvertedValues(trx, { collection: schema, field: target, storedNames: was?.type === 'file', clear: invalid === 'clear' });
        if (found.count > 0 && invalid === 'fail') {
          throw new SchemaError(
            `${helper}: ${found.count} record(s) hold values a field of type ${target.type} refuses (record "${found.example!.id}" among them: ${found.example!.message}); correct them first (m.sql or m.records), or pass { invalid: 'clear' } to empty them`,
          );
        }
        return found;
      });
      await recordAppliedField(trx, collection, { name: field, type: target.type, multiple: target.multiple });
      if (refused.cleared > 0) {
        services.logger.info(`migration "${name}": ${helper} cleared ${refused.cleared} value(s) a field of type ${target.type} refuses (record "${refused.example!.id}" among them: ${refused.example!.message})`);
      }
      return { cleared: refused.cleared };
    },

    async addField(collection, definition) {
      const fieldName: unknown = (definition as { name?: unknown } | null)?.name;
      const helper = `addField("${collection}", ${JSON.stringify(fieldName) ?? 'undefined'})`;
      if (definition === null || typeof definition !== 'object' || Array.isArray(definition)) throw new SchemaError(`${helper}: the field must be a definition ({ name: 'obsolete', type: 'text' })`);
      checkName(helper, 'field', fieldName);
      const field = fieldName as string;
      if ((SYSTEM_FIELD_NAMES as readonly string[]).includes(field)) throw new SchemaError(`${helper}: "${field}" is a system field, which no migration changes`);
      const shape = await requireTable(helper, collection);
      if (shape === undefined) return;
      if (shape.columns.has(field)) throw new SchemaError(`${helper}: collection "${collection}" already has a column "${field}"`);
      const recorded = (await readAppliedCollections(trx)).get(collection);
      const { field: added } = compileField(helper, { collection, recordedId: recorded?.id, field, definition });
      await addCollectionColumn(trx, { table: collection, column: field, kind: added.storage });
      await recordAppliedField(trx, collection, { name: field, type: added.type, multiple: added.multiple });
    },

    async dropField(collection, field) {
      const helper = `dropField("${collection}", "${field}")`;
      const shape = await requireTable(helper, collection);
      if (shape === undefined) return;
      requireColumn(helper, shape, collection, field);
      if (direction === 'up' && declaredCollection(collection)?.field(field) !== undefined) {
        throw new SchemaError(`${helper}: the field is still declared, and the sync would add it back empty; remove it from the collection first`);
      }
      await dropCollectionColumn(trx, collection, field);
    },

    async dropCollection(collection) {
      const helper = `dropCollection("${collection}")`;
      checkName(helper, 'collection', collection);
      const shape = await readTableShape(trx, collection);
      if (direction === 'up' && declaredCollection(collection) !== undefined) throw new SchemaError(`${helper}: the collection is still declared, and the sync would make it again empty; remove it first`);
      if (shape === undefined) {
        await requireTable(helper, collection);
        return;
      }
      await dropCollectionRelation(trx, collection, shape.kind);
    },

    async sql(text, bindings) {
      if (typeof text !== 'string' || text.trim() === '') throw new TypeError('m.sql needs the SQL text');
      const rows = await runHostSql(trx, text, bindings);
      await reconcileAppliedCollections(trx, declared);
      return rows;
    },

    records: (collection) => records.collection(collection),
  };
  return { context, finish: (outcome) => records.finish(outcome) };
}

/**
 * A field a helper is told of (`changeFieldType`'s `to`, `addField`'s definition), checked as a
 * declaration is, in a collection of that field alone: a relation's target other than itself
 * stands in as an empty collection, as only the field's own checks matter here.
 */
function compileField(helper: string, options: { collection: string; recordedId: string | undefined; field: string; definition: unknown }): { collection: CollectionSchema; field: DeclaredFieldSchema } {
  const { collection, field } = options;
  const given = typeof options.definition === 'string' ? { type: options.definition } : options.definition;
  if (given === null || typeof given !== 'object' || Array.isArray(given)) {
    throw new SchemaError(`${helper}: a field type is a type's name ('number') or a definition ({ type: 'select', values: ['a', 'b'] })`);
  }
  const { name, ...settings } = given as Record<string, unknown>;
  if (name !== undefined && name !== field) throw new SchemaError(`${helper}: the definition names the field ${JSON.stringify(name)}; leave its name out`);
  const definition = { ...settings, name: field } as unknown as FieldDefinition;
  const target = (settings as { collection?: unknown }).collection;
  const others: CollectionDefinition[] = settings.type === 'relation' && typeof target === 'string' && target !== collection ? [{ name: target }] : [];
  try {
    const schema = buildSchemaRegistry([{ name: collection, ...(options.recordedId !== undefined ? { id: options.recordedId } : {}), fields: [definition] }, ...others]).get(collection)!;
    return { collection: schema, field: schema.field(field) as DeclaredFieldSchema };
  } catch (error) {
    if (error instanceof SchemaError) throw new SchemaError(`${helper}: ${error.message}`);
    throw error;
  }
}

/**
 * Refuses a name a helper is given that no collection or field may have (lib/schema/collection-names.ts:
 * the pattern, the 63 characters, recordbase's reserved prefixes), saying which.
 */
function checkName(helper: string, what: 'collection' | 'field', name: unknown): void {
  const valid = what === 'collection' ? typeof name === 'string' && !isReservedName(name) && isCollectionName(name) : isFieldName(name);
  if (valid) return;
  const reserved = typeof name === 'string' && what === 'collection' && isReservedName(name);
  throw new SchemaError(`${helper}: ${JSON.stringify(name)} is not a valid ${what} name${reserved ? ` (names starting with ${RESERVED_NAME_PREFIXES.map((p) => `"${p}"`).join(' or ')} are reserved)` : ''}`);
}
