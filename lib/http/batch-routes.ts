import express, { type Request, type RequestHandler, type Response } from 'express';
import { BatchError } from '../errors.js';
import type { RecordService } from '../records/record-service.js';
import { runBatch, type BatchRequest, type BatchSettings } from '../records/run-batch.js';
import type { Logger } from '../logger.js';
import type { Route } from './route-table.js';
import type { MultipartReader } from './read-multipart.js';
import { readBatch } from './read-batch.js';
import { readJsonBody } from './read-json-body.js';
import type { CallerResolver } from './resolve-caller.js';
import { operationContextOf } from './request-database-context.js';

/** What the batch route needs from the router. */
export interface BatchRoutesOptions {
  records: RecordService;
  resolveCaller: CallerResolver;
  logger: Logger;
  settings: BatchSettings | false;
  /** Reads a multipart batch body under the batch's own size limit. */
  readMultipart: MultipartReader;
  /** Counts the batch's requests against the rate limits (each one, docs/limits.md "Rate limits"): throws the 429. */
  checkRequests?: (req: Request, res: Response, requests: readonly BatchRequest[]) => Promise<void>;
}

/**
 * `POST /api/batch` (docs/batch.md): PocketBase's transactional batch, as the SDK's
 * `pb.createBatch()` sends it (always multipart) or as plain JSON. The handler reads and checks
 * the whole body, then hands the requests to runBatch, which bounds the batch as a whole and
 * serialises its answer before the commit; spooled files are removed before the answer.
 */
export function createBatchRoutes(options: BatchRoutesOptions): Route[] {
  const { settings } = options;
  const refuseIfOff = (_req: Request, _res: Response, next: () => void) => {
    if (settings === false) throw new BatchError({ code: 'batch_not_allowed' });
    next();
  };
  const json = express.json({ limit: settings === false ? 0 : settings.maxBodySize, strict: false });

  const batch: RequestHandler = async (req, res) => {
    const limits = settings as BatchSettings;
    const multipart = req.is('multipart/form-data') ? await options.readMultipart(req, res) : undefined;
    let answer: Buffer;
    try {
      const body = multipart ? multipart.fields : readJsonBody(req);
      const requests = readBatch(body, multipart?.uploads ?? [], limits);
      const caller = await options.resolveCaller(req);
      await options.checkRequests?.(req, res, requests);
      answer = await runBatch({
        service: options.records,
        requests,
        identity: caller.request.auth,
        headers: caller.request.headers,
        timeoutMs: limits.timeoutMs,
        maxBodySize: limits.maxBodySize,
        logger: options.logger,
        context: operationContextOf(req),
      });
    } finally {
      await multipart?.discard();
    }
    // Committed: the answer was serialised before the commit, only sending remains.
    res.set('Content-Type', 'application/json; charset=utf-8').send(answer);
  };
  return [{ method: 'POST', path: '/api/batch', handlers: [refuseIfOff, json, batch] }];
}
