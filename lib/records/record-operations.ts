import type { RecordValues } from '../db/record-store.js';
import type { Upload } from '../files/upload.js';

/** What the record service's operations take and give (lib/records/record-service.ts), apart from how it runs them. */

/** What a list call asks for (already parsed and bounded by the HTTP layer). */
export interface ListQuery {
  page: number;
  perPage: number;
  skipTotal: boolean;
  filter?: string;
  sort?: string;
  /** Words to match with the collection's search index (docs/search.md); read by readSearchParam. */
  search?: string;
  /** Top-level fields asked `:highlight` of (`fields`), marked for the page's records. */
  highlight?: readonly string[];
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
