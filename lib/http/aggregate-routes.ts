import type { RequestHandler } from 'express';
import type { RecordService } from '../records/record-service.js';
import { readPaging } from '../records/read-paging.js';
import { readSearchParam } from '../query/search.js';
import { readQueryParam } from './parse-list-query.js';
import type { CallerResolver } from './resolve-caller.js';
import type { Route } from './route-table.js';
import { operationContextOf } from './request-database-context.js';

/** What the aggregate route needs from the router. */
export interface AggregateRoutesOptions {
  records: RecordService;
  resolveCaller: CallerResolver;
  maxPerPage: number;
  /** `limits.maxAggregateGroups`. */
  maxAggregateGroups: number;
}

/**
 * `GET /api/collections/{collection}/aggregate` (docs/search.md, "Aggregates"): groups and
 * aggregates of the records the caller's list rule shows, in PocketBase's list shape. The handler
 * only reads the request; rules, checks and SQL live in the record service.
 */
export function createAggregateRoutes(options: AggregateRoutesOptions): Route[] {
  const { records, resolveCaller } = options;

  const aggregate: RequestHandler = async (req, res) => {
    const collection = records.collection(req.params.collection as string);
    // Express parses the query string again at every read of `req.query`: read once.
    const query = req.query;
    const paging = readPaging({ page: readQueryParam(query, 'page'), perPage: readQueryParam(query, 'perPage') }, { maxPerPage: options.maxPerPage });
    const caller = await resolveCaller(req);
    const result = await records.as(caller, operationContextOf(req)).aggregate(collection, {
      page: paging.page,
      perPage: paging.perPage,
      filter: readQueryParam(query, 'filter'),
      search: readSearchParam(readQueryParam(query, 'search')),
      groupBy: readQueryParam(query, 'groupBy'),
      fields: readQueryParam(query, 'fields'),
      sort: readQueryParam(query, 'sort'),
      maxGroups: options.maxAggregateGroups,
    });
    res.json(result);
  };

  return [{ method: 'GET', path: '/api/collections/:collection/aggregate', handlers: [aggregate] }];
}
