import type { Identity } from '../auth/identity.js';
import type { DatabaseContext } from '../db/statements/database-context.js';
import type { RecordValues } from '../db/record-store.js';
import { NotFoundError, ValidationError } from '../errors.js';
import { isFileInput, prepareFileInputs, type FileInput } from '../files/file-inputs.js';
import type { CollectionSchema } from '../schema/collection-schema.js';
import { createFieldError } from '../schema/coerce-value.js';
import { parseModifierKey } from '../schema/field-modifiers.js';
import type { Caller } from './caller.js';
import { parseResponseShape, type RecordPresenter, type ResponseShape } from './present-records.js';
import { readPageSize, readPaging } from './read-paging.js';
import type { WriteInput } from './record-operations.js';
import type { OperationContext, RecordService, ScopedRecordService } from './record-service.js';
import type { ApiOptions, CollectionApi, ListOptions, RecordListPage, RecordModel, RecordsApi, WriteBody } from './records-api.js';
import type { WriteUnit } from './write-unit.js';
import { readHighlightedFields, readSearchParam } from '../query/search.js';

/** What the API works through, available once the router is ready. */
export interface RecordsApiDeps {
  service: RecordService;
  maxPerPage: number;
  /** `limits.maxAggregateGroups`. */
  maxAggregateGroups: number;
  maxFileSize: number;
  /** Where streamed file inputs are spooled. */
  tempDir: string;
  /**
   * What bounds every call's statements (lib/db/statements/database-context.ts): the router's limits, so one
   * API call cannot hold the database longer than a request could. Calls inside a unit use the
   * unit's store, which carries the bounds of whoever opened it.
   */
  bounds: DatabaseContext;
}

const FULL_LIST_BATCH = 1000;

/** The dependencies with the collection a call names, resolved. */
type ResolvedDeps = RecordsApiDeps & { collection: CollectionSchema };

/**
 * Builds the server API over the record service. `deps` resolves once the router is ready (calls
 * made earlier wait, and fail with its error if it failed). With `unit`, every call runs inside
 * that write unit (a transaction or a hook's).
 */
export function createRecordsApi(deps: () => Promise<RecordsApiDeps>, unit?: WriteUnit, scope: { open: boolean } = { open: true }): RecordsApi {
  const context = (d: RecordsApiDeps): OperationContext => {
    if (!scope.open) throw new Error('recordbase: this transaction is over; use tx only inside the transaction() callback');
    return { unit, database: d.bounds };
  };

  const collectionApi = (nameOrId: string): CollectionApi => {
    const resolve = async () => {
      const d = await deps();
      return { ...d, collection: d.service.collection(nameOrId) };
    };
    /** The service as the call's caller, in the call's context. */
    const scoped = (d: RecordsApiDeps, caller: Caller): ScopedRecordService => d.service.as(caller, context(d));
    async function present(d: ResolvedDeps, records: readonly RecordValues[], view: { caller: Caller; shape: ResponseShape }) {
      return (await scoped(d, view.caller).present(d.collection, records, { shape: view.shape })) as RecordModel[];
    }

    async function getList(page?: number, perPage?: number, options: ListOptions = {}): Promise<RecordListPage> {
      const d = await resolve();
      const paging = readPaging({ page, perPage, skipTotal: options.skipTotal }, d);
      const shape = parseResponseShape(options);
      const caller = callerFor(options, 'GET');
      const query = { ...paging, filter: options.filter, sort: options.sort, search: readSearchParam(options.search), highlight: readHighlightedFields(shape.selection) };
      const result = await scoped(d, caller).list(d.collection, query);
      return { page: result.page, perPage: result.perPage, totalItems: result.totalItems, totalPages: result.totalPages, items: await present(d, result.items, { caller, shape }) };
    }

    async function write(body: WriteBody, options: ApiOptions & { method: 'POST' | 'PATCH' }, run: (records: ScopedRecordService, d: ResolvedDeps, input: WriteInput) => Promise<RecordValues>) {
      const d = await resolve();
      const shape = parseResponseShape(options);
      const { data, files, notFiles } = splitFileInputs(d.collection, body);
      const prepared = await prepareFileInputs(files, { tempDir: d.tempDir, maxFileSize: d.maxFileSize });
      try {
        const caller = callerFor(options, options.method);
        const record = await run(scoped(d, caller), d, { data, source: 'json', uploads: prepared.uploads }).catch((err: unknown) => {
          throw explainNotFiles(err, notFiles);
        });
        return (await present(d, [record], { caller, shape }))[0]!;
      } finally {
        await prepared.discard();
      }
    }

    return {
      getList: (page, perPage, options) => getList(page, perPage, options),
      async getFullList(options = {}) {
        const d = await deps();
        const batch = readPageSize(options.batch, { name: 'batch', fallback: FULL_LIST_BATCH, max: d.maxPerPage });
        const all: RecordModel[] = [];
        for (let page = 1; ; page++) {
          const result = await getList(page, batch, { ...options, skipTotal: true });
          all.push(...result.items);
          if (result.items.length < result.perPage) return all;
        }
      },
      async getFirstListItem(filter, options = {}) {
        const result = await getList(1, 1, { ...options, filter, skipTotal: true });
        if (result.items.length === 0) throw new NotFoundError("The requested resource wasn't found.", 'record_not_found');
        return result.items[0]!;
      },
      async getOne(id, options = {}) {
        const d = await resolve();
        const shape = parseResponseShape(options);
        const caller = callerFor(options, 'GET');
        const record = await scoped(d, caller).view(d.collection, id);
        return (await present(d, [record], { caller, shape }))[0]!;
      },
      create: (body, options = {}) => write(body, { ...options, method: 'POST' }, (records, d, input) => records.create(d.collection, input)),
      update: (id, body, options = {}) => write(body, { ...options, method: 'PATCH' }, (records, d, input) => records.update(d.collection, id, input)),
      async delete(id, options = {}) {
        const d = await resolve();
        await scoped(d, callerFor(options, 'DELETE')).delete(d.collection, id);
        return true as const;
      },
      async aggregate(options = {}) {
        const d = await resolve();
        const paging = readPaging({ page: options.page, perPage: options.perPage }, d);
        const { groupBy, fields, filter, sort } = options;
        const query = { ...paging, groupBy, fields, filter, sort, search: readSearchParam(options.search), maxGroups: d.maxAggregateGroups };
        return scoped(d, callerFor(options, 'GET')).aggregate(d.collection, query);
      },
    };
  };

  const api: RecordsApi = {
    collection: collectionApi,
    async transaction(work) {
      if (unit) return work(api);
      const d = await deps();
      return d.service.inUnit({ database: d.bounds }, async (txUnit) => {
        const txScope = { open: true };
        try {
          return await work(createRecordsApi(deps, txUnit, txScope));
        } finally {
          txScope.open = false;
        }
      });
    },
  };
  return api;
}

