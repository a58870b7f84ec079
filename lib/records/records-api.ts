/**
 * The server API's contract (docs/server-api.md): what `records.api` and a hook's `api` offer.
 * Types only, so that hooks and the record service can name the API without importing how it is
 * built (create-records-api.ts builds it over the record service).
 */
import type { Identity } from '../auth/identity.js';

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
  /** Words matched with the collection's search index, as `?search=` (docs/search.md). */
  search?: string;
}

/** Options of aggregate (docs/search.md, "Aggregates"): the HTTP endpoint's parameters. */
export interface AggregateOptions {
  /** Who the call acts as. Default: a guest. */
  as?: ActAs;
  /** What rules read as `@request.query.*`. */
  query?: Record<string, string>;
  /** Comma-separated fields to group by (`'status,author'`); none: one group of every record. */
  groupBy?: string;
  /** Comma-separated aggregates: `count()`, `sum(f)`, `avg(f)`, `min(f)`, `max(f)`. Default `count()`. */
  fields?: string;
  filter?: string;
  /** Words matched with the collection's search index, as getList's `search`. */
  search?: string;
  /** Comma-separated group fields and aggregate names (`'-count'`); default: the group fields ascending. */
  sort?: string;
  page?: number;
  perPage?: number;
}

/** One group of an aggregate: its group fields' values and each aggregate (`count`, `sum_amount`, …). */
export type AggregateItem = Record<string, unknown>;

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
  /** Groups and aggregates of the records the caller may list, as `GET …/aggregate` answers them (`totalItems`: the number of groups). */
  aggregate(options?: AggregateOptions): Promise<RecordListPage<AggregateItem>>;
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
