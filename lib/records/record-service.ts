import { BadRequestError, ForbiddenError, NotFoundError, RecordbaseError, UnauthorizedError, ValidationError, type FieldError } from '../errors.js';
import { RecordStore, type RecordValues } from '../db/record-store.js';
import { translateDatabaseError, uniqueViolationConstraint } from '../db/translate-database-error.js';
import { listFieldFileNames, listFileNames, type RecordFiles } from '../files/record-files.js';
import type { StagedUpload } from '../files/stage-uploads.js';
import type { Upload } from '../files/upload.js';
import type { SqlFragment } from '../query/sql-fragment.js';
import type { CollectionSchema, FieldSchema, SchemaRegistry } from '../schema/collection-schema.js';
import type { FileFieldDefinition } from '../schema/definitions.js';
import { compileRecordOrder } from './record-order.js';
import { compileRule, compileUserFilter, fenceFilter, negateConditions, type RuleAction } from './access-rules.js';
import type { CompiledCollections } from './compile-collections.js';
import { isSuperuser, type Caller } from './caller.js';
import { deleteRecords, type DeletedRecord } from './delete-records.js';
import { readWriteOperations, type WriteOperations } from './field-operations.js';
import { normalizeWrite, type NormalizedWrite } from './normalize-write.js';
import { generateRecordId, isRecordId } from './record-id.js';
import { listRelationIds } from './relation-ids.js';

/** What a list call asks for (already parsed and bounded by the HTTP layer). */
export interface ListQuery {
  page: number;
  perPage: number;
  skipTotal: boolean;
  filter?: string;
  sort?: string;
}

/** One page of records, as stored (the HTTP layer shapes the response). */
export interface ListResult {
  page: number;
  perPage: number;
  totalItems: number;
  totalPages: number;
  items: RecordValues[];
}

/** What a write sends: the body fields, where they came from (coercion differs), and any uploads. */
export interface WriteInput {
  data: Record<string, unknown>;
  source: 'json' | 'multipart';
  /** File parts of a multipart body. */
  uploads?: readonly Upload[];
}

/** How the service treats files and multipart updates. */
export interface RecordServiceOptions {
  files: RecordFiles;
  /**
   * `'replace'` (the interface, 4.7): a multipart update clears the fields it does not send;
   * `'merge'`: it changes only what it sends, like a JSON update.
   */
  multipartUpdate: 'replace' | 'merge';
}

/** The record a download names, and the file field that holds the name. */
export interface FileOwner {
  record: RecordValues;
  field: FieldSchema;
}

/**
 * Record operations with their rules, in transactions. Knows nothing of HTTP: the caller's
 * identity and request values arrive as a Caller, results leave as record values. Every
 * database error that means "unavailable" becomes a 503 here.
 */
export class RecordService {
  private readonly registry: SchemaRegistry;

  constructor(
    private readonly compiled: CompiledCollections,
    private readonly store: RecordStore,
    private readonly options: RecordServiceOptions,
  ) {
    this.registry = compiled.registry;
  }

  /** The collection named (or identified) `nameOrId`, or a 404. */
  collection(nameOrId: string): CollectionSchema {
    const collection = this.registry.get(nameOrId);
    if (!collection) throw new NotFoundError(`Missing collection "${nameOrId}".`, 'collection_not_found');
    return collection;
  }

  /** A page of records that pass the list rule and the filter. */
  async list(collection: CollectionSchema, query: ListQuery, caller: Caller): Promise<ListResult> {
    return this.guard(async () => {
      const where = fenceFilter(this.rule(collection, 'list', caller), compileUserFilter({ registry: this.registry, collection, filter: query.filter, caller }));
      const orderBy = compileRecordOrder({ registry: this.registry, collection, sort: query.sort, caller });
      const items = await this.store.selectPage({ collection, where, orderBy, limit: query.perPage, offset: (query.page - 1) * query.perPage });
      if (query.skipTotal) return { page: query.page, perPage: query.perPage, totalItems: -1, totalPages: -1, items };
      const totalItems = await this.store.count({ collection, where });
      return { page: query.page, perPage: query.perPage, totalItems, totalPages: Math.ceil(totalItems / query.perPage), items };
    });
  }

