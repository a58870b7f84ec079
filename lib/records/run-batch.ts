import type { Identity } from '../auth/identity.js';
import { BatchError, ConflictError, InternalError, RecordbaseError } from '../errors.js';
import type { Upload } from '../files/upload.js';
import type { Logger } from '../http/logger.js';
import type { Caller } from './caller.js';
import { parseResponseShape, type RecordPresenter } from './present-records.js';
import type { OperationContext, RecordService } from './record-service.js';
import type { WriteUnit } from './write-unit.js';

/** What one request of a batch asks for, already parsed from its method and url. */
export interface BatchRequest {
  /** `create` (POST), `update` (PATCH), `upsert` (PUT: update when `body.id` exists, else create), `delete`. */
  readonly action: 'create' | 'update' | 'upsert' | 'delete';
  readonly collection: string;
  /** The record id of an update or delete. */
  readonly id?: string;
  /** The request's query: `fields` and `expand` shape its response, the rest is `@request.query.*`. */
  readonly query: Record<string, string>;
  readonly body: Record<string, unknown>;
  /** Its file parts (`requests.N.<field>`), named by field (`docs`, `docs+`). */
  readonly uploads: readonly Upload[];
}

/** One answer of a successful batch, in request order. */
export interface BatchResult {
  status: 200 | 204;
  body: Record<string, unknown> | null;
}

/** How a batch runs. */
export interface RunBatchOptions {
  service: RecordService;
  presenter: RecordPresenter;
  requests: readonly BatchRequest[];
  /** The outer request's identity: every request of the batch acts as it. */
  identity: Identity | null;
  /** The batch gives up (and rolls back) once this much time has passed; checked between requests. */
  timeoutMs: number;
  logger: Logger;
  /** Where the batch's transaction runs (its statements' bounds: the outer request's). */
  context: OperationContext;
}

/** How often a batch that lost a deadlock or serialization race is run again, within its timeout. */
const MAX_ATTEMPTS = 3;

/**
 * Runs a batch (docs/batch.md): every request in order, in one transaction, each through the
 * record service with its own rules, hooks, validation and files, all as the outer identity.
 * Resolves with one answer per request once everything has committed (and the after-commit work,
 * such as removing replaced files, is done). If any request fails, nothing is kept and this
 * throws a 400 `BatchError` whose `data.requests[<index>]` holds that request's own error body; a
 * batch over its time is a 400 too. A batch that loses a deadlock against a concurrent one is run
 * again (up to three times, within the timeout) before it is reported.
 */
export async function runBatch(options: RunBatchOptions): Promise<BatchResult[]> {
  const deadline = Date.now() + options.timeoutMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await runOnce(options, deadline);
    } catch (err) {
      const conflict = err instanceof BatchError && err.cause instanceof ConflictError;
      if (!conflict || attempt >= MAX_ATTEMPTS || Date.now() >= deadline) throw err;
    }
  }
}

async function runOnce(options: RunBatchOptions, deadline: number): Promise<BatchResult[]> {
  const checkTime = () => {
    if (Date.now() >= deadline) {
      throw new BatchError({ code: 'batch_failed', message: `Batch transaction failed: it took longer than ${options.timeoutMs} ms; nothing was kept.`, data: {} });
    }
  };
  return options.service.inUnit(options.context, async (unit) => {
    const results: BatchResult[] = [];
    for (const [index, request] of options.requests.entries()) {
      checkTime();
      try {
        results.push(await runRequest(options, unit, request));
      } catch (err) {
        throw describeFailure(index, err, options.logger);
      }
    }
    checkTime(); // nothing commits after the deadline
    return results;
  });
}

async function runRequest(options: RunBatchOptions, unit: WriteUnit, request: BatchRequest): Promise<BatchResult> {
  const { service, presenter } = options;
  const collection = service.collection(request.collection);
  const shape = parseResponseShape({ fields: request.query.fields, expand: request.query.expand });
  const caller = (method: string): Caller => ({ request: { auth: options.identity, query: request.query, body: {}, method } });
  const context = { unit };
  if (request.action === 'delete') {
    await service.delete(collection, request.id!, caller('DELETE'), context);
    return { status: 204, body: null };
  }
  const input = { data: request.body, source: 'json' as const, uploads: request.uploads };
  let record;
  if (request.action === 'create' || (request.action === 'upsert' && !(await upsertTargetExists(service, unit, collection, request.body.id)))) {
    record = await service.create(collection, input, caller('POST'), context);
  } else {
    const id = request.action === 'update' ? request.id! : String(request.body.id);
    record = await service.update(collection, id, input, caller('PATCH'), context);
  }
  const [body] = await presenter.present({ collection, records: [record], caller: caller('GET'), shape, store: unit.store });
  return { status: 200, body: body! };
}

/** An upsert updates when its body names an existing record (a plain lookup: the update rule decides the rest). */
async function upsertTargetExists(service: RecordService, unit: WriteUnit, collection: ReturnType<RecordService['collection']>, id: unknown): Promise<boolean> {
  if (typeof id !== 'string' || !/^[a-z0-9]{15}$/.test(id)) return false;
  return (await unit.store.selectById({ collection, id })) !== undefined;
}

/** The batch's failure, naming the request and carrying its own error body. */
function describeFailure(index: number, err: unknown, logger: Logger): BatchError {
  if (err instanceof BatchError && err.code === 'batch_failed' && Object.keys(err.data).length === 0) return err; // the timeout
  let inner: RecordbaseError;
  if (err instanceof RecordbaseError) inner = err;
  else {
    logger.error(`batch request ${index} failed`, err);
    inner = new InternalError(err);
  }
  return new BatchError({
    code: 'batch_failed',
    data: {
      requests: {
        [index]: { code: 'batch_request_failed', message: 'Batch request failed.', response: { status: inner.status, message: inner.message, data: inner.data } },
      },
    },
    cause: inner,
  });
}
