import express, { type Request, type RequestHandler, type Response } from 'express';
import type { WriteInput } from '../records/record-operations.js';
import type { RecordService, ScopedRecordService } from '../records/record-service.js';
import { parseResponseShape, type ResponseShape } from '../records/present-records.js';
import { parseListQuery, readQueryParam } from './parse-list-query.js';
import { readJsonBody } from './read-json-body.js';
import type { RecordValues } from '../db/record-store.js';
import type { CollectionSchema } from '../schema/collection-schema.js';
import type { MultipartReader } from './read-multipart.js';
import type { CallerResolver } from './resolve-caller.js';
import type { Route } from './route-table.js';
import { operationContextOf } from './request-database-context.js';

/** What the record routes need from the router. */
export interface RecordsRoutesOptions {
  records: RecordService;
  /** Who is calling, from the Authorization header (the router's one resolver for it). */
  resolveCaller: CallerResolver;
  /** Reads a multipart body under the request limits (the router's one reader for them). */
  readMultipart: MultipartReader;
  maxBodySize: number;
  maxPerPage: number;
}

/** The response shape a request asks for (`fields`, `expand`), parsed: a bad one is a 400 before anything runs. */
function shapeOf(req: Request): ResponseShape {
  // Express parses the query string again at every read of `req.query`: read once.
  const query = req.query;
  return parseResponseShape({ fields: readQueryParam(query, 'fields'), expand: readQueryParam(query, 'expand') });
}

/**
 * Whether the body is multipart: a JSON body (most writes) is told apart by a look at the header,
 * without parsing its media type a second time after the JSON parser (`req.is` decides the rest).
 */
function isMultipart(req: Request): boolean {
  const type = req.headers['content-type'];
  return type !== undefined && /multipart/i.test(type) && Boolean(req.is('multipart/form-data'));
}

/**
 * The records endpoints (docs/records-api.md). Each handler only parses the request, calls the
 * record service and sends what it presents; rules, SQL and validation live below.
 */
export function createRecordsRoutes(options: RecordsRoutesOptions): Route[] {
  const { records, resolveCaller } = options;
  const json = express.json({ limit: options.maxBodySize, strict: false });

  const list: RequestHandler = async (req, res) => {
    const collection = records.collection(req.params.collection as string);
    const query = parseListQuery(req.query, { maxPerPage: options.maxPerPage });
    const shape = shapeOf(req);
    const caller = await resolveCaller(req);
    const context = operationContextOf(req);
    const scoped = records.as(caller, context);
    const result = await scoped.list(collection, query);
    const items = await scoped.present(collection, result.items, { shape });
    res.json({ page: result.page, perPage: result.perPage, totalItems: result.totalItems, totalPages: result.totalPages, items });
  };

  const view: RequestHandler = async (req, res) => {
    const collection = records.collection(req.params.collection as string);
    const shape = shapeOf(req);
    const caller = await resolveCaller(req);
    const context = operationContextOf(req);
    const scoped = records.as(caller, context);
    const record = await scoped.view(collection, req.params.id as string);
    res.json((await scoped.present(collection, [record], { shape }))[0]);
  };

  /**
   * Runs a create or update with the body in either format. The collection is resolved first,
   * so an unknown one is a 404 before any upload is spooled; spooled uploads are removed when
   * the write is done, whatever happened.
   */
  async function write(req: Request, res: Response, run: (scoped: ScopedRecordService, collection: CollectionSchema, input: WriteInput) => Promise<RecordValues>) {
    const collection = records.collection(req.params.collection as string);
    const shape = shapeOf(req);
    const multipart = isMultipart(req) ? await options.readMultipart(req, res) : undefined;
    let response: unknown;
    try {
      const input: WriteInput = multipart
        ? { data: multipart.fields, source: 'multipart', uploads: multipart.uploads }
        : { data: readJsonBody(req), source: 'json' };
      const caller = await resolveCaller(req);
      const context = operationContextOf(req);
      const scoped = records.as(caller, context);
      const record = await run(scoped, collection, input);
      response = (await scoped.present(collection, [record], { shape }))[0];
    } finally {
      // Before answering, so that a client who sees the response sees no spool left either.
      await multipart?.discard();
    }
    res.json(response);
  }

  const create: RequestHandler = (req, res) => write(req, res, (scoped, collection, input) => scoped.create(collection, input));
  const update: RequestHandler = (req, res) => write(req, res, (scoped, collection, input) => scoped.update(collection, req.params.id as string, input));

  const remove: RequestHandler = async (req, res) => {
    const collection = records.collection(req.params.collection as string);
    const caller = await resolveCaller(req);
    await records.as(caller, operationContextOf(req)).delete(collection, req.params.id as string);
    res.status(204).end();
  };

  const removeMany: RequestHandler = async (req, res) => {
    const collection = records.collection(req.params.collection as string);
    const caller = await resolveCaller(req);
    const result = await records.as(caller, operationContextOf(req)).deleteMany(collection, readQueryParam(req.query, 'filter'));
    res.json({ deleted: result.count });
  };

  const recordsPath = '/api/collections/:collection/records';
  const recordPath = '/api/collections/:collection/records/:id';
  return [
    { method: 'GET', path: recordsPath, handlers: [list] },
    { method: 'GET', path: recordPath, handlers: [view] },
    { method: 'POST', path: recordsPath, handlers: [json, create] },
    { method: 'PATCH', path: recordPath, handlers: [json, update] },
    { method: 'DELETE', path: recordPath, handlers: [remove] },
    { method: 'DELETE', path: recordsPath, handlers: [removeMany] },
  ];
}
