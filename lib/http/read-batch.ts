import { BatchError } from '../errors.js';
import type { Upload } from '../files/upload.js';
import type { BatchRequest } from '../records/run-batch.js';

/** Longest `url` of one request, as PocketBase allows. */
const MAX_URL_LENGTH = 2000;
/** `/api/collections/{c}/records[/{id}][?query]`: the only urls a batch may name. */
const RECORDS_URL = /^\/api\/collections\/([^/?#]+)\/records(?:\/([^/?#]+))?\/?(?:\?([^#]*))?$/;
/** A file part of a batch: `requests.<i>.<field>` (what the SDK sends) or `requests[<i>].<field>`. */
const FILE_PART = /^requests(?:\.(\d{1,6})|\[(\d{1,6})\])\.(.+)$/;
const METHODS: Readonly<Record<string, { withId: BatchRequest['action']; withoutId?: BatchRequest['action'] }>> = {
  POST: { withId: 'create', withoutId: 'create' },
  PUT: { withId: 'upsert', withoutId: 'upsert' },
  PATCH: { withId: 'update' },
  DELETE: { withId: 'delete' },
};

function invalid(message: string): BatchError {
  return new BatchError({ code: 'invalid_batch', message: `Invalid batch request data: ${message}.` });
}

/**
 * Reads a batch body (docs/batch.md): `{"requests": [{method, url, body?, headers?}, ...]}`,
 * from JSON or from a multipart body's `@jsonPayload`, with file parts named `requests.<i>.<field>`
 * attached to request `<i>`. Everything is checked before anything runs: not an object, no
 * `requests` array, more than `maxRequests`, an unknown method, a url outside the records API,
 * a PATCH or DELETE without an id, a body that is not an object, a file part for a request that
 * does not exist or takes no files: each a 400 (`invalid_batch`) naming the request.
 * Per-request headers are ignored: every request acts as the outer request's identity.
 */
export function readBatch(body: unknown, uploads: readonly Upload[], options: { maxRequests: number }): BatchRequest[] {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw invalid('the body must be an object {"requests": [...]}');
  const list = (body as { requests?: unknown }).requests;
  if (!Array.isArray(list)) throw invalid('"requests" must be an array');
  if (list.length === 0) throw invalid('"requests" is empty');
  if (list.length > options.maxRequests) throw invalid(`at most ${options.maxRequests} requests, got ${list.length}`);
  const requests = list.map((item, index) => readRequest(item, index));
  const withFiles = requests.map((request) => ({ ...request, uploads: [] as Upload[] }));
  for (const upload of uploads) {
    const match = FILE_PART.exec(upload.field);
    if (!match) throw invalid(`file part "${upload.field.slice(0, 100)}" is not named requests.<index>.<field>`);
    const index = Number(match[1] ?? match[2]);
    const target = withFiles[index];
    if (target === undefined) throw invalid(`file part "${upload.field.slice(0, 100)}" is for request ${index}, which does not exist`);
    if (target.action === 'delete') throw invalid(`file part "${upload.field.slice(0, 100)}" is for request ${index}, a delete`);
    target.uploads.push({ ...upload, field: match[3]! });
  }
  return withFiles;
}

function readRequest(item: unknown, index: number): Omit<BatchRequest, 'uploads'> {
  if (item === null || typeof item !== 'object' || Array.isArray(item)) throw invalid(`request ${index} must be an object {method, url, body}`);
  const { method, url, body } = item as { method?: unknown; url?: unknown; body?: unknown };
  const verb = typeof method === 'string' ? method.toUpperCase() : '';
  const kind = METHODS[verb];
  if (!kind) throw invalid(`request ${index}: method ${JSON.stringify(method)} is not POST, PUT, PATCH or DELETE`);
  if (typeof url !== 'string' || url.length > MAX_URL_LENGTH) throw invalid(`request ${index}: url must be a string of at most ${MAX_URL_LENGTH} characters`);
  const match = RECORDS_URL.exec(url);
  if (!match) throw invalid(`request ${index}: url ${JSON.stringify(url.slice(0, 100))} is not /api/collections/{collection}/records[/{id}]`);
  const [, rawCollection, rawId, rawQuery] = match;
  const collection = decodeSegment(rawCollection!, index);
  const id = rawId === undefined ? undefined : decodeSegment(rawId, index);
  const action = id === undefined ? kind.withoutId : kind.withId;
  if (action === undefined) throw invalid(`request ${index}: ${verb} needs a record id in the url`);
  if ((action === 'create' || action === 'upsert') && id !== undefined) throw invalid(`request ${index}: ${verb} takes no record id in the url`);
  if (body !== undefined && body !== null && (typeof body !== 'object' || Array.isArray(body))) throw invalid(`request ${index}: body must be an object`);
  const query: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [key, value] of new URLSearchParams(rawQuery ?? '')) if (!(key in query)) query[key] = value;
  return { action, collection, id, query, body: (body ?? {}) as Record<string, unknown> };
}

function decodeSegment(segment: string, index: number): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw invalid(`request ${index}: the url holds a malformed %-escape`);
  }
}