  /** One record that passes the view rule, or a 404. */
  async view(collection: CollectionSchema, id: string, caller: Caller): Promise<RecordValues> {
    return this.guard(async () => {
      const where = this.rule(collection, 'view', caller);
      requireRecordId(id);
      return findOrNotFound(this.store, { collection, id, where });
    });
  }

  /**
   * Creates a record. With a create rule, the rule is checked against the new row inside a
   * transaction, so a refused create leaves nothing behind (403). Without one, the insert is a
   * single statement and needs no BEGIN/COMMIT round trips (the relation check reads committed
   * rows either way, so a transaction would not protect it). Uploads are written to storage
   * before the record is committed and removed if it is not.
   */
  async create(collection: CollectionSchema, input: WriteInput, caller: Caller): Promise<RecordValues> {
    const write = normalizeWrite(this.readOperations(collection, input, caller));
    let written: string[] = [];
    let committing = false;
    try {
      return await this.guard(async () => {
        const ruleWhere = this.rule(collection, 'create', caller, write.data);
        const id = this.chooseId(write.data);
        const values = this.validate(collection, write);
        const insert = async (store: RecordStore, options: { autocommit: boolean }) => {
          await this.checkRelations(store, collection, values);
          written = await this.options.files.write(collection, id, keptUploads(collection, values, write));
          committing = options.autocommit;
          const created = await this.rejectDuplicates(collection, () => store.insert(collection, { ...values, id }));
          if (ruleWhere.length > 0 && !(await store.selectById({ collection, id, where: ruleWhere }))) {
            throw new ForbiddenError('You are not allowed to create this record.');
          }
          committing = true;
          return created;
        };
        if (ruleWhere.length === 0) return insert(this.store, { autocommit: true });
        return this.store.transaction((store) => insert(store, { autocommit: false }));
      });
    } catch (err) {
      await this.discardUncommitted(written, { committing, error: err });
      throw err;
    }
  }

  /**
   * Updates a record under a row lock (concurrent updates serialise, none is lost, and the file
   * names each one keeps are computed from the other's result). The update rule is part of the
   * statement that locks the row; failing it is a 404. A rule that reads `@request.body` needs
   * the write's values, which depend on the locked row (`views+: 1`), so it is checked on that
   * row right after, still a 404. New files are written before commit; files the record no
   * longer holds are removed after it.
   */
  async update(collection: CollectionSchema, id: string, input: WriteInput, caller: Caller): Promise<RecordValues> {
    const operations = this.readOperations(collection, input, caller, { update: true });
    let written: string[] = [];
    let committing = false;
    let removed: string[] = [];
    let updated: RecordValues;
    try {
      updated = await this.guard(async () => {
        const readsBody = this.compiled.rules.readsBody(collection, 'update');
        const where = this.rule(collection, 'update', caller);
        requireRecordId(id);
        return this.store.transaction(async (store) => {
          const existing = await findOrNotFound(store, { collection, id, where: readsBody ? [] : where, lock: true });
          const write = normalizeWrite(operations, existing);
          if (readsBody) await findOrNotFound(store, { collection, id, where: this.rule(collection, 'update', caller, write.data) });
          const values = this.validate(collection, write, existing);
          await this.checkRelations(store, collection, values, existing);
          written = await this.options.files.write(collection, id, keptUploads(collection, values, write));
          const result = await this.rejectDuplicates(collection, () => store.update(collection, id, values));
          const kept = new Set(listFileNames(collection, result));
          removed = listFileNames(collection, existing).filter((name) => !kept.has(name));
          committing = true;
          return result;
        });
      });
    } catch (err) {
      await this.discardUncommitted(written, { committing, error: err });
      throw err;
    }
    await this.options.files.removeNames(collection, id, removed);
    return updated;
  }

  /** Deletes one record (and cascades); failing the delete rule is a 404. */
  async delete(collection: CollectionSchema, id: string, caller: Caller): Promise<DeletedRecord[]> {
    return this.guard(async () => {
      const where = this.rule(collection, 'delete', caller);
      requireRecordId(id);
      const deleted = await this.store.transaction(async (store) => {
        const record = await findOrNotFound(store, { collection, id, where, lock: true });
        return deleteRecords({ store, registry: this.registry, collection, records: [record], canView: this.viewCheck(store, caller) });
      });
      await this.options.files.removeRecords(deleted);
      return deleted;
    });
  }

