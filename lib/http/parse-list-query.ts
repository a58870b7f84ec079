import type { ListQuery } from '../records/record-operations.js';
import { readPaging } from '../records/read-paging.js';

/** The first value of a query parameter, or undefined (repeated parameters keep the first). */
export function readQueryParam(query: Record<string, unknown>, name: string): string | undefined {
  const value = query[name];
  const first = Array.isArray(value) ? value[0] : value;
  return typeof first === 'string' ? first : undefined;
}

/**
 * Paging and query parameters of a list call (docs/records-api.md): the paging is read by
 * readPaging, the server API's reader too, so a value pages the same on both paths.
 */
export function parseListQuery(query: Record<string, unknown>, options: { maxPerPage: number }): ListQuery {
  const paging = readPaging({ page: readQueryParam(query, 'page'), perPage: readQueryParam(query, 'perPage'), skipTotal: readQueryParam(query, 'skipTotal') }, options);
  return { ...paging, filter: readQueryParam(query, 'filter'), sort: readQueryParam(query, 'sort') };
}
