import type { Identity } from '../auth/identity.js';
import { NotFoundError, ValidationError } from '../errors.js';
import { isFileInput, prepareFileInputs, type FileInput } from '../files/file-inputs.js';
import type { CollectionSchema } from '../schema/collection-schema.js';
import { createFieldError } from '../schema/coerce-value.js';
import { parseModifierKey } from '../schema/field-modifiers.js';
import type { Caller } from './caller.js';
import { parseResponseShape, type RecordPresenter } from './present-records.js';
import type { OperationContext, RecordService, WriteInput } from './record-service.js';
import type { WriteUnit } from './write-unit.js';
import type { DatabaseContext } from '../db/database-context.js';
import { DEFAULT_PER_PAGE } from '../query/default-per-page.js';

/** A record as the API returns it: the same object an HTTP response holds. */
export interface RecordModel {
  id: string;
  collectionId: string;
  collectionName: string;
  created: string;
  updated: string;
  expand?: Record<string, unknown>;
  [field: string]: unknown;
}

/** A page of records, as `GET .../records` answers it. */
export interface RecordListPage<T = RecordModel> {
  page: number;
  perPage: number;
  totalItems: number;
  totalPages: number;
  items: T[];
}

/**
 * Who a call acts as: an identity (rules apply as for HTTP, `@request.auth.*` reads it),
 * `'superuser'` (rules bypassed, hidden fields visible; `@request.auth.id` is `""`), or
 * absent / `null` for a guest.
 */
export type ActAs = Identity | 'superuser' | null | undefined;

/** Options of every call. */
export interface ApiOptions {
  /** Who the call acts as. Default: a guest. */
  as?: ActAs;
  /** Which fields to return, as the `fields` parameter. */
  fields?: string;
  /** Which relations to expand, as the `expand` parameter. */
  expand?: string;
  /** What rules read as `@request.query.*`. */
  query?: Record<string, string>;
}

/** Options of getList. */
export interface ListOptions extends ApiOptions {
  filter?: string;
  sort?: string;
  /** Skip the count: `totalItems` and `totalPages` are -1. */
  skipTotal?: boolean;
}

/** Options of getFullList. */
export interface FullListOptions extends Omit<ListOptions, 'skipTotal'> {
  /** Records per query while paging through (capped at `limits.maxPerPage`). Default 1000. */
  batch?: number;
}

/**
 * A write body: field values as in a JSON body (modifiers such as `views+` included), where a
 * file field takes FileInput values (`cover: { name, data }`, `docs: ['kept_name.png', { name, data }]`,
 * `'docs+': fileFromPath(path)`). A value JSON can produce is never a file: a body forwarded from a
 * client can name kept files, not upload one, nor name a server path.
 */
export type WriteBody = Record<string, unknown>;

/** One collection's records, with the method names of the pocketbase SDK's RecordService. */
export interface CollectionApi {
  getList(page?: number, perPage?: number, options?: ListOptions): Promise<RecordListPage>;
  getFullList(options?: FullListOptions): Promise<RecordModel[]>;
  /** The first record matching `filter`; a NotFoundError (404) when none does. */
  getFirstListItem(filter: string, options?: ListOptions): Promise<RecordModel>;
  getOne(id: string, options?: ApiOptions): Promise<RecordModel>;
  create(body: WriteBody, options?: ApiOptions): Promise<RecordModel>;
  update(id: string, body: WriteBody, options?: ApiOptions): Promise<RecordModel>;
  /** Deletes the record (and what cascades from it); resolves `true`, as the SDK does. */
  delete(id: string, options?: Pick<ApiOptions, 'as' | 'query'>): Promise<true>;
}

/** The server API (`records.api`): the host's own code, through the same rules, validation, files and hooks as HTTP. */
export interface RecordsApi {
  /** A collection by name or id; unknown names fail on the first call with a NotFoundError. */
  collection(nameOrId: string): CollectionApi;
  /**
   * Runs `work` in one transaction: every call through `tx` commits together, or none does when
   * `work` throws (files written are removed). After-hooks, old-file removal and realtime
   * messages happen after the commit. Calls through `tx` after `work` has returned are refused.
   * Inside a transaction, `tx.transaction()` simply joins it.
   */
  transaction<T>(work: (tx: RecordsApi) => Promise<T>): Promise<T>;
}

