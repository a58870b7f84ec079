import { BadRequestError } from '../errors.js';
import { DEFAULT_PER_PAGE } from '../query/default-per-page.js';
import type { ListQuery } from '../records/record-service.js';

/** The first value of a query parameter, or undefined (repeated parameters keep the first). */
export function readQueryParam(query: Record<string, unknown>, name: string): string | undefined {
  const value = query[name];
  const first = Array.isArray(value) ? value[0] : value;
  return typeof first === 'string' ? first : undefined;
}

function readPositiveInt(query: Record<string, unknown>, name: string, fallback: number): number {
  const raw = readQueryParam(query, name);
  if (raw === undefined || raw === '') return fallback;
  if (!/^-?\d{1,9}$/.test(raw.trim())) throw new BadRequestError(`The "${name}" parameter must be a positive integer.`, 'invalid_parameter');
  const n = Number(raw.trim());
  return n < 1 ? fallback : n;
}

/**
 * Paging and query parameters of a list call (docs/records-api.md): page defaults to 1, perPage
 * to DEFAULT_PER_PAGE and is capped at `maxPerPage` (the capped value is echoed); a non-numeric
 * value is a 400.
 */
export function parseListQuery(query: Record<string, unknown>, options: { maxPerPage: number }): ListQuery {
  const skipTotal = readQueryParam(query, 'skipTotal');
  return {
    page: readPositiveInt(query, 'page', 1),
    perPage: Math.min(readPositiveInt(query, 'perPage', DEFAULT_PER_PAGE), options.maxPerPage),
    skipTotal: skipTotal === '1' || skipTotal === 'true',
    filter: readQueryParam(query, 'filter'),
    sort: readQueryParam(query, 'sort'),
  };
}
