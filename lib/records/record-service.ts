import { BadRequestError, ForbiddenError, NotFoundError, RecordbaseError, UnauthorizedError, ValidationError, type FieldError } from '../errors.js';
import { RecordStore, type RecordValues, type RelationRequirement } from '../db/record-store.js';
import { translateDatabaseError, uniqueViolationConstraint } from '../db/translate-database-error.js';
import { StatementInterruptedError } from '../db/bound-statements.js';
import type { DatabaseContext } from '../db/database-context.js';
import { listFieldFileNames, listFileNames, type RecordFiles } from '../files/record-files.js';
import type { StagedUpload } from '../files/stage-uploads.js';
import type { Upload } from '../files/upload.js';
import type { SqlFragment } from '../query/sql-fragment.js';
import type { CollectionSchema, FieldSchema, SchemaRegistry } from '../schema/collection-schema.js';
import type { FileFieldSchema } from '../schema/fields/file.js';
import { compileRecordOrder } from './record-order.js';
import { compileRule, compileUserFilter, fenceFilter, negateConditions, type RuleAction, type RuleDecision } from './access-rules.js';
import type { CompiledCollections } from './compile-collections.js';
import { isSuperuser, type Caller } from './caller.js';
import { deleteRecords, type DeletedRecord } from './delete-records.js';
import { readWriteOperations, type WriteOperations } from './field-operations.js';
import { normalizeWrite, readStoredValue, type NormalizedWrite } from './normalize-write.js';
import type { HookRunner } from './record-hooks.js';
import type { RecordsApi } from './records-api.js';
import { runWriteUnit, type WriteUnit } from './write-unit.js';
import type { Logger } from '../http/logger.js';
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
  /** File parts of a multipart body (or the server API's file inputs). */
  uploads?: readonly Upload[];
}

/** How the service treats files, multipart updates and hooks. */
export interface RecordServiceOptions {
  files: RecordFiles;
  /**
   * `'replace'` (the interface, 4.7): a multipart update clears the fields it does not send;
   * `'merge'`: it changes only what it sends, like a JSON update.
   */
  multipartUpdate: 'replace' | 'merge';
  hooks: HookRunner;
  logger: Logger;
  /** The server API bound to a write unit: what hooks receive as `api`. */
  apiFor(unit: WriteUnit | undefined): RecordsApi;
}

/**
 * Where an operation runs: in its own transaction (the default), or inside a unit that a batch
 * or `records.api.transaction()` opened, which then commits (or rolls back) all of it together.
 */
export interface OperationContext {
  unit?: WriteUnit;
  /**
   * What bounds the operation's statements outside a unit (a unit's store carries its own): the
   * request's (lib/router.ts), or the router's limits for a server-API call. None: unbounded.
   */
  database?: DatabaseContext;
}

/** The record a download names, and the file field that holds the name. */
export interface FileOwner {
  record: RecordValues;
  field: FileFieldSchema;
}