/** The caller a call acts as (see ActAs). */
function callerFor(options: ApiOptions, method: string): Caller {
  const as = options.as;
  let auth: Identity | null = null;
  if (as === 'superuser') auth = { id: '', superuser: true };
  else if (as !== undefined && as !== null) {
    if (typeof as !== 'object' || typeof as.id !== 'string') throw new TypeError('as must be an identity with a string "id", "superuser", or null for a guest');
    auth = as;
  }
  const query = Object.assign(Object.create(null) as Record<string, string>, options.query ?? {});
  return { request: { auth, query, body: {}, method } };
}

/**
 * Splits a write body into plain values and the file inputs of its file fields: a FileInput
 * becomes an upload under the key as written (`cover`, `docs+`), and the names beside it in an
 * array stay as the field's value (the existing files kept), as a multipart body would send them.
 * Any other object in a file field stays a plain value too, which validation refuses (422) after
 * the rules, as over HTTP; `notFiles` names those fields, so the error can say what a file is.
 */
function splitFileInputs(
  collection: CollectionSchema,
  body: WriteBody,
): { data: Record<string, unknown>; files: { part: string; input: FileInput }[]; notFiles: Set<string> } {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new TypeError('a write body must be an object of field values');
  const data: Record<string, unknown> = {};
  const files: { part: string; input: FileInput }[] = [];
  const notFiles = new Set<string>();
  for (const [key, value] of Object.entries(body)) {
    const field = collection.field(parseModifierKey(key).name);
    const items = Array.isArray(value) ? value : [value];
    if (field?.type === 'file' && items.some((item) => item !== null && typeof item === 'object' && !isFileInput(item))) notFiles.add(field.name);
    if (field?.type !== 'file' || !items.some(isFileInput)) {
      data[key] = value;
      continue;
    }
    for (const item of items) if (isFileInput(item)) files.push({ part: key, input: item });
    const names = items.filter((item) => !isFileInput(item));
    if (names.length > 0) data[key] = names;
  }
  return { data, files, notFiles };
}

const NOT_A_FILE =
  "Must be file names or files; a file's data must be a Buffer, a Uint8Array or a Readable (fileFromPath for a file on disk), never a string.";

/**
 * The validation error of a write whose file fields held objects that are not files, with those
 * fields' messages saying what a file is: the generic "list of text values" would mislead whoever
 * passed `{ name, data: path }`. The code stays the one HTTP answers.
 */
function explainNotFiles(err: unknown, notFiles: ReadonlySet<string>): unknown {
  if (!(err instanceof ValidationError) || notFiles.size === 0) return err;
  const data = { ...err.data };
  for (const name of notFiles) if (data[name]?.code === 'validation_invalid_value') data[name] = createFieldError('validation_invalid_value', NOT_A_FILE);
  return new ValidationError(data, err.message);
}
