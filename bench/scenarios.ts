/**
 * The seven measured scenarios, as plain data: the runner sends one to the load generator (a
 * separate process) over IPC, so nothing here may be a function.
 */
import { THUMB, WRITE_MARKER } from './bench-data.js';

/** What the load generator sends: a fixed GET, a view rotating over seeded ids, a JSON create, or a multipart upload. */
export type LoadSpec =
  | { kind: 'get'; path: string }
  | { kind: 'view'; pathPrefix: string; rows: number }
  | { kind: 'create'; path: string }
  | { kind: 'upload'; path: string; file: string };

/** `realtime` is not a row of this table: bench/realtime-bench.ts measures it. */
export type ScenarioKey = 'list' | 'listTotal' | 'listExpand' | 'view' | 'create' | 'thumb' | 'upload' | 'realtime';

/** One row of the result table. */
export interface Scenario {
  key: ScenarioKey;
  /** Its number in issue 5 (1-7) and the label printed in the table. */
  number: number;
  label: string;
  spec: LoadSpec;
}

/** Everything the list scenarios share: a filter on two columns and newest first. */
export const LIST_FILTER = 'published = true && views >= 100';
export const LIST_SORT = '-created';
const RECORDS = '/backend/api/collections/posts/records';
const LIST = `${RECORDS}?filter=${encodeURIComponent(LIST_FILTER)}&sort=${encodeURIComponent(LIST_SORT)}`;

/** The JSON body of a create (the author rotates per request in the load generator). */
export function buildCreateBody(author: string): string {
  return JSON.stringify({ title: `${WRITE_MARKER} create`, body: 'Written by the benchmark.', views: 1, published: true, author });
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
  ];
}