  /**
   * Deletes every record that matches `filter` and the list rule, all or nothing: if any of them
   * fails the delete rule, nothing is deleted (403). A `null` delete rule is a 403 for
   * non-superusers even when nothing matches.
   */
  async deleteMany(collection: CollectionSchema, filter: string | undefined, caller: Caller): Promise<{ deleted: DeletedRecord[]; count: number }> {
    return this.guard(async () => {
      if (filter === undefined || filter.trim() === '') throw new BadRequestError('A bulk delete needs a non-empty "filter" parameter.', 'filter_required');
      const deleteRule = this.rule(collection, 'delete', caller);
      const where = fenceFilter(this.rule(collection, 'list', caller), compileUserFilter({ registry: this.registry, collection, filter, caller }));
      const result = await this.store.transaction(async (store) => {
        if (deleteRule.length > 0) {
          const refused = await store.selectLocked({ collection, where: [...where, negateConditions(deleteRule)] });
          if (refused.length > 0) throw new ForbiddenError(`${refused.length} of the selected records may not be deleted; nothing was deleted.`);
        }
        const records = await store.selectLocked({ collection, where });
        const deleted = await deleteRecords({ store, registry: this.registry, collection, records, canView: this.viewCheck(store, caller) });
        return { deleted, count: records.length };
      });
      await this.options.files.removeRecords(result.deleted);
      return result;
    });
  }

  /**
   * The record and file field behind a download of `name` (DESIGN.md section 5): 404 unless the
   * name is in one of the record's file fields. Public fields skip rules (and the caller is never
   * resolved, so a public download costs no auth() call). Protected fields need an identity (401)
   * that passes the view rule (404 otherwise, also when the rule is `null`).
   */
  async findFileOwner(collection: CollectionSchema, options: { id: string; name: string; caller: () => Promise<Caller> }): Promise<FileOwner> {
    return this.guard(async () => {
      const notFound = () => new NotFoundError("The requested file wasn't found.", 'file_not_found');
      if (!isRecordId(options.id)) throw notFound();
      const record = await this.store.selectById({ collection, id: options.id });
      const field = record && collection.fields.find((f) => f.type === 'file' && listFieldFileNames(record[f.name]).includes(options.name));
      if (!record || !field) throw notFound();
      if ((field.definition as FileFieldDefinition).protected !== true) return { record, field };
      const caller = await options.caller();
      if (!caller.request.auth) throw new UnauthorizedError('This file is protected: it needs an authentication token.', 'file_auth_required');
      if (isSuperuser(caller)) return { record, field };
      if (collection.rules.view === null) throw notFound();
      const where = this.rule(collection, 'view', caller);
      if (!(await this.store.selectById({ collection, id: options.id, where }))) throw notFound();
      return { record, field };
    });
  }

  private rule(collection: CollectionSchema, action: RuleAction, caller: Caller, body?: Record<string, unknown>): SqlFragment[] {
    return compileRule({ registry: this.registry, collection, action, caller, body });
  }

  /**
   * Reads a write request once into operations per field: a multipart update in replace mode
   * clears what it does not send (hidden fields only for superusers, who can see them).
   */
  private readOperations(collection: CollectionSchema, input: WriteInput, caller: Caller, options: { update?: boolean } = {}): WriteOperations {
    const replace = options.update === true && input.source === 'multipart' && this.options.multipartUpdate === 'replace';
    return readWriteOperations(collection, {
      body: input.data,
      source: input.source,
      uploads: input.uploads,
      clearUnsent: replace ? { includeHidden: isSuperuser(caller) } : undefined,
    });
  }

  /** Whether the caller may view a record: what an error message may name (a 404 would hide it). */
  private viewCheck(store: RecordStore, caller: Caller): (collection: CollectionSchema, id: string) => Promise<boolean> {
    return async (collection, id) => {
      let where: SqlFragment[];
      try {
        where = this.rule(collection, 'view', caller);
      } catch (err) {
        if (err instanceof ForbiddenError) return false;
        throw err;
      }
      return (await store.selectById({ collection, id, where })) !== undefined;
    };
  }

