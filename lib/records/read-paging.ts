/**
 * The one reader of a list's paging (`page`, `perPage`, `skipTotal`), for the HTTP list route and
 * the server API alike, so that the same values can never page differently on the two paths
 * (docs/records-api.md, "List"; docs/server-api.md). It follows PocketBase's
 * tools/search/provider.go, which the SDK assumes:
 *
 * - `page` 0 or below is page 1, `perPage` 0 or below is the default (a negative size is a
 *   client's "I don't mind", not a request for one record), and a `perPage` over the cap is the
 *   cap, echoed as such;
 * - anything that is not an integer (`2.5`, `1e3`, `abc`, NaN, Infinity) is a 400, as
 *   PocketBase's `strconv.Atoi` refuses it: truncating would hand back a page nobody asked for;
 * - an integer past 2^53 - 1 is a 400, as PocketBase's is past int64: beyond it a number is no
 *   longer exact, so the page would not be the one asked for either;
 * - a page whose first record lies past 2^53 - 1 records is a 400: no table holds that many, and
 *   the offset would no longer be exact;
 * - `skipTotal` takes Go's `strconv.ParseBool` words (`1`, `t`, `true`, `TRUE`, `True` and the
 *   false ones) and booleans; any other word is a 400 rather than a silent count.
 *
 * Empty or absent values take the defaults. The server API's numbers are read by the same rules
 * as HTTP's text (a string given to the server API is read as HTTP reads it), so `String(value)`
 * over HTTP and `value` through the API always agree.
 */
import { BadRequestError } from '../errors.js';
import { DEFAULT_PER_PAGE } from '../query/default-per-page.js';

/** A list's paging, read and normalised: what the record service's list takes. */
export interface Paging {
  page: number;
  perPage: number;
  skipTotal: boolean;
}

/** Paging as given: HTTP's query text, or the server API's arguments. */
export interface PagingInput {
  page?: unknown;
  perPage?: unknown;
  skipTotal?: unknown;
}

/** What a page size is called in errors, what stands in for none, and its cap. */
export interface PageSizeOptions {
  name: string;
  fallback: number;
  max: number;
}

/** PocketBase's `Atoi` syntax: an optional sign and decimal digits, nothing around them. */
const INTEGER_TEXT = /^[+-]?\d+$/;
const TRUE_WORDS = new Set(['1', 't', 'T', 'true', 'TRUE', 'True']);
const FALSE_WORDS = new Set(['0', 'f', 'F', 'false', 'FALSE', 'False']);

/** Reads `page`, `perPage` (capped at `maxPerPage`) and `skipTotal`; a BadRequestError (400) for a value the rules above refuse. */
export function readPaging(input: PagingInput, options: { maxPerPage: number }): Paging {
  const perPage = readPageSize(input.perPage, { name: 'perPage', fallback: DEFAULT_PER_PAGE, max: options.maxPerPage });
  const page = Math.max(1, readInteger(input.page, 'page') ?? 1);
  if ((page - 1) * perPage > Number.MAX_SAFE_INTEGER) {
    throw new BadRequestError(`The "page" parameter is too large: the records before page ${page} of ${perPage} would be more than ${Number.MAX_SAFE_INTEGER}.`, 'invalid_parameter');
  }
  return { page, perPage, skipTotal: readSkipTotal(input.skipTotal) };
}

/**
 * A page size by the rules of `perPage`: `fallback` when absent or 0 or below, never above `max`
 * (the fallback neither, as `limits.maxPerPage` may be under the default). getFullList's `batch`
 * is one too, named in its errors as such.
 */
export function readPageSize(value: unknown, options: PageSizeOptions): number {
  const size = readInteger(value, options.name);
  return Math.min(size === undefined || size <= 0 ? options.fallback : size, options.max);
}

/** An integer parameter, or undefined when absent or empty. */
function readInteger(value: unknown, name: string): number | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const n = typeof value === 'number' ? value : typeof value === 'string' && INTEGER_TEXT.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n)) {
    throw new BadRequestError(`The "${name}" parameter must be an integer between -${Number.MAX_SAFE_INTEGER} and ${Number.MAX_SAFE_INTEGER}.`, 'invalid_parameter');
  }
  return n;
}

function readSkipTotal(value: unknown): boolean {
  if (value === undefined || value === null || value === '') return false;
  if (typeof value === 'boolean') return value;
  if (typeof value === 'string' && TRUE_WORDS.has(value)) return true;
  if (typeof value === 'string' && FALSE_WORDS.has(value)) return false;
  throw new BadRequestError('The "skipTotal" parameter must be true or false (1 or 0).', 'invalid_parameter');
}