/** What the API works through, available once the router is ready. */
export interface RecordsApiDeps {
  service: RecordService;
  presenter: RecordPresenter;
  maxPerPage: number;
  maxFileSize: number;
  /** Where streamed file inputs are spooled. */
  tempDir: string;
  /**
   * What bounds every call's statements (lib/db/database-context.ts): the router's limits, so one
   * API call cannot hold the database longer than a request could. Calls inside a unit use the
   * unit's store, which carries the bounds of whoever opened it.
   */
  bounds: DatabaseContext;
}

const FULL_LIST_BATCH = 1000;

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
    async function present(d: RecordsApiDeps & { collection: CollectionSchema }, records: Parameters<RecordPresenter['present']>[0]['records'], caller: Caller, options: ApiOptions) {
      const shape = parseResponseShape({ fields: options.fields, expand: options.expand });
      return (await d.presenter.present({ collection: d.collection, records, caller, shape, store: d.service.storeOf(context(d)) })) as RecordModel[];
    }

    async function getList(page = 1, perPage = DEFAULT_PER_PAGE, options: ListOptions = {}): Promise<RecordListPage> {
      const d = await resolve();
      parseResponseShape(options);
      const caller = callerFor(options, 'GET');
      const query = { page: Math.max(1, Math.trunc(page) || 1), perPage: Math.min(Math.max(1, Math.trunc(perPage) || DEFAULT_PER_PAGE), d.maxPerPage), skipTotal: options.skipTotal === true, filter: options.filter, sort: options.sort };
      const result = await d.service.list(d.collection, query, caller, context(d));
      return { page: result.page, perPage: result.perPage, totalItems: result.totalItems, totalPages: result.totalPages, items: await present(d, result.items, caller, options) };
    }

    async function write(
      body: WriteBody,
      options: ApiOptions & { method: 'POST' | 'PATCH' },
      run: (d: RecordsApiDeps & { collection: CollectionSchema }, input: WriteInput, caller: Caller) => Promise<Parameters<RecordPresenter['present']>[0]['records'][number]>,
    ) {
      const d = await resolve();
      parseResponseShape(options);
      const { data, files, notFiles } = splitFileInputs(d.collection, body);
      const prepared = await prepareFileInputs(files, { tempDir: d.tempDir, maxFileSize: d.maxFileSize });
      try {
        const caller = callerFor(options, options.method);
        const record = await run(d, { data, source: 'json', uploads: prepared.uploads }, caller).catch((err: unknown) => {
          throw explainNotFiles(err, notFiles);
        });
        return (await present(d, [record], caller, options))[0]!;
      } finally {
        await prepared.discard();
      }
    }

    return {
      getList: (page, perPage, options) => getList(page, perPage, options),
      async getFullList(options = {}) {
        const d = await deps();
        const batch = Math.min(Math.max(1, Math.trunc(options.batch ?? FULL_LIST_BATCH)), d.maxPerPage);
        const all: RecordModel[] = [];
        for (let page = 1; ; page++) {
          const result = await getList(page, batch, { ...options, skipTotal: true });
          all.push(...result.items);
          if (result.items.length < batch) return all;
        }
      },
      async getFirstListItem(filter, options = {}) {
        const result = await getList(1, 1, { ...options, filter, skipTotal: true });
        if (result.items.length === 0) throw new NotFoundError("The requested resource wasn't found.", 'record_not_found');
        return result.items[0]!;
      },
      async getOne(id, options = {}) {
        const d = await resolve();
        parseResponseShape(options);
        const caller = callerFor(options, 'GET');
        const record = await d.service.view(d.collection, id, caller, context(d));
        return (await present(d, [record], caller, options))[0]!;
      },
      create: (body, options = {}) => write(body, { ...options, method: 'POST' }, (d, input, caller) => d.service.create(d.collection, input, caller, context(d))),
      update: (id, body, options = {}) => write(body, { ...options, method: 'PATCH' }, (d, input, caller) => d.service.update(d.collection, id, input, caller, context(d))),
      async delete(id, options = {}) {
        const d = await resolve();
        await d.service.delete(d.collection, id, callerFor(options, 'DELETE'), context(d));
        return true as const;
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
