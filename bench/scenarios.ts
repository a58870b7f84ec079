/**
 * The measured scenarios, as plain data: the runner sends one to the load generator (a
 * separate process) over IPC, so nothing here may be a function.
 */
import { THUMB, WRITE_MARKER } from './bench-data.js';

/**
 * What the load generator sends: a fixed GET, a view rotating over seeded ids, a JSON create, a
 * multipart upload, an update rotating over the prepared posts `first`..`first + count - 1`, a
 * delete of each of them once (then of an id that does not exist: a 404, which fails the cell), or
 * a batch of `size` creates. The update and delete posts are prepared for each cell, which fills in
 * `first` and `count` (bench/prepare-writes.ts): the table's own are 0.
 */
export type LoadSpec =
  | { kind: 'get'; path: string }
  | { kind: 'view'; pathPrefix: string; rows: number }
  | { kind: 'create'; path: string }
  | { kind: 'upload'; path: string; file: string }
  | { kind: 'update'; pathPrefix: string; first: number; count: number }
  | { kind: 'delete'; pathPrefix: string; first: number; count: number }
  | { kind: 'batch'; path: string; size: number };

/** `realtime` is not a row of this table: bench/realtime-bench.ts measures it. */
export type ScenarioKey = 'list' | 'listTotal' | 'listExpand' | 'view' | 'create' | 'thumb' | 'upload' | 'update' | 'delete' | 'batch' | 'search' | 'aggregate' | 'realtime';

/** The scenarios that write on rows prepared for them before each cell. */
export const PREPARED_SCENARIOS = new Set<ScenarioKey>(['update', 'delete']);

/** One row of the result table. */
export interface Scenario {
  key: ScenarioKey;
  /** Its number (1-7 from issue 5, 8-10 from issue 35) and the label printed in the table. */
  number: number;
  label: string;
  spec: LoadSpec;
}

/** Everything the list scenarios share: a filter on two columns and newest first. */
export const LIST_FILTER = 'published = true && views >= 100';
export const LIST_SORT = '-created';
const RECORDS = '/backend/api/collections/posts/records';
const LIST = `${RECORDS}?filter=${encodeURIComponent(LIST_FILTER)}&sort=${encodeURIComponent(LIST_SORT)}`;

/**
 * The search cell's words: in every seeded post's body, so each search ranks all 100,000 matches
 * for its 20 (the heavy case of a common word; the seed's texts offer no selective one).
 */
export const SEARCH_TEXT = 'lorem ipsum';
/** The aggregate cell: posts per author (1,000 groups, the default cap) and their views, a page of 20. */
export const AGGREGATE_QUERY = 'groupBy=author&fields=count(),sum(views)&perPage=20';

/** The JSON body of a create (the author rotates per request in the load generator). */
export function buildCreateBody(author: string): string {
  return JSON.stringify({ title: `${WRITE_MARKER} create`, body: 'Written by the benchmark.', views: 1, published: true, author });
}

/** The JSON body of an update: a new title (still the bench's) and views below the list filter's 100. */
export function buildUpdateBody(n: number): string {
  return JSON.stringify({ title: `${WRITE_MARKER} update ${n}`, views: n % 100 });
}

/** The creates one batch holds (PocketBase's batch body, as JSON). */
export const BATCH_SIZE = 10;

/** The JSON body of a batch of creates, one per author. */
export function buildBatchBody(authors: readonly string[]): string {
  return JSON.stringify({ requests: authors.map((author) => ({ method: 'POST', url: '/api/collections/posts/records', body: JSON.parse(buildCreateBody(author)) as unknown })) });
}

/**
 * The scenarios in table order. The thumbnail's path is only known once an image was uploaded,
 * so it is passed in.
 */
export function buildScenarios(options: { rows: number; thumbPath: string; uploadFile: string }): Scenario[] {
  return [
    { key: 'list', number: 1, label: 'list: filter + sort, skipTotal', spec: { kind: 'get', path: `${LIST}&skipTotal=1` } },
    { key: 'listTotal', number: 2, label: 'list: same, with total count', spec: { kind: 'get', path: LIST } },
    { key: 'listExpand', number: 3, label: 'list: same as 1, expand=author', spec: { kind: 'get', path: `${LIST}&skipTotal=1&expand=author` } },
    { key: 'view', number: 4, label: 'view by id (random ids)', spec: { kind: 'view', pathPrefix: `${RECORDS}/`, rows: options.rows } },
    { key: 'create', number: 5, label: 'create (JSON)', spec: { kind: 'create', path: RECORDS } },
    { key: 'thumb', number: 6, label: `download cached thumbnail (${THUMB})`, spec: { kind: 'get', path: options.thumbPath } },
    { key: 'upload', number: 7, label: 'create with 1 MiB upload (multipart)', spec: { kind: 'upload', path: RECORDS, file: options.uploadFile } },
    { key: 'update', number: 8, label: 'update (JSON: title, views)', spec: { kind: 'update', pathPrefix: `${RECORDS}/`, first: 0, count: 0 } },
    { key: 'delete', number: 9, label: 'delete', spec: { kind: 'delete', pathPrefix: `${RECORDS}/`, first: 0, count: 0 } },
    { key: 'batch', number: 10, label: `batch of ${BATCH_SIZE} creates (JSON)`, spec: { kind: 'batch', path: '/backend/api/batch', size: BATCH_SIZE } },
    { key: 'search', number: 11, label: 'ranked search, perPage=20, every post matches', spec: { kind: 'get', path: `${RECORDS}?search=${encodeURIComponent(SEARCH_TEXT)}&sort=${encodeURIComponent('-@rank')}&perPage=20&skipTotal=1` } },
    { key: 'aggregate', number: 12, label: 'aggregate: groupBy author, count(), sum(views)', spec: { kind: 'get', path: `/backend/api/collections/posts/aggregate?${AGGREGATE_QUERY}` } },
  ];
}
