import express, { type Request, type RequestHandler, type Response } from 'express';
import type { AuthFunction } from '../auth/identity.js';
import type { OperationContext, RecordService, WriteInput } from '../records/record-service.js';
import { parseResponseShape, type RecordPresenter, type ResponseShape } from '../records/present-records.js';
import { parseListQuery, readQueryParam } from './parse-list-query.js';
import { readJsonBody } from './read-json-body.js';
import type { RecordValues } from '../db/record-store.js';
import type { Caller } from '../records/caller.js';
import type { CollectionSchema } from '../schema/collection-schema.js';
import type { MultipartBody } from './read-multipart.js';
import type { Logger } from './logger.js';
import { HEADER_ONLY } from '../auth/extract-token.js';
import { createCallerResolver } from './resolve-caller.js';
import type { Route } from './route-table.js';
import { operationContextOf } from './request-database-context.js';

/** What the record routes need from the router. */
export interface RecordsRoutesOptions {
  records: RecordService;
  presenter: RecordPresenter;
  auth?: AuthFunction;
  /** Where a failing `auth()` is reported (it is the host's bug). */
  logger: Logger;
  maxBodySize: number;
  maxPerPage: number;
  /** Reads a multipart body (lib/http/read-multipart.ts). */
  readMultipart: (req: Request, res: Response) => Promise<MultipartBody>;
}

/** The response shape a request asks for (`fields`, `expand`), parsed: a bad one is a 400 before anything runs. */
function shapeOf(req: Request): ResponseShape {
  return parseResponseShape({ fields: readQueryParam(req.query, 'fields'), expand: readQueryParam(req.query, 'expand') });
}

/**
 * The records endpoints (docs/records-api.md). Each handler only parses the request, calls the
 * record service and sends what the presenter shapes; rules, SQL and validation live below.
 */
export function createRecordsRoutes(options: RecordsRoutesOptions): Route[] {
  const { records, presenter } = options;
  const resolveCaller = createCallerResolver({ auth: options.auth, logger: options.logger, sources: HEADER_ONLY });
  const json = express.json({ limit: options.maxBodySize, strict: false });

  const list: RequestHandler = async (req, res) => {
    const collection = records.collection(req.params.collection as string);
    const query = parseListQuery(req.query, { maxPerPage: options.maxPerPage });
    const shape = shapeOf(req);
    const caller = await resolveCaller(req);
    const context = operationContextOf(req);
    const result = await records.list(collection, query, caller, context);
    const items = await presenter.present({ collection, records: result.items, caller, shape, store: records.storeOf(context) });
    res.json({ page: result.page, perPage: result.perPage, totalItems: result.totalItems, totalPages: result.totalPages, items });
  };

  const view: RequestHandler = async (req, res) => {
    const collection = records.collection(req.params.collection as string);
    const shape = shapeOf(req);
    const caller = await resolveCaller(req);
    const context = operationContextOf(req);
    const record = await records.view(collection, req.params.id as string, caller, context);
    res.json((await presenter.present({ collection, records: [record], caller, shape, store: records.storeOf(context) }))[0]);
  };

  /**
   * Runs a create or update with the body in either format. The collection is resolved first,
   * so an unknown one is a 404 before any upload is spooled; spooled uploads are removed when
   * the write is done, whatever happened.
   */
  async function write(req: Request, res: Response, run: (collection: CollectionSchema, input: WriteInput, caller: Caller, context: OperationContext) => Promise<RecordValues>) {
    const collection = records.collection(req.params.collection as string);
    const shape = shapeOf(req);
    const multipart = req.is('multipart/form-data') ? await options.readMultipart(req, res) : undefined;
    let response: unknown;
    try {
      const input: WriteInput = multipart
        ? { data: multipart.fields, source: 'multipart', uploads: multipart.uploads }
        : { data: readJsonBody(req), source: 'json' };
      const caller = await resolveCaller(req);
      const context = operationContextOf(req);
      const record = await run(collection, input, caller, context);
      response = (await presenter.present({ collection, records: [record], caller, shape, store: records.storeOf(context) }))[0];
    } finally {
      // Before answering, so that a client who sees the response sees no spool left either.
      await multipart?.discard();
    }
    res.json(response);
  }

  const create: RequestHandler = (req, res) => write(req, res, (collection, input, caller, context) => records.create(collection, input, caller, context));
  const update: RequestHandler = (req, res) => write(req, res, (collection, input, caller, context) => records.update(collection, req.params.id as string, input, caller, context));

  const remove: RequestHandler = async (req, res) => {
    const collection = records.collection(req.params.collection as string);
    const caller = await resolveCaller(req);
    await records.delete(collection, req.params.id as string, caller, operationContextOf(req));
    res.status(204).end();
  };

  const removeMany: RequestHandler = async (req, res) => {
    const collection = records.collection(req.params.collection as string);
    const caller = await resolveCaller(req);
    const result = await records.deleteMany(collection, readQueryParam(req.query, 'filter'), caller, operationContextOf(req));
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
