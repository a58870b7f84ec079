import express, { type Request, type RequestHandler, type Router } from 'express';
import type { AuthFunction } from '../auth/identity.js';
import { BadRequestError, NotFoundError } from '../errors.js';
import type { RecordService } from '../records/record-service.js';
import type { RecordPresenter } from '../records/present-records.js';
import { parseListQuery, readQueryParam } from './parse-list-query.js';
import { resolveCaller } from './resolve-caller.js';

/** What the record routes need from the router. */
export interface RecordsRoutesOptions {
  records: RecordService;
  presenter: RecordPresenter;
  auth?: AuthFunction;
  maxBodySize: number;
  maxPerPage: number;
}

/** True when the request carries a body, whatever its type. */
function hasBody(req: Request): boolean {
  return req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0');
}

/**
 * The parsed JSON body as a plain object; absent bodies are `{}`, anything but an object is a
 * 400. A body the JSON parser did not take (multipart, form, text) is refused rather than
 * silently treated as empty, which would store a record without the data that was sent.
 */
function readBody(req: Request): Record<string, unknown> {
  const body: unknown = req.body;
  if (body === undefined && hasBody(req)) {
    const type = req.headers['content-type']?.split(';')[0].trim() || 'none';
    throw new BadRequestError(
      `Unsupported request body type "${type}": send application/json (multipart/form-data bodies and file uploads are not supported yet).`,
      'unsupported_body',
    );
  }
  if (body === undefined) return {};
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new BadRequestError('The request body must be a JSON object.', 'invalid_body');
  return body as Record<string, unknown>;
}

function shapeOf(req: Request): { fields?: string; expand?: string } {
  return { fields: readQueryParam(req.query, 'fields'), expand: readQueryParam(req.query, 'expand') };
}

/**
 * The records endpoints (DESIGN.md section 3). Each handler only parses the request, calls the
 * record service and sends what the presenter shapes; rules, SQL and validation live below.
 */
export function createRecordsRoutes(options: RecordsRoutesOptions): Router {
  const { records, presenter } = options;
  const router = express.Router();
  const json = express.json({ limit: options.maxBodySize, strict: false });

  const list: RequestHandler = async (req, res) => {
    const collection = records.collection(req.params.collection as string);
    const caller = await resolveCaller(req, { auth: options.auth });
    const result = await records.list(collection, parseListQuery(req.query, { maxPerPage: options.maxPerPage }), caller);
    const items = await presenter.present({ collection, records: result.items, caller, ...shapeOf(req) });
    res.json({ page: result.page, perPage: result.perPage, totalItems: result.totalItems, totalPages: result.totalPages, items });
  };

  const view: RequestHandler = async (req, res) => {
    const collection = records.collection(req.params.collection as string);
    const caller = await resolveCaller(req, { auth: options.auth });
    const record = await records.view(collection, req.params.id as string, caller);
    res.json((await presenter.present({ collection, records: [record], caller, ...shapeOf(req) }))[0]);
  };

  const create: RequestHandler = async (req, res) => {
    const collection = records.collection(req.params.collection as string);
    const data = readBody(req);
    const caller = await resolveCaller(req, { auth: options.auth, body: data });
    const record = await records.create(collection, { data, source: 'json' }, caller);
    res.json((await presenter.present({ collection, records: [record], caller, ...shapeOf(req) }))[0]);
  };

  const update: RequestHandler = async (req, res) => {
    const collection = records.collection(req.params.collection as string);
    const data = readBody(req);
    const caller = await resolveCaller(req, { auth: options.auth, body: data });
    const record = await records.update(collection, req.params.id as string, { data, source: 'json' }, caller);
    res.json((await presenter.present({ collection, records: [record], caller, ...shapeOf(req) }))[0]);
  };

  const remove: RequestHandler = async (req, res) => {
    const collection = records.collection(req.params.collection as string);
    const caller = await resolveCaller(req, { auth: options.auth });
    await records.delete(collection, req.params.id as string, caller);
    res.status(204).end();
  };

  const removeMany: RequestHandler = async (req, res) => {
    const collection = records.collection(req.params.collection as string);
    const caller = await resolveCaller(req, { auth: options.auth });
    const result = await records.deleteMany(collection, readQueryParam(req.query, 'filter'), caller);
    res.json({ deleted: result.count });
  };

  router.get('/api/collections/:collection/records', list);
  router.get('/api/collections/:collection/records/:id', view);
  router.post('/api/collections/:collection/records', json, create);
  router.patch('/api/collections/:collection/records/:id', json, update);
  router.delete('/api/collections/:collection/records/:id', remove);
  router.delete('/api/collections/:collection/records', removeMany);
  router.use('/api/collections', () => {
    throw new NotFoundError('The requested endpoint does not exist.', 'route_not_found');
  });
  return router;
}