/**
 * Record operations with their rules, hooks and files, in transactions. Knows nothing of HTTP:
 * the caller's identity and request values arrive as a Caller, results leave as record values.
 * Every database error that means "unavailable" becomes a 503 here.
 *
 * A write runs as: read the request into a normalised write (lib/records/normalize-write.ts) ->
 * the rule, on what the write will store -> before-hooks (which may change it) -> validation ->
 * relations, files, SQL -> commit -> after-commit work (old files removed, after-hooks).
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

  /** The store reads of `context` go through: its unit's transaction, or the pool. */
  storeOf(context: OperationContext = {}): RecordStore {
    if (context.unit) return context.unit.store;
    return context.database ? this.store.within(context.database) : this.store;
  }

  /** A page of records that pass the list rule and the filter. */
  async list(collection: CollectionSchema, query: ListQuery, caller: Caller, context: OperationContext = {}): Promise<ListResult> {
    return this.guard(async () => {
      const store = this.storeOf(context);
      const where = fenceFilter(this.rule(collection, 'list', caller), compileUserFilter({ registry: this.registry, collection, filter: query.filter, caller }));
      const orderBy = compileRecordOrder({ registry: this.registry, collection, sort: query.sort, caller });
      const items = await store.selectPage({ collection, where, orderBy, limit: query.perPage, offset: (query.page - 1) * query.perPage });
      if (query.skipTotal) return { page: query.page, perPage: query.perPage, totalItems: -1, totalPages: -1, items };
      const totalItems = await store.count({ collection, where });
      return { page: query.page, perPage: query.perPage, totalItems, totalPages: Math.ceil(totalItems / query.perPage), items };
    });
  }

  /** One record that passes the view rule, or a 404. */
  async view(collection: CollectionSchema, id: string, caller: Caller, context: OperationContext = {}): Promise<RecordValues> {
    return this.guard(async () => {
      const where = this.rule(collection, 'view', caller);
      requireRecordId(id);
      return findOrNotFound(this.storeOf(context), { collection, id, where });
    });
  }

  /**
   * Creates a record. The create rule is checked on the row the write would insert, before
   * anything is written (403). Without a transaction to join, a before-hook or a rule, the insert
   * is a single autocommit statement (the relation check reads committed rows either way, so a
   * transaction would not protect it). Uploads are written to storage before the record is
   * committed and removed if it is not.
   */
  async create(collection: CollectionSchema, input: WriteInput, caller: Caller, context: OperationContext = {}): Promise<RecordValues> {
    const write = normalizeWrite(this.readOperations(collection, input, caller));
    const hooks = this.options.hooks;
    return this.guard(async () => {
      const ruleWhere = this.rule(collection, 'create', caller, write.data);
      const needsUnit = context.unit !== undefined || ruleWhere.length > 0 || hooks.has(collection, 'beforeCreate');
      if (!needsUnit) {
        const created = await this.insertAutocommit(this.storeOf(context), collection, write);
        await hooks.runAfter(collection, 'afterCreate', { ...this.eventBase(collection, caller, undefined), record: created });
        return created;
      }
      return this.inUnit(context, async (unit) => {
        if (ruleWhere.length > 0 && !(await unit.store.matchesNewRow({ collection, values: this.previewValues(collection, write), where: ruleWhere }))) {
          throw new ForbiddenError('You are not allowed to create this record.');
        }
        if (hooks.has(collection, 'beforeCreate')) {
          this.throwIfInvalid(collection, write);
          await hooks.runBefore(collection, 'beforeCreate', { ...this.eventBase(collection, caller, unit), data: write.data });
          checkHookData(collection, 'beforeCreate', write.data, { allowId: true });
        }
        const id = this.chooseId(write.data);
        const values = this.validate(collection, write);
        await this.checkRelations(unit.store, collection, values);
        await this.writeFiles(unit, collection, id, keptUploads(collection, values, write));
        const created = await this.rejectDuplicates(collection, () => unit.store.insert(collection, { ...values, id }));
        unit.afterCommit(() => hooks.runAfter(collection, 'afterCreate', { ...this.eventBase(collection, caller, undefined), record: created }));
        return created;
      });
    });
  }

  /**
   * Updates a record under a row lock (concurrent updates serialise, none is lost, and the file
   * names each one keeps are computed from the other's result). The update rule is part of the
   * statement that locks the row; failing it is a 404. A rule that reads `@request.body` needs
   * the write's values, which depend on the locked row (`views+: 1`), so it is checked on that
   * row right after, still a 404. New files are written before commit; files the record no
   * longer holds are removed after it.
   */
  async update(collection: CollectionSchema, id: string, input: WriteInput, caller: Caller, context: OperationContext = {}): Promise<RecordValues> {
    const operations = this.readOperations(collection, input, caller, { update: true });
    const hooks = this.options.hooks;
    return this.guard(async () => {
      const readsBody = this.compiled.rules.readsBody(collection, 'update');
      const where = this.rule(collection, 'update', caller);
      requireRecordId(id);
      return this.inUnit(context, async (unit) => {
        const existing = await findOrNotFound(unit.store, { collection, id, where: readsBody ? [] : where, lock: true });
        const write = normalizeWrite(operations, existing);
        if (readsBody) await findOrNotFound(unit.store, { collection, id, where: this.rule(collection, 'update', caller, write.data) });
        if (hooks.has(collection, 'beforeUpdate')) {
          this.throwIfInvalid(collection, write, existing);
          await hooks.runBefore(collection, 'beforeUpdate', { ...this.eventBase(collection, caller, unit), data: write.data, record: existing });
          checkHookData(collection, 'beforeUpdate', write.data, { allowId: false });
        }
        const values = this.validate(collection, write, existing);
        await this.checkRelations(unit.store, collection, values, existing);
        await this.writeFiles(unit, collection, id, keptUploads(collection, values, write));
        const result = await this.rejectDuplicates(collection, () => unit.store.update(collection, id, values));
        const kept = new Set(listFileNames(collection, result));
        const removed = listFileNames(collection, existing).filter((name) => !kept.has(name));
        unit.afterCommit(() => this.options.files.removeNames(collection, id, removed));
        unit.afterCommit(() => hooks.runAfter(collection, 'afterUpdate', { ...this.eventBase(collection, caller, undefined), record: result }));
        return result;
      });
    });
  }

  /** Deletes one record (and cascades); failing the delete rule is a 404. */
  async delete(collection: CollectionSchema, id: string, caller: Caller, context: OperationContext = {}): Promise<DeletedRecord[]> {
    return this.guard(async () => {
      const where = this.rule(collection, 'delete', caller);
      requireRecordId(id);
      return this.inUnit(context, async (unit) => {
        const record = await findOrNotFound(unit.store, { collection, id, where, lock: true });
        return this.deleteInUnit(unit, { collection, records: [record], caller });
      });
    });
  }

  /**
   * Deletes every record that matches `filter` and the list rule, all or nothing: if any of them
   * fails the delete rule, nothing is deleted (403). A `null` delete rule is a 403 for
   * non-superusers even when nothing matches.
   */
  async deleteMany(collection: CollectionSchema, filter: string | undefined, caller: Caller, context: OperationContext = {}): Promise<{ deleted: DeletedRecord[]; count: number }> {
    return this.guard(async () => {
      if (filter === undefined || filter.trim() === '') throw new BadRequestError('A bulk delete needs a non-empty "filter" parameter.', 'filter_required');
      const deleteRule = this.rule(collection, 'delete', caller);
      const where = fenceFilter(this.rule(collection, 'list', caller), compileUserFilter({ registry: this.registry, collection, filter, caller }));
      return this.inUnit(context, async (unit) => {
        if (deleteRule.length > 0) {
          const refused = await unit.store.selectLocked({ collection, where: [...where, negateConditions(deleteRule)] });
          if (refused.length > 0) throw new ForbiddenError(`${refused.length} of the selected records may not be deleted; nothing was deleted.`);
        }
        const records = await unit.store.selectLocked({ collection, where });
        const deleted = await this.deleteInUnit(unit, { collection, records, caller });
        return { deleted, count: records.length };
      });
    });
  }

  /**
   * The record and file field behind a download of `name` (docs/protected-files.md): 404 unless the
   * name is in one of the record's file fields. Public fields skip rules (and the caller is never
   * resolved, so a public download costs no auth() call). Protected fields need an identity (401)
   * that passes the view rule (404 otherwise, also when the rule is `null`).
   */
  async findFileOwner(collection: CollectionSchema, options: { id: string; name: string; caller: () => Promise<Caller> }, context: OperationContext = {}): Promise<FileOwner> {
    return this.guard(async () => {
      const notFound = () => new NotFoundError("The requested file wasn't found.", 'file_not_found');
      if (!isRecordId(options.id)) throw notFound();
      const store = this.storeOf(context);
      const record = await store.selectById({ collection, id: options.id });
      const field = record && collection.fields.find((f): f is FileFieldSchema => f.type === 'file' && listFieldFileNames(record[f.name]).includes(options.name));
      if (!record || !field) throw notFound();
      if (field.definition.protected !== true) return { record, field };
      const caller = await options.caller();
      if (!caller.request.auth) throw new UnauthorizedError('This file is protected: it needs an authentication token.', 'file_auth_required');
      if (isSuperuser(caller)) return { record, field };
      const where = this.decide(collection, 'view', caller);
      if (where === 'denied' || !(await store.selectById({ collection, id: options.id, where }))) throw notFound();
      return { record, field };
    });
  }

  /**
   * Runs `work` in the context's unit, or in a new transaction of its own (committed, then its
   * after-commit work run, before this resolves).
   */
  async inUnit<T>(context: OperationContext, work: (unit: WriteUnit) => Promise<T>): Promise<T> {
    if (context.unit) return work(context.unit);
    return runWriteUnit(this.storeOf(context), work, this.options.logger);
  }

  /** Deletes records and what cascades from them inside a unit, with the before- and after-hooks of each. */
  private async deleteInUnit(unit: WriteUnit, options: { collection: CollectionSchema; records: readonly RecordValues[]; caller: Caller }): Promise<DeletedRecord[]> {
    const hooks = this.options.hooks;
    const deleted = await deleteRecords({
      store: unit.store,
      registry: this.registry,
      collection: options.collection,
      records: options.records,
      canView: this.viewCheck(unit.store, options.caller),
      beforeEach: async (collection, record) => {
        if (hooks.has(collection, 'beforeDelete')) await hooks.runBefore(collection, 'beforeDelete', { ...this.eventBase(collection, options.caller, unit), record });
      },
    });
    unit.afterCommit(() => this.options.files.removeRecords(deleted));
    for (const { collection, record } of deleted) {
      unit.afterCommit(() => hooks.runAfter(collection, 'afterDelete', { ...this.eventBase(collection, options.caller, undefined), record }));
    }
    return deleted;
  }

  /**
   * The autocommit insert of a create that needs no transaction: one statement, the relation
   * check folded into it (`INSERT … SELECT … WHERE EXISTS`). Only when it inserted nothing does a
   * second query find which relation is missing, for the same 422 as checkRelations gives; if
   * none is (the target appeared meanwhile), the insert is tried once more.
   */
  private async insertAutocommit(store: RecordStore, collection: CollectionSchema, write: NormalizedWrite): Promise<RecordValues> {
    const id = this.chooseId(write.data);
    const values = this.validate(collection, write);
    const written = await this.options.files.write(collection, id, keptUploads(collection, values, write));
    try {
      return await this.rejectDuplicates(collection, async () => {
        const row = { ...values, id };
        const requirements = this.relationRequirements(collection, values);
        const inserted = await store.insertIfRelated(collection, row, requirements);
        if (inserted) return inserted;
        await this.checkRelations(store, collection, values);
        const retried = await store.insertIfRelated(collection, row, requirements);
        if (retried) return retried;
        throw missingRelations(requirements.map((r) => r.field.name));
      });
    } catch (err) {
      // A refused insert wrote nothing, nor did one never sent (its client left while the files
      // were written); a lost connection leaves the outcome unknown (the row may exist).
      if ((err instanceof RecordbaseError && err.status < 500) || (err instanceof StatementInterruptedError && !err.sent)) await this.options.files.discard(written);
      else if (written.length > 0) this.options.files.keepUnknown(written);
      throw err;
    }
  }

  /** Writes a write's new files and ties their fate to the unit: removed if it rolls back. */
  private async writeFiles(unit: WriteUnit, collection: CollectionSchema, id: string, uploads: readonly StagedUpload[]): Promise<void> {
    const written = await this.options.files.write(collection, id, uploads);
    if (written.length === 0) return;
    unit.onRollback(
      () => this.options.files.discard(written),
      () => this.options.files.keepUnknown(written),
    );
  }

  /** What every hook event of this write carries. */
  private eventBase(collection: CollectionSchema, caller: Caller, unit: WriteUnit | undefined) {
    return { collection: { name: collection.name, id: collection.id }, identity: caller.request.auth, api: this.options.apiFor(unit) };
  }

  /** The full values a create would store, before validation: the create rule reads them on a row built from them. */
  private previewValues(collection: CollectionSchema, write: NormalizedWrite): RecordValues {
    const values: RecordValues = { id: this.chooseId(write.data) };
    for (const field of collection.fields) {
      if (field.system) continue;
      values[field.name] = Object.prototype.hasOwnProperty.call(write.data, field.name) ? write.data[field.name] : readStoredValue(field, undefined);
    }
    return values;
  }

  /** A write whose values could not even be read is refused before hooks see it. */
  private throwIfInvalid(collection: CollectionSchema, write: NormalizedWrite, existing?: RecordValues): void {
    if (Object.keys(write.errors).length > 0) this.validate(collection, write, existing);
  }

  /**
   * The rule's conditions for an operation the caller asked for (over HTTP, in a batch or through
   * the server API, which all come here): a `null` rule is their 403, before any query runs.
   */
  private rule(collection: CollectionSchema, action: RuleAction, caller: Caller, body?: Record<string, unknown>): SqlFragment[] {
    const decision = compileRule({ registry: this.registry, collection, action, caller, body });
    if (decision === 'denied') throw new ForbiddenError('Only superusers can perform this action.');
    return decision;
  }

  /** The rule's decision, for the checks that answer a refusal their own way (a 404, `false`). */
  private decide(collection: CollectionSchema, action: RuleAction, caller: Caller): RuleDecision {
    return compileRule({ registry: this.registry, collection, action, caller });
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
      update: options.update === true,
    });
  }

  /** Whether the caller may view a record: what an error message may name (a 404 would hide it). */
  private viewCheck(store: RecordStore, caller: Caller): (collection: CollectionSchema, id: string) => Promise<boolean> {
    return async (collection, id) => {
      const where = this.decide(collection, 'view', caller);
      if (where === 'denied') return false;
      return (await store.selectById({ collection, id, where })) !== undefined;
    };
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

  /** Every relation id that is new in `values` must exist in its target collection. */
  private async checkRelations(store: RecordStore, collection: CollectionSchema, values: RecordValues, existing?: RecordValues): Promise<void> {
    const errors: Record<string, true> = {};
    for (const { field, target, ids } of this.relationRequirements(collection, values, existing)) {
      const found = await store.selectExistingIds(target, ids);
      if (found.size < new Set(ids).size) errors[field.name] = true;
    }
    if (Object.keys(errors).length > 0) throw missingRelations(Object.keys(errors));
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

/**
 * A before-hook may change values and set `id` on create; a key that is no field is a bug in the
 * hook, and a silent no-op would hide it.
 */
function checkHookData(collection: CollectionSchema, hook: string, data: Record<string, unknown>, options: { allowId: boolean }): void {
  for (const key of Object.keys(data)) {
    if (key === 'id' && options.allowId) continue;
    const field = collection.field(key);
    if (!field || field.system) throw new TypeError(`the ${hook} hook of "${collection.name}" set "${key}", which is not a writable field`);
  }
}

/** The 422 of relation ids that do not exist, on each of `fields`. */
function missingRelations(fields: readonly string[]): ValidationError {
  const errors: Record<string, FieldError> = {};
  for (const name of fields) errors[name] = { code: 'validation_missing_rel_records', message: 'Failed to find all relation records with the provided ids.' };
  return new ValidationError(errors);
}

/** Every stored id is well-formed, so anything else is a 404 without asking the database. */
function requireRecordId(id: string): void {
  if (!isRecordId(id)) throw new NotFoundError("The requested record wasn't found.", 'record_not_found');
}

