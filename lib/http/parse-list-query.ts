import type { ListQuery } from '../records/record-operations.js';
import { readPaging } from '../records/read-paging.js';
import { parseFields } from '../query/parse-fields.js';
import { readHighlightedFields, readSearchParam } from '../query/search.js';

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
  const highlight = readHighlightedFields(parseFields(readQueryParam(query, 'fields')));
  return { ...paging, filter: readQueryParam(query, 'filter'), sort: readQueryParam(query, 'sort'), search: readSearchParam(readQueryParam(query, 'search')), highlight };
}