  /**
   * Removes the files of a write that failed. A failure while the row was being committed (the
   * connection lost during COMMIT, or during an autocommit INSERT) leaves the outcome unknown:
   * the row may exist and reference these files, so they stay, and the sweep removes them later
   * if no record holds them. A client error (a duplicate, say) proves nothing was committed.
   */
  private async discardUncommitted(written: readonly string[], outcome: { committing: boolean; error: unknown }): Promise<void> {
    if (written.length === 0) return;
    const refused = outcome.error instanceof RecordbaseError && outcome.error.status < 500;
    if (outcome.committing && !refused) {
      this.options.files.keepUnknown(written);
      return;
    }
    await this.options.files.discard(written);
  }

  /**
   * The full values to store: the normalised write over the existing record, checked. Failures
   * of reading (coercion, uploads) are reported in the same 422 as the constraints.
   */
  private validate(collection: CollectionSchema, write: NormalizedWrite, existing?: RecordValues): RecordValues {
    return this.compiled.validator(collection).validate({
      data: write.data,
      existing,
      errors: write.errors,
      uploadedNames: new Set(write.operations.uploads.map((upload) => upload.name)),
    });
  }

  /** The id a create asked for (`data.id`), checked, or a new one. */
  private chooseId(data: Record<string, unknown>): string {
    const requested = Object.prototype.hasOwnProperty.call(data, 'id') ? data.id : undefined;
    if (requested === undefined || requested === null || requested === '') return generateRecordId();
    if (!isRecordId(requested)) {
      throw new ValidationError({ id: { code: 'validation_invalid_format', message: 'Must be 15 characters of a-z and 0-9.' } });
    }
    return requested;
  }

  /** Every relation id that is new in `values` must exist in its target collection. */
  private async checkRelations(store: RecordStore, collection: CollectionSchema, values: RecordValues, existing?: RecordValues): Promise<void> {
    const errors: Record<string, FieldError> = {};
    for (const field of collection.fields) {
      if (field.relationTo === undefined || !(field.name in values)) continue;
      const before = new Set(listRelationIds(existing?.[field.name]));
      const wanted = listRelationIds(values[field.name]).filter((id) => !before.has(id));
      if (wanted.length === 0) continue;
      const found = await store.selectExistingIds(this.registry.get(field.relationTo)!, wanted);
      if (found.size < new Set(wanted).size) {
        errors[field.name] = { code: 'validation_missing_rel_records', message: 'Failed to find all relation records with the provided ids.' };
      }
    }
    if (Object.keys(errors).length > 0) throw new ValidationError(errors);
  }

  /** Runs a write, turning a unique index violation into a 422 on the index's field. */
  private async rejectDuplicates(collection: CollectionSchema, write: () => Promise<RecordValues>): Promise<RecordValues> {
    try {
      return await write();
    } catch (err) {
      throw this.uniqueViolation(collection, err) ?? err;
    }
  }

  /** A unique index violation as a 422 on the index's first field (the primary key: `id`). */
  private uniqueViolation(collection: CollectionSchema, err: unknown): ValidationError | undefined {
    const constraint = uniqueViolationConstraint(err);
    if (constraint === undefined) return undefined;
    const index = collection.indexes.find((i) => i.name === constraint);
    const field = index ? (collection.fields.find((f) => f.column === index.columns[0].column)?.name ?? 'id') : 'id';
    return new ValidationError({ [field]: { code: 'validation_not_unique', message: 'Value must be unique.' } });
  }

  /** Runs `work`, turning "database unreachable" driver errors into 503s. */
  private async guard<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      throw translateDatabaseError(err);
    }
  }
}

/** The record with `id` matching `where` (locked when asked), or a 404. */
async function findOrNotFound(
  store: RecordStore,
  options: { collection: CollectionSchema; id: string; where: readonly SqlFragment[]; lock?: boolean },
): Promise<RecordValues> {
  const record = await store.selectById(options);
  if (!record) throw new NotFoundError("The requested record wasn't found.", 'record_not_found');
  return record;
}

/** The uploads the validated values still hold (a `docs-` in the same request may drop one). */
function keptUploads(collection: CollectionSchema, values: RecordValues, write: NormalizedWrite): StagedUpload[] {
  const kept = new Set(listFileNames(collection, values));
  return write.operations.uploads.filter((upload) => kept.has(upload.name));
}

/** Every stored id is well-formed, so anything else is a 404 without asking the database. */
function requireRecordId(id: string): void {
  if (!isRecordId(id)) throw new NotFoundError("The requested record wasn't found.", 'record_not_found');
}

