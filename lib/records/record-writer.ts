import { BadRequestError, ValidationError, type FieldError, type RecordbaseError } from '../errors.js';
import { RECORD_ALIAS, type RecordStore, type RecordValues, type RelationRequirement } from '../db/record-store.js';
import { uniqueViolationConstraint } from '../db/statements/translate-database-error.js';
import { listFileNames, type RecordFiles } from '../files/record-files.js';
import type { StagedUpload } from '../files/stage-uploads.js';
import type { CollectionSchema, FieldSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { bindValue, quoteIdent, rawSql, sql } from '../sql-fragment.js';
import type { CompiledCollections } from './compile-collections.js';
import { readStoredValue, type NormalizedWrite } from './normalize-write.js';
import { listRelationIds } from './relation-ids.js';
import type { WriteUnit } from './write-unit.js';

/** A write about to be stored: its id, its validated values, and the normalised write they came from. */
export interface StoredWrite {
  readonly id: string;
  readonly values: RecordValues;
  readonly write: NormalizedWrite;
}

/** What a write is validated over: the stored record of an update (none for a create), and whether the caller is a superuser (who may read every field). */
export interface StoredOver {
  readonly existing?: RecordValues;
  readonly superuser: boolean;
}

/**
 * The steps of a create or update that do not depend on who writes: the id, validation, the
 * relation check, unique violations and the files written for it. The record service
 * (record-service.ts) runs them in its order, around the rules and hooks that do depend on the
 * caller.
 */
export class RecordWriter {
  private readonly registry: SchemaRegistry;

  constructor(
    private readonly compiled: CompiledCollections,
    private readonly files: RecordFiles,
  ) {
    this.registry = compiled.registry;
  }

  /**
   * Inserts a validated record with its relation check folded into the statement (`INSERT …
   * SELECT … WHERE EXISTS`). Only when it inserted nothing does a second query find which
   * relation is missing, for the same 422 as checkRelations gives; if none is (the target
   * appeared meanwhile), the insert is tried once more. A unique violation is a 422.
   */
  async insert(store: RecordStore, collection: CollectionSchema, stored: { id: string; values: RecordValues; superuser: boolean }): Promise<RecordValues> {
    return this.rejectDuplicates({ collection, operation: 'create', superuser: stored.superuser }, async () => {
      const row = { ...stored.values, id: stored.id };
      const requirements = this.relationRequirements(collection, stored.values);
      const inserted = await store.insertIfRelated(collection, row, requirements);
      if (inserted) return inserted;
      await this.checkRelations(store, { collection, values: stored.values });
      const retried = await store.insertIfRelated(collection, row, requirements);
      if (retried) return retried;
      throw missingRelations(requirements.map((r) => r.field.name));
    });
  }

  /** Writes a write's new files and ties their fate to the unit: removed if it rolls back (an autocommit unit: if its statement was refused or never sent). */
  async writeFiles(unit: WriteUnit, collection: CollectionSchema, stored: StoredWrite): Promise<void> {
    const written = await this.files.write(collection, stored.id, keptUploads(collection, stored));
    if (written.length === 0) return;
    unit.onRollback(
      () => this.files.discard(written),
      () => this.files.keepUnknown(written),
    );
  }

  /** The full values a create would store under `id` (chooseId's), before validation: the create rule reads them on a row built from them. */
  previewValues(collection: CollectionSchema, write: NormalizedWrite, id: string): RecordValues {
    const values: RecordValues = { id };
    for (const field of collection.fields) {
      if (field.system) continue;
      values[field.name] = Object.prototype.hasOwnProperty.call(write.data, field.name) ? write.data[field.name] : readStoredValue(field, undefined);
    }
    return values;
  }

  /** A write whose values could not even be read is refused before hooks see it. */
  throwIfInvalid(collection: CollectionSchema, write: NormalizedWrite, over: StoredOver): void {
    if (Object.keys(write.errors).length > 0) this.validate(collection, write, over);
  }

  /**
   * The full values to store: the normalised write over the existing record, checked. Failures
   * of reading (coercion, uploads) are reported in the same 422 as the constraints. An update
   * checks the stored values it keeps too; for a non-superuser, the failures of a field it did not
   * send and may not read (a view rule, DESIGN 24) are left out, since they would tell what the
   * field holds, and a write that fails only there is a 400 that names nothing.
   */
  validate(collection: CollectionSchema, write: NormalizedWrite, over: StoredOver): RecordValues {
    try {
      return this.compiled.validator(collection).validate({
        data: write.data,
        existing: over.existing,
        errors: write.errors,
        uploadedNames: new Set(write.operations.uploads.map((upload) => upload.name)),
      });
    } catch (err) {
      if (!(err instanceof ValidationError) || over.existing === undefined || over.superuser) throw err;
      const told = Object.entries(err.data).filter(([name]) => collection.field(name)?.rules?.view === undefined || Object.prototype.hasOwnProperty.call(write.data, name));
      if (told.length === Object.keys(err.data).length) throw err;
      if (told.length === 0) throw new BadRequestError('Failed to update record.');
      throw new ValidationError(Object.fromEntries(told));
    }
  }

  /**
   * The id of a create: the one it asked for (`data.id`), checked against the collection's id
   * settings, or else `chosen` (the id chosen before a before-hook ran), or else a new one from the
   * settings (without an autogeneratePattern a create must send one). Chosen once, before the create
   * rule, so the rule sees the row under the id the insert stores; chosen again only when a
   * `beforeCreate` hook sets another. Where ids may differ by case alone (a declared pattern that is
   * not PocketBase's default), an id that differs from a stored one only by case is refused, as
   * PocketBase does: on a file system that ignores case (macOS, Windows) both records' files would
   * share one folder.
   */
  async chooseId(store: RecordStore, collection: CollectionSchema, data: Record<string, unknown>, chosen?: string): Promise<string> {
    const requested = Object.prototype.hasOwnProperty.call(data, 'id') ? data.id : undefined;
    if (requested === undefined || requested === null || requested === '' || requested === chosen) {
      if (chosen !== undefined) return chosen;
      const generated = collection.recordId.generate();
      if (generated === undefined) throw new ValidationError({ id: { code: 'validation_required', message: 'Cannot be blank: this collection generates no ids.' } });
      await refuseCaseTwin(store, collection, generated);
      return generated;
    }
    const error = collection.recordId.check(requested);
    if (error) throw new ValidationError({ id: error });
    await refuseCaseTwin(store, collection, requested as string);
    return requested as string;
  }

  /** Every relation id that is new in `values` (not in `existing`) must exist in its target collection. */
  async checkRelations(store: RecordStore, change: { collection: CollectionSchema; values: RecordValues; existing?: RecordValues }): Promise<void> {
    const errors: Record<string, true> = {};
    for (const { field, target, ids } of this.relationRequirements(change.collection, change.values, change.existing)) {
      const found = await store.selectExistingIds(target, ids);
      if (found.size < new Set(ids).size) errors[field.name] = true;
    }
    if (Object.keys(errors).length > 0) throw missingRelations(Object.keys(errors));
  }

  /**
   * Runs a write, turning a unique index violation into a 422 on the index's field; for a
   * non-superuser, an index over a field with a view rule (DESIGN 24) is a 400 that names neither
   * the field nor the value, so that it does not confirm that a value the caller may not read exists.
   */
  async rejectDuplicates<T>(target: { collection: CollectionSchema; operation: 'create' | 'update'; superuser: boolean }, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (err) {
      throw uniqueViolation(target, err) ?? err;
    }
  }

  /** The relation ids that are new in `values` (not in `existing`), per relation field: each must exist in its target collection. */
  private relationRequirements(collection: CollectionSchema, values: RecordValues, existing?: RecordValues): (RelationRequirement & { field: FieldSchema })[] {
    const requirements: (RelationRequirement & { field: FieldSchema })[] = [];
    for (const field of collection.fields) {
      if (field.relationTo === undefined || !(field.name in values)) continue;
      const before = new Set(listRelationIds(existing?.[field.name]));
      const wanted = listRelationIds(values[field.name]).filter((id) => !before.has(id));
      if (wanted.length === 0) continue;
      requirements.push({ field, target: this.registry.get(field.relationTo)!, ids: wanted, multiple: field.multiple || wanted.length > 1 });
    }
    return requirements;
  }
}

/** The 422 of an id that differs from a stored one only by case, where ids may (see chooseId). */
async function refuseCaseTwin(store: RecordStore, collection: CollectionSchema, id: string): Promise<void> {
  if (collection.recordId.lowercaseOnly) return;
  const sameIgnoringCase = sql`lower(${quoteIdent(RECORD_ALIAS)}.${quoteIdent('id')}) = lower(${bindValue(id, 'text')})`;
  const twins = await store.selectPage({ collection, where: [sameIgnoringCase], orderBy: rawSql('1'), limit: 1, offset: 0 });
  if (twins.length > 0) throw new ValidationError({ id: { code: 'validation_not_unique', message: 'Value must be unique (ids that differ only by case are one folder on some file systems).' } });
}

/** A unique index violation as a 422 on the index's first field (the primary key: `id`), or the opaque 400 (rejectDuplicates). */
function uniqueViolation(target: { collection: CollectionSchema; operation: 'create' | 'update'; superuser: boolean }, err: unknown): RecordbaseError | undefined {
  const { collection } = target;
  const constraint = uniqueViolationConstraint(err);
  if (constraint === undefined) return undefined;
  const index = collection.indexes.find((i) => i.name === constraint);
  const fields = index ? index.columns.map((column) => collection.fields.find((f) => f.column === column.column)) : [];
  if (!target.superuser && fields.some((field) => field?.rules?.view !== undefined)) return new BadRequestError(`Failed to ${target.operation} record.`);
  const field = index ? (fields[0]?.name ?? 'id') : 'id';
  return new ValidationError({ [field]: { code: 'validation_not_unique', message: 'Value must be unique.' } });
}

/** The uploads the validated values still hold (a `docs-` in the same request may drop one). */
function keptUploads(collection: CollectionSchema, stored: StoredWrite): StagedUpload[] {
  const kept = new Set(listFileNames(collection, stored.values));
  return stored.write.operations.uploads.filter((upload) => kept.has(upload.name));
}

/** The 422 of relation ids that do not exist, on each of `fields`. */
function missingRelations(fields: readonly string[]): ValidationError {
  const errors: Record<string, FieldError> = {};
  for (const name of fields) errors[name] = { code: 'validation_missing_rel_records', message: 'Failed to find all relation records with the provided ids.' };
  return new ValidationError(errors);
}
