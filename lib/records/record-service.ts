// Over 500 lines: one service whose operations (list, aggregate, view and the writes) share the scoped caller, its rules and its read routing.
import { BadRequestError, ForbiddenError, NotFoundError, ValidationError } from '../errors.js';
import type { RecordStore, RecordValues } from '../db/record-store.js';
import type { ReplicaReads } from '../db/replica/replica-reads.js';
import { translateDatabaseError } from '../db/statements/translate-database-error.js';
import type { DatabaseContext } from '../db/statements/database-context.js';
import { listFileNames, type RecordFiles } from '../files/record-files.js';
import type { Upload } from '../files/upload.js';
import type { Logger } from '../logger.js';
import type { SqlFragment } from '../sql-fragment.js';
import type { CollectionSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { isReadableId } from '../schema/record-id.js';
import { createClearedFieldsWarning, type ClearedFieldsWarning } from './cleared-fields-warning.js';
import { compileRecordOrder } from './record-order.js';
import { aggregateRecords, type AggregateQuery, type AggregateResult } from './aggregate-records.js';
import { compileAggregate } from '../query/compile-aggregate.js';
import { fieldViewColumns } from './field-visibility.js';
import { compileRule, compileUserFilter, fenceFilter, negateConditions, type RuleAction } from './access-rules.js';
import type { CompiledCollections } from './compile-collections.js';
import { isSuperuser, type Caller } from './caller.js';
import { deleteRecords, withoutViewReferences, type DeletedRecord } from './delete-records.js';
import { readWriteOperations, type WriteOperations } from './field-operations.js';
import { checkNewRecord, checkStoredRecord, compileFieldWriteChecks, conditionsOf, refuseSuperusersOnly } from './field-write-rules.js';
import { normalizeWrite } from './normalize-write.js';
import { checkHookData, type HookRunner } from './record-hooks.js';
import { RecordPresenter, type ResponseShape } from './present-records.js';
import type { ExpandBudget, ExpandLimits } from './expand-records.js';
import { findFileOwner, type FileOwner } from './find-file-owner.js';
import { ReadRouting } from './read-routing.js';
import { RecordWriter } from './record-writer.js';
import type { RecordsApi } from './records-api.js';
import { refuseViewWrite, requireRecordId } from './write-guards.js';
import { planWrite, type WritePlan } from './write-plan.js';
import { runAutocommit, runWriteUnit, type WriteUnit } from './write-unit.js';
import type { ListQuery, ListResult, WriteInput } from './record-operations.js';
import { RECORD_ALIAS } from '../db/record-store.js';
import { compileSearch } from '../query/search.js';
import { highlightRecords } from './search-highlights.js';

export type { FileOwner } from './find-file-owner.js';

/** How the service treats files, multipart updates and hooks. */
export interface RecordServiceOptions {
  files: RecordFiles;
  /**
   * `'replace'` (the default): a multipart update clears the fields it does not send;
   * `'merge'`: it changes only what it sends, like a JSON update.
   */
  multipartUpdate: 'replace' | 'merge';
  hooks: HookRunner;
  logger: Logger;
  /** What one response's expansion may cost (and a batch's whole answer). */
  expandLimits: ExpandLimits;
  /** The server API bound to a write unit: what hooks receive as `api`. */
  apiFor(unit: WriteUnit | undefined): RecordsApi;
  /** The read replica, when there is one (`readReplica`): lists, counts, views, expansions and downloads' record reads may go there (read-routing.ts). */
  replica?: ReplicaReads;
}

/**
 * Where an operation runs: in its own transaction (the default), or inside a unit that a batch
 * or `records.api.transaction()` opened, which then commits (or rolls back) all of it together.
 */
export interface OperationContext {
  unit?: WriteUnit;
  /**
   * What bounds the operation's statements outside a unit (a unit's store carries its own): the
   * request's (lib/http/dispatch.ts), or the router's limits for a server-API call. None: unbounded.
   */
  database?: DatabaseContext;
}

/**
 * Record operations with their rules, hooks and files, in transactions. Knows nothing of HTTP:
 * the caller's identity and request values arrive as a Caller, results leave as record values.
 * Every database error that means "unavailable" becomes a 503 here.
 *
 * The operations are asked of a request-scoped handle, `service.as(caller, context)`, so each
 * names only what it acts on. A write runs as: read the request into a normalised write
 * (lib/records/normalize-write.ts) -> the rule, on what the write will store -> before-hooks
 * (which may change it) -> validation -> relations, files, SQL (record-writer.ts) -> commit ->
 * after-commit work (old files removed, after-hooks).
 */
export class RecordService {
  private readonly registry: SchemaRegistry;
  private readonly parts: RecordServiceParts;
  private readonly routing: ReadRouting;
  /** Shapes stored records into answers; a scoped service presents through it with its own caller and store (`present`). */
  readonly presenter: RecordPresenter;

  constructor(
    compiled: CompiledCollections,
    private readonly store: RecordStore,
    private readonly options: RecordServiceOptions,
  ) {
    this.registry = compiled.registry;
    this.presenter = new RecordPresenter(compiled.registry, { expandLimits: options.expandLimits });
    const routing = (this.routing = new ReadRouting(store, options.replica));
    this.parts = {
      compiled,
      options,
      presenter: this.presenter,
      writer: new RecordWriter(compiled, options.files),
      warnCleared: createClearedFieldsWarning(options.logger),
      storeOf: (context) => this.storeOf(context),
      routing,
      inUnit: (context, work) => this.inUnit(context, work),
      runPlanned: (plan, context, work) => (plan === 'unit' ? this.inUnit(context, work) : runAutocommit(this.storeOf(context), work, options.logger)),
    };
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

  /**
   * The operations as `caller` in `context` (a request's bounds, or a unit to join):
   * `service.as(caller, context).create(collection, input)`. Made per request or call, and cheap.
   */
  as(caller: Caller, context: OperationContext = {}): ScopedRecordService {
    return new ScopedRecordService(this.parts, caller, context);
  }

  /**
   * The record and file field behind a download of `name` (docs/protected-files.md): 404 unless the
   * name is in one of the record's file fields. Public fields skip rules (and the caller is never
   * resolved, so a public download costs no auth() call). Protected fields need an identity (401)
   * that passes the view rule (404 otherwise, also when the rule is `null`).
   */
  async findFileOwner(collection: CollectionSchema, options: { id: string; name: string; caller: () => Promise<Caller> }, context: OperationContext = {}): Promise<FileOwner> {
    return guard(() => findFileOwner({ registry: this.registry, routing: this.routing, collection, context }, options));
  }

  /**
   * Runs `work` in the context's unit, or in a new transaction of its own (committed, then its
   * after-commit work run, before this resolves).
   */
  async inUnit<T>(context: OperationContext, work: (unit: WriteUnit) => Promise<T>): Promise<T> {
    if (context.unit) return work(context.unit);
    return runWriteUnit(this.storeOf(context), work, this.options.logger);
  }
}

/** What every handle of one service shares: made once by RecordService, handed to each ScopedRecordService. */
export interface RecordServiceParts {
  readonly compiled: CompiledCollections;
  readonly options: RecordServiceOptions;
  readonly presenter: RecordPresenter;
  readonly writer: RecordWriter;
  /** Logs (rate-limited) a replace-mode multipart update that the rule refused after it cleared fields. */
  readonly warnCleared: ClearedFieldsWarning;
  storeOf(context: OperationContext): RecordStore;
  /** Where reads that may go to a read replica are sent (read-routing.ts), and a committed write's fence. */
  readonly routing: ReadRouting;
  inUnit<T>(context: OperationContext, work: (unit: WriteUnit) => Promise<T>): Promise<T>;
  /** Runs a write's steps as its plan sends them (lib/records/write-plan.ts): in the context's unit or one of its own, or as autocommit statements. */
  runPlanned<T>(plan: WritePlan, context: OperationContext, work: (unit: WriteUnit) => Promise<T>): Promise<T>;
}

/** What an update's steps act on: its rule without the body, and whether the rule reads the body (checked once the write is known). */
interface UpdateChange {
  readonly collection: CollectionSchema;
  readonly id: string;
  readonly operations: WriteOperations;
  readonly rule: { readonly readsBody: boolean; readonly where: SqlFragment[] };
  readonly beforeHook: boolean;
}

/**
 * The record service as one caller in one context (`service.as(caller, context)`): HTTP handlers,
 * batch steps and server-API calls each make one, so no operation takes more than what it acts on.
 */
export class ScopedRecordService {
  constructor(
    private readonly parts: RecordServiceParts,
    private readonly caller: Caller,
    private readonly context: OperationContext,
  ) {}

  /**
   * Stored records as this caller's answer (lib/records/present-records.ts): hidden fields and
   * those a field view rule refuses dropped but for superusers, relations expanded through this
   * context's store (inside a unit, its transaction, so it sees what it wrote), then `fields`
   * applied. `budget`: one shared by the responses of one answer (a batch's).
   */
  present(collection: CollectionSchema, records: readonly RecordValues[], options: { shape: ResponseShape; budget?: ExpandBudget }): Promise<Record<string, unknown>[]> {
    // Nothing to expand (most responses) reads nothing: no routing decision to make.
    const present = (store: RecordStore) => this.parts.presenter.present({ collection, records, caller: this.caller, shape: options.shape, store, budget: options.budget });
    return options.shape.tree.size === 0 ? present(this.parts.storeOf(this.context)) : this.parts.routing.read(this.readerKeys(), this.context, present);
  }

  /** A page of records that pass the list rule, the filter and the search (docs/search.md). */
  async list(collection: CollectionSchema, query: ListQuery): Promise<ListResult> {
    return guard(async () => {
      const { registry } = this.parts.compiled;
      const { caller } = this;
      const search = query.search === undefined ? undefined : compileSearch(collection, query.search, RECORD_ALIAS);
      // The search is fenced behind the rule as the filter is: matched (and ranked) only on rows the rule lets through.
      const conditions = compileUserFilter({ registry, collection, filter: query.filter, caller });
      const where = fenceFilter(this.rule(collection, 'list'), search ? [...conditions, search.match] : conditions);
      const orderBy = compileRecordOrder({ registry, collection, sort: query.sort, caller, rank: search?.rank });
      const extra = fieldViewColumns({ registry, collection, caller }); // field view rules, in the page's statement
      return this.parts.routing.read(this.readerKeys(), this.context, async (store) => {
        const items = await store.selectPage({ collection, where, orderBy, limit: query.perPage, offset: (query.page - 1) * query.perPage, extra });
        if (query.highlight !== undefined && query.highlight.length > 0) await highlightRecords({ store, collection, items, fields: query.highlight, query: search?.query });
        if (query.skipTotal) return { page: query.page, perPage: query.perPage, totalItems: -1, totalPages: -1, items };
        const totalItems = await store.count({ collection, where });
        return { page: query.page, perPage: query.perPage, totalItems, totalPages: Math.ceil(totalItems / query.perPage), items };
      });
    });
  }

  /** Groups and aggregates of what a list would show this caller (aggregate-records.ts): the list's rule, fenced filter and read routing. */
  async aggregate(collection: CollectionSchema, query: AggregateQuery): Promise<AggregateResult> {
    const { caller } = this;
    return guard(async () => {
      const listRule = this.rule(collection, 'list');
      const plan = compileAggregate(collection, query, { superuser: isSuperuser(caller) });
      const conditions = compileUserFilter({ registry: this.parts.compiled.registry, collection, filter: query.filter, caller });
      const search = query.search === undefined ? [] : [compileSearch(collection, query.search, RECORD_ALIAS).match]; // fenced as list fences it
      const where = fenceFilter(listRule, [...conditions, ...search]);
      return this.parts.routing.read(this.readerKeys(), this.context, (store) => aggregateRecords(store, { ...query, collection, plan, where }));
    });
  }

  /** One record that passes the view rule, or a 404. */
  async view(collection: CollectionSchema, id: string): Promise<RecordValues> {
    // guard and findOrNotFound written out: the hottest read, and two async layers fewer.
    try {
      const where = this.rule(collection, 'view');
      if (!isReadableId(collection, id)) throw new NotFoundError("The requested record wasn't found.", 'record_not_found');
      const extra = fieldViewColumns({ registry: this.parts.compiled.registry, collection, caller: this.caller });
      const record = await this.parts.routing.read(this.readerKeys(), this.context, (store) => store.selectById({ collection, id, where, extra }));
      if (!record) throw new NotFoundError("The requested record wasn't found.", 'record_not_found');
      return record;
    } catch (err) {
      throw translateDatabaseError(err);
    }
  }

  /**
   * Creates a record. The create rule is checked on the row the write would insert, before
   * anything is written (403). Uploads are written to storage before the record is committed and
   * removed if it is not. Without a unit to join, a before-hook or a rule, the plan is one
   * autocommit insert (the relation check reads committed rows either way, so a transaction
   * would not protect it).
   */
  async create(collection: CollectionSchema, input: WriteInput): Promise<RecordValues> {
    refuseViewWrite(collection);
    const write = normalizeWrite(this.readOperations(collection, input));
    const { writer, options } = this.parts;
    const hooks = options.hooks;
    return guard(async () => {
      const ruleWhere = this.rule(collection, 'create', write.data);
      const fieldChecks = compileFieldWriteChecks({ registry: this.parts.compiled.registry, collection, action: 'create', caller: this.caller, write });
      refuseSuperusersOnly(fieldChecks);
      const beforeHook = hooks.has(collection, 'beforeCreate');
      const ruleSeesRow = ruleWhere.length > 0 || fieldChecks.length > 0;
      const plan = planWrite({ operation: 'create', joinsUnit: this.context.unit !== undefined, beforeHook, ruleSeesRow });
      return this.parts.runPlanned(plan, this.context, async (unit) => {
        let id = await writer.chooseId(unit.store, collection, write.data);
        if (ruleSeesRow) await checkNewRecord(unit.store, { collection, values: writer.previewValues(collection, write, id), rule: ruleWhere, fields: fieldChecks });
        if (beforeHook) {
          writer.throwIfInvalid(collection, write, { superuser: isSuperuser(this.caller) });
          await hooks.runBefore(collection, 'beforeCreate', { ...this.eventBase(collection, unit), data: write.data });
          checkHookData(collection, write.data, { hook: 'beforeCreate', allowId: true });
          id = await writer.chooseId(unit.store, collection, write.data, id);
        }
        const values = writer.validate(collection, write, { superuser: isSuperuser(this.caller) });
        await writer.writeFiles(unit, collection, { id, values, write });
        const created = await writer.insert(unit.store, collection, { id, values, superuser: isSuperuser(this.caller) });
        this.parts.routing.fenceOnCommit(unit, this.caller, this.context);
        unit.afterCommit(() => hooks.runAfter(collection, 'afterCreate', { ...this.eventBase(collection, undefined), record: created }));
        return created;
      });
    });
  }

  /**
   * Updates a record; failing the update rule is a 404. A rule that reads `@request.body` needs
   * the write's values, which depend on the row (`views+: 1`), so it is checked once the write is
   * known. New files are written before commit; files the record no longer holds are removed
   * after it. Without a unit to join, a before-hook or files, the plan is `versioned`; when the
   * row changed meanwhile or the rule refused, the update runs again under a row lock (concurrent
   * updates serialise, none is lost), which decides and says why.
   */
  async update(collection: CollectionSchema, id: string, input: WriteInput): Promise<RecordValues> {
    refuseViewWrite(collection);
    const operations = this.readOperations(collection, input, { update: true });
    return guard(async () => {
      const rule = { readsBody: this.parts.compiled.rules.readsBody(collection, 'update'), where: this.rule(collection, 'update') };
      requireRecordId(id);
      const files = operations.uploads.length > 0 || operations.fields.some((w) => w.field.type === 'file');
      const beforeHook = this.parts.options.hooks.has(collection, 'beforeUpdate');
      const plan = planWrite({ operation: 'update', joinsUnit: this.context.unit !== undefined, beforeHook, files });
      const change = { collection, id, operations, rule, beforeHook };
      if (plan === 'versioned') {
        const updated = await this.parts.runPlanned(plan, this.context, (unit) => this.runUpdate(unit, 'versioned', change));
        if (updated) return updated;
      }
      // Under the lock the statement always writes the row read: only a versioned update comes back empty.
      return (await this.parts.inUnit(this.context, (unit) => this.runUpdate(unit, 'unit', change)))!;
    });
  }

  /**
   * An update's steps, in one order for both plans: the row (read with its version, or locked) ->
   * the write over it -> the rule with the body -> the before-hook -> validation -> relations ->
   * files -> the statement -> after-commit work. Undefined only under `versioned`, when the row
   * is no longer the version read or the rule refused (the statement changed nothing).
   */
  private async runUpdate(unit: WriteUnit, plan: 'versioned' | 'unit', change: UpdateChange): Promise<RecordValues | undefined> {
    const { writer, options } = this.parts;
    const { collection, id, operations, rule } = change;
    const hooks = options.hooks;
    // The rule with the body waits for the write; without it, the rule is in the read.
    const readWhere = rule.readsBody ? [] : rule.where;
    const read = plan === 'versioned' ? await unit.store.selectVersioned({ collection, id, where: readWhere }) : await lockedRow(unit.store, { collection, id, where: readWhere });
    if (!read) throw new NotFoundError("The requested record wasn't found.", 'record_not_found');
    const existing = read.record;
    const write = normalizeWrite(operations, existing);
    const where = rule.readsBody ? this.rule(collection, 'update', write.data) : rule.where;
    // Under the lock the rule with the body is a read of its own; a versioned update sends it in its statement.
    if (rule.readsBody && plan === 'unit') {
      await findOrNotFound(unit.store, { collection, id, where }).catch((err: unknown) => {
        if (err instanceof NotFoundError) this.parts.warnCleared(collection, operations.cleared);
        throw err;
      });
    }
    // The sent fields' rules, on the stored row once it passed the rule: locked, a statement of their own; versioned, in its statement.
    const fieldChecks = compileFieldWriteChecks({ registry: this.parts.compiled.registry, collection, action: 'update', caller: this.caller, write });
    if (plan === 'unit' || !rule.readsBody) refuseSuperusersOnly(fieldChecks);
    if (plan === 'unit') await checkStoredRecord(unit.store, { collection, id, fields: fieldChecks });
    if (change.beforeHook) {
      writer.throwIfInvalid(collection, write, { existing, superuser: isSuperuser(this.caller) });
      await hooks.runBefore(collection, 'beforeUpdate', { ...this.eventBase(collection, unit), data: write.data, record: existing });
      checkHookData(collection, write.data, { hook: 'beforeUpdate', allowId: false });
    }
    let values: RecordValues;
    try {
      values = writer.validate(collection, write, { existing, superuser: isSuperuser(this.caller) });
      await writer.checkRelations(unit.store, { collection, values, existing });
    } catch (err) {
      // The rule with the body and the field rules come before validation (their 404 or 403 first): not yet checked here, so the locked path decides.
      if (plan === 'versioned' && (rule.readsBody || fieldChecks.length > 0) && (err instanceof ValidationError || err instanceof BadRequestError)) return undefined;
      throw err;
    }
    await writer.writeFiles(unit, collection, { id, values, write });
    // Versioned: applies only to the row as read, and only if it passes the rule (with the body); locked: the row is ours.
    const { version } = read;
    const versionWhere = fieldChecks.length > 0 ? [...where, ...conditionsOf(fieldChecks).flat()] : where;
    const result = await writer.rejectDuplicates({ collection, operation: 'update', superuser: isSuperuser(this.caller) }, () =>
      version === undefined ? unit.store.update(collection, id, values) : unit.store.updateVersion(collection, id, values, { version, where: versionWhere }),
    );
    if (!result) return undefined;
    this.parts.routing.fenceOnCommit(unit, this.caller, this.context);
    const kept = new Set(listFileNames(collection, result));
    const removed = listFileNames(collection, existing).filter((name) => !kept.has(name));
    unit.afterCommit(() => options.files.removeNames(collection, id, removed));
    unit.afterCommit(() => hooks.runAfter(collection, 'afterUpdate', { ...this.eventBase(collection, undefined), record: result }));
    return result;
  }

  /**
   * Deletes one record (and cascades); failing the delete rule is a 404. Without a unit to join,
   * a before-hook, or a collection whose relations point at this one (nothing to unlink or
   * cascade), the plan is one autocommit statement with the rule in it; otherwise the record is
   * locked and deleted with what cascades from it.
   */
  async delete(collection: CollectionSchema, id: string): Promise<void> {
    refuseViewWrite(collection);
    return guard(async () => {
      const where = this.rule(collection, 'delete');
      requireRecordId(id);
      const { hooks } = this.parts.options;
      const backRelations = withoutViewReferences(this.parts.compiled.registry).backRelations(collection).length > 0;
      const plan = planWrite({ operation: 'delete', joinsUnit: this.context.unit !== undefined, beforeHook: hooks.has(collection, 'beforeDelete'), backRelations });
      await this.parts.runPlanned(plan, this.context, async (unit) => {
        if (plan === 'unit') {
          const record = await findOrNotFound(unit.store, { collection, id, where, lock: true });
          await this.deleteInUnit(unit, collection, [record]);
          return;
        }
        // Without an afterDelete hook, only the removal of its files reads the deleted record.
        const record = await unit.store.deleteById({ collection, id, where, returning: hooks.has(collection, 'afterDelete') ? 'record' : 'files' });
        if (!record) throw new NotFoundError("The requested record wasn't found.", 'record_not_found');
        this.afterDeleting(unit, [{ collection, record }]);
      });
    });
  }

  /**
   * Deletes every record that matches `filter` and the list rule, all or nothing: if any of them
   * fails the delete rule, nothing is deleted (403). A `null` delete rule is a 403 for
   * non-superusers even when nothing matches.
   */
  async deleteMany(collection: CollectionSchema, filter: string | undefined): Promise<{ deleted: DeletedRecord[]; count: number }> {
    refuseViewWrite(collection);
    return guard(async () => {
      if (filter === undefined || filter.trim() === '') throw new BadRequestError('A bulk delete needs a non-empty "filter" parameter.', 'filter_required');
      const deleteRule = this.rule(collection, 'delete');
      const where = fenceFilter(this.rule(collection, 'list'), compileUserFilter({ registry: this.parts.compiled.registry, collection, filter, caller: this.caller }));
      return this.parts.inUnit(this.context, async (unit) => {
        if (deleteRule.length > 0) {
          const refused = await unit.store.selectLocked({ collection, where: [...where, negateConditions(deleteRule)] });
          if (refused.length > 0) throw new ForbiddenError(`${refused.length} of the selected records may not be deleted; nothing was deleted.`);
        }
        const records = await unit.store.selectLocked({ collection, where });
        const deleted = await this.deleteInUnit(unit, collection, records);
        return { deleted, count: records.length };
      });
    });
  }

  /** Deletes records and what cascades from them inside a unit, with the before- and after-hooks of each. */
  private async deleteInUnit(unit: WriteUnit, target: CollectionSchema, records: readonly RecordValues[]): Promise<DeletedRecord[]> {
    const { hooks } = this.parts.options;
    const deleted = await deleteRecords({
      store: unit.store,
      registry: withoutViewReferences(this.parts.compiled.registry),
      collection: target,
      records,
      canView: this.viewCheck(unit.store),
      beforeEach: async (collection, record) => {
        if (hooks.has(collection, 'beforeDelete')) await hooks.runBefore(collection, 'beforeDelete', { ...this.eventBase(collection, unit), record });
      },
    });
    return this.afterDeleting(unit, deleted);
  }

  /** Leaves to the unit's commit what follows deleted records: their files removed, then the after-hooks of each. */
  private afterDeleting(unit: WriteUnit, deleted: DeletedRecord[]): DeletedRecord[] {
    const { hooks, files } = this.parts.options;
    this.parts.routing.fenceOnCommit(unit, this.caller, this.context);
    unit.afterCommit(() => files.removeRecords(deleted));
    for (const { collection, record } of deleted) {
      unit.afterCommit(() => hooks.runAfter(collection, 'afterDelete', { ...this.eventBase(collection, undefined), record }));
    }
    return deleted;
  }

  /** The keys this caller's reads are routed and fenced by (read-routing.ts). */
  private readerKeys(): string[] {
    return this.parts.routing.keysOf(this.caller, this.context);
  }

  /** What every hook event of this write carries. */
  private eventBase(collection: CollectionSchema, unit: WriteUnit | undefined) {
    return { collection: { name: collection.name, id: collection.id }, identity: this.caller.request.auth, api: this.parts.options.apiFor(unit) };
  }

  /**
   * The rule's conditions for an operation the caller asked for (over HTTP, in a batch or through
   * the server API, which all come here): a `null` rule is their 403, before any query runs.
   */
  private rule(collection: CollectionSchema, action: RuleAction, body?: Record<string, unknown>): SqlFragment[] {
    const decision = compileRule({ registry: this.parts.compiled.registry, collection, action, caller: this.caller, body });
    if (decision === 'denied') throw new ForbiddenError('Only superusers can perform this action.');
    return decision;
  }

  /**
   * Reads a write request once into operations per field: a multipart update in replace mode
   * clears what it does not send (hidden fields, and fields with a view or update rule, only for superusers).
   */
  private readOperations(collection: CollectionSchema, input: WriteInput, options: { update?: boolean } = {}): WriteOperations {
    const replace = options.update === true && input.source === 'multipart' && this.parts.options.multipartUpdate === 'replace';
    return readWriteOperations(collection, {
      body: input.data,
      source: input.source,
      uploads: input.uploads,
      clearUnsent: replace ? { includeHidden: isSuperuser(this.caller) } : undefined,
      update: options.update === true,
    });
  }

  /** Whether the caller may view a record: what an error message may name (a 404 would hide it). */
  private viewCheck(store: RecordStore): (collection: CollectionSchema, id: string) => Promise<boolean> {
    return async (collection, id) => {
      const where = compileRule({ registry: this.parts.compiled.registry, collection, action: 'view', caller: this.caller });
      if (where === 'denied') return false;
      return (await store.selectById({ collection, id, where })) !== undefined;
    };
  }
}

/** Runs `work`, turning "database unreachable" driver errors into 503s. */
async function guard<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    throw translateDatabaseError(err);
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

/** The record with `id` matching `where`, locked for the rest of the unit; no version (the lock keeps it the row read). */
async function lockedRow(store: RecordStore, options: { collection: CollectionSchema; id: string; where: readonly SqlFragment[] }): Promise<{ record: RecordValues; version?: undefined } | undefined> {
  const record = await store.selectById({ ...options, lock: true });
  return record && { record };
}
