import type { Identity } from '../auth/identity.js';
import { ClientGone } from '../db/statements/database-context.js';
import type { RecordStore } from '../db/record-store.js';
import { BadRequestError, BatchError, ConflictError, InternalError, RecordbaseError } from '../errors.js';
import type { Upload } from '../files/upload.js';
import type { Logger } from '../logger.js';
import type { CollectionSchema } from '../schema/collection-schema.js';
import { isSafeRecordId } from '../schema/record-id.js';
import type { Caller } from './caller.js';
import type { ExpandBudget } from './expand-records.js';
import { parseResponseShape } from './present-records.js';
import type { OperationContext, RecordService } from './record-service.js';
import type { WriteUnit } from './write-unit.js';

/** The batch limits (docs/batch.md): the `batch` option resolved, read by the batch route and runBatch. */
export interface BatchSettings {
  maxRequests: number;
  timeoutMs: number;
  maxBodySize: number;
}

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
  requests: readonly BatchRequest[];
  /** The outer request's identity: every request of the batch acts as it. */
  identity: Identity | null;
  /** The outer request's headers as rules read them (`@request.headers.*`); a request's own `headers` are ignored. */
  headers?: Readonly<Record<string, string>>;
  /**
   * The batch gives up (and rolls back) once this much time has passed since it started: the
   * statement in flight is cancelled then, and the time is checked between requests.
   */
  timeoutMs: number;
  /**
   * The batch's body limit (`batch.maxBodySize`). With the service presenter's `maxExpandBytes` it bounds
   * the whole answer: the records a batch answers with come from its body (or are the stored
   * records it updates), and what expansion adds is bounded apart.
   */
  maxBodySize: number;
  logger: Logger;
  /** Where the batch's transaction runs (its statements' bounds: the outer request's). */
  context: OperationContext;
}

/** How often a batch that lost a deadlock or serialization race is run again, within its timeout. */
const MAX_ATTEMPTS = 3;

/**
 * Runs a batch (docs/batch.md): every request in order, in one transaction, each through the
 * record service with its own rules, hooks, validation and files, all as the outer identity.
 * Resolves with the whole answer, the JSON array of one BatchResult per request, serialised
 * before the commit (so that after it only sending remains), once everything has committed and
 * the after-commit work (such as removing replaced files) is done.
 *
 * The batch is bounded as a whole: its responses share one expand budget (the presenter's
 * limits, for the whole answer), the answer may be at most `maxExpandBytes + maxBodySize` bytes,
 * and `timeoutMs` stops the statement in flight. If any request fails or passes a bound, nothing
 * is kept and this throws a 400 `BatchError` whose `data.requests[<index>]` holds that request's
 * own error body; a batch over its time is a 400 too. A batch that loses a deadlock against a
 * concurrent one is run again (up to three times, within the timeout) before it is reported.
 */
export async function runBatch(options: RunBatchOptions): Promise<Buffer> {
  const deadline = new BatchDeadline(options.context, options.timeoutMs);
  try {
    for (let attempt = 1; ; attempt++) {
      try {
        return await runOnce(options, deadline);
      } catch (err) {
        if (deadline.expired) throw deadline.error();
        const conflict = err instanceof BatchError && err.cause instanceof ConflictError;
        if (!conflict || attempt >= MAX_ATTEMPTS) throw err;
      }
    }
  } finally {
    deadline.dispose();
  }
}

/**
 * A batch's time limit, as its statements see it: its context's signal is raised at the
 * deadline, or as soon as the request's own client leaves, and the database layer then cancels
 * the statement in flight (after the grace an abandoned statement gets, statement-bounds.ts) and
 * refuses new ones but the ROLLBACK. Without a database context (no bounds), only `check` applies.
 */
class BatchDeadline {
  readonly context: OperationContext;
  private timedOut = false;
  /** Set while the transaction commits: a deadline passing then does not cancel the COMMIT. */
  private committing = false;
  private readonly timer: NodeJS.Timeout;
  private readonly stopListening: (() => void) | undefined;

  constructor(
    outer: OperationContext,
    private readonly timeoutMs: number,
  ) {
    const database = outer.database;
    const gone = new ClientGone();
    this.timer = setTimeout(() => {
      this.timedOut = true;
      if (!this.committing) gone.abort();
    }, timeoutMs);
    this.stopListening = database?.signal?.listen(() => gone.abort());
    if (database?.signal?.aborted) gone.abort();
    this.context = database ? { ...outer, database: { ...database, signal: gone } } : outer;
  }

  get expired(): boolean {
    return this.timedOut;
  }

  /** The batch's answer once its time is up. */
  error(): BatchError {
    return new BatchError({ code: 'batch_failed', message: `Batch transaction failed: it took longer than ${this.timeoutMs} ms; nothing was kept.`, data: {} });
  }

  /** Throws the timeout when the time is up: between requests, and before the commit. */
  check(): void {
    if (this.timedOut) throw this.error();
  }

  /**
   * Lets the commit begin, if the time is not up: a COMMIT under way is never cancelled by the
   * deadline (one that fails, a lost race, is then reported as the timeout if the time is up).
   */
  beginCommit(): void {
    this.check();
    this.committing = true;
  }

  /** After an attempt, committed or not: a retry is bounded again. */
  endCommit(): void {
    this.committing = false;
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.stopListening?.();
  }
}

async function runOnce(options: RunBatchOptions, deadline: BatchDeadline): Promise<Buffer> {
  try {
    return await options.service.inUnit(deadline.context, async (unit) => {
      const budget = options.service.presenter.createExpandBudget('batch');
      const answer = new AnswerBuilder(options.service.presenter.expandLimits.maxBytes + options.maxBodySize);
      for (const [index, request] of options.requests.entries()) {
        deadline.check();
        try {
          answer.add(await runRequest(options, { unit, request, budget }));
        } catch (err) {
          throw describeFailure({ index, err, deadline, logger: options.logger });
        }
      }
      const json = answer.finish();
      deadline.beginCommit(); // nothing commits after the deadline
      return json;
    });
  } finally {
    deadline.endCommit();
  }
}

/**
 * The batch's answer, serialised request by request inside the transaction: a result that cannot
 * be serialised, or one that takes the whole past `maxBytes`, fails its request before anything
 * is committed. Kept as bytes, never as one string: a string has a length limit, a Buffer's is
 * far above any bound.
 */
class AnswerBuilder {
  private readonly parts: Buffer[] = [];
  /** The brackets, the commas and the results so far. */
  private bytes = 2;

  constructor(private readonly maxBytes: number) {}

  add(result: BatchResult): void {
    const part = Buffer.from(JSON.stringify(result), 'utf8');
    this.bytes += part.length + (this.parts.length > 0 ? 1 : 0);
    if (this.bytes > this.maxBytes) {
      throw new BadRequestError(
        `The batch's answer would be larger than ${this.maxBytes} bytes (limits.maxExpandBytes + batch.maxBodySize) with this request's record. ` +
          'Send fewer requests in one batch, or ask for fewer fields or expansions in each.',
        'batch_answer_too_large',
      );
    }
    this.parts.push(part);
  }

  /** The JSON array of every result added. */
  finish(): Buffer {
    const pieces: Buffer[] = [OPEN_BRACKET];
    for (const [index, part] of this.parts.entries()) {
      if (index > 0) pieces.push(COMMA);
      pieces.push(part);
    }
    pieces.push(CLOSE_BRACKET);
    return Buffer.concat(pieces, this.bytes);
  }
}

const OPEN_BRACKET = Buffer.from('[');
const COMMA = Buffer.from(',');
const CLOSE_BRACKET = Buffer.from(']');

async function runRequest(options: RunBatchOptions, step: { unit: WriteUnit; request: BatchRequest; budget: ExpandBudget }): Promise<BatchResult> {
  const { unit, request, budget } = step;
  const { service } = options;
  const collection = service.collection(request.collection);
  const shape = parseResponseShape({ fields: request.query.fields, expand: request.query.expand });
  // `@request.context` is "batch" in every request of a batch, as in PocketBase.
  const caller = (method: string): Caller => ({ request: { auth: options.identity, query: request.query, headers: options.headers, body: {}, method, context: 'batch' } });
  const as = (method: string) => service.as(caller(method), { unit });
  if (request.action === 'delete') {
    await as('DELETE').delete(collection, request.id!);
    return { status: 204, body: null };
  }
  const input = { data: request.body, source: 'json' as const, uploads: request.uploads };
  let record;
  if (request.action === 'create' || (request.action === 'upsert' && !(await upsertTargetExists(unit.store, collection, request.body.id)))) {
    record = await as('POST').create(collection, input);
  } else {
    const id = request.action === 'update' ? request.id! : String(request.body.id);
    record = await as('PATCH').update(collection, id, input);
  }
  const [body] = await as('GET').present(collection, [record], { shape, budget });
  return { status: 200, body: body! };
}

/** An upsert updates when its body names an existing record (a plain lookup: the update rule decides the rest). */
async function upsertTargetExists(store: RecordStore, collection: CollectionSchema, id: unknown): Promise<boolean> {
  if (!isSafeRecordId(id)) return false;
  return (await store.selectById({ collection, id })) !== undefined;
}

/** The batch's failure, naming the request and carrying its own error body (or the timeout, whatever the request met once the time was up). */
function describeFailure(options: { index: number; err: unknown; deadline: BatchDeadline; logger: Logger }): BatchError {
  const { index, err, logger } = options;
  if (options.deadline.expired) return options.deadline.error();
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
