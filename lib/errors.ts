/**
 * The one error hierarchy. Every failure a client can see is one of these; the error middleware
 * (lib/http/error-middleware.ts) maps it to the single body shape `{status, message, data}`.
 *
 * Every code recordbase uses is in ERROR_CODES, with its status and a default message, and every
 * field code of a 422 in FIELD_ERROR_CODES: the classes below only take codes of their own
 * status, so a code is written once, here, and docs/errors.md lists exactly these (a test reads
 * the page and compares).
 */

/** The codes of the errors recordbase throws: status, and the message used when none is given. */
export const ERROR_CODES = {
  bad_request: { status: 400, message: 'The request is malformed.' },
  invalid_json: { status: 400, message: 'The request body is not valid JSON.' },
  invalid_body: { status: 400, message: 'The request body could not be read.' },
  unsupported_body: { status: 400, message: 'Send application/json or multipart/form-data.' },
  invalid_multipart: { status: 400, message: 'Invalid multipart body.' },
  invalid_fields: { status: 400, message: 'Invalid fields parameter.' },
  invalid_parameter: { status: 400, message: 'Invalid query parameter.' },
  invalid_character: { status: 400, message: 'Text values cannot contain NUL (U+0000) characters.' },
  invalid_filter: { status: 400, message: 'Invalid filter.' },
  invalid_sort: { status: 400, message: 'Invalid sort.' },
  invalid_search: { status: 400, message: 'Invalid search.' },
  invalid_path: { status: 400, message: 'The request path is not valid.' },
  expand_too_many_records: { status: 400, message: 'The expansion would add too many related records to the response.' },
  expand_too_large: { status: 400, message: 'The expansion would add too many bytes to the response.' },
  aggregate_too_many_groups: { status: 400, message: 'The aggregate has more groups than limits.maxAggregateGroups allows.' },
  filter_required: { status: 400, message: 'A bulk delete needs a non-empty "filter" parameter.' },
  relation_required: { status: 400, message: 'The record cannot be deleted: other records require it.' },
  view_collection_read_only: { status: 400, message: 'View collections are read-only.' },
  invalid_thumb: { status: 400, message: 'Invalid thumb.' },
  thumb_not_allowed: { status: 400, message: 'This thumb size is not allowed for this file.' },
  invalid_thumb_quality: { status: 400, message: 'Invalid quality: expected a whole number from 0 to 100.' },
  invalid_thumb_format: { status: 400, message: 'Invalid format: expected webp, jpeg or png.' },
  statement_timeout: { status: 400, message: 'A database statement ran longer than the statement timeout and was cancelled.' },
  request_aborted: { status: 400, message: 'The request was abandoned by its client before it finished.' },
  storage_invalid_key: { status: 400, message: 'Invalid file path.' },
  unauthorized: { status: 401, message: 'The request requires valid authentication.' },
  invalid_token: { status: 401, message: 'The authentication token is invalid or expired.' },
  file_auth_required: { status: 401, message: 'This file is protected: it needs an authentication token.' },
  invalid_file_token: { status: 401, message: 'The file token is invalid or expired.' },
  forbidden: { status: 403, message: 'You are not allowed to perform this request.' },
  not_found: { status: 404, message: "The requested resource wasn't found." },
  collection_not_found: { status: 404, message: 'Missing collection.' },
  record_not_found: { status: 404, message: "The requested record wasn't found." },
  file_not_found: { status: 404, message: "The requested file wasn't found." },
  route_not_found: { status: 404, message: 'The requested endpoint does not exist.' },
  storage_not_found: { status: 404, message: "The requested file wasn't found." },
  payload_too_large: { status: 413, message: 'The request body is too large.' },
  file_too_large: { status: 413, message: 'A file is larger than the maximum allowed file size.' },
  too_many_parts: { status: 413, message: 'The request has too many parts.' },
  range_not_satisfiable: { status: 416, message: 'The requested range is not satisfiable.' },
  validation_failed: { status: 422, message: 'Failed to validate the submitted data.' },
  internal: { status: 500, message: 'Something went wrong while processing your request.' },
  unavailable: { status: 503, message: 'The service is temporarily unavailable.' },
  database_unavailable: { status: 503, message: 'The database is unavailable. Try again later.' },
  database_busy: { status: 503, message: 'The database is busy. Try again later.' },
  prepared_statement_lost: { status: 503, message: 'The database connection lost a prepared statement: set preparedStatements: false behind a pooler in transaction mode.' },
  not_ready: { status: 503, message: 'recordbase could not start.' },
  draining: { status: 503, message: 'This instance is shutting down and refused the request before running it; send it again (to another instance).' },
  thumbnail_queue_full: { status: 503, message: 'Too many thumbnails are waiting to be made; try again in a moment.' },
  write_conflict: { status: 409, message: 'The write conflicted with a concurrent one; try again.' },
  batch_not_allowed: { status: 403, message: 'Batch requests are not allowed.' },
  invalid_batch: { status: 400, message: 'Invalid batch request data.' },
  batch_failed: { status: 400, message: 'Batch transaction failed.' },
  batch_answer_too_large: { status: 400, message: "The batch's answer would be too large." },
  invalid_subscription: { status: 400, message: 'Invalid realtime subscription.' },
  realtime_client_not_found: { status: 404, message: 'Missing or invalid client id.' },
  realtime_auth_mismatch: { status: 403, message: "The current and the previous request authorization don't match." },
  realtime_too_many_clients: { status: 503, message: 'Too many realtime clients are connected to this instance; try again later.' },
  realtime_too_many_clients_per_address: { status: 429, message: 'Too many realtime streams are open from this address.' },
  realtime_too_many_clients_per_identity: { status: 429, message: 'Too many realtime clients are subscribed with this identity.' },
  rate_limited: { status: 429, message: 'Too Many Requests.' },
  realtime_unavailable: { status: 503, message: 'The instance holding this realtime client did not answer; try again.' },
  invalid_backup_key: { status: 400, message: 'Invalid backup key.' },
  backup_exists: { status: 400, message: 'A backup with this name already exists.' },
  backup_limit_reached: { status: 400, message: 'The backups folder holds as many backups as backups.maxCount allows.' },
  backup_in_progress: { status: 400, message: 'Try again later: another backup is being made.' },
  backup_not_supported: { status: 400, message: 'Not supported while serving: restore with `recordbase restore` while the app is stopped.' },
  backup_not_found: { status: 404, message: "The requested backup wasn't found." },
  backup_disk_full: { status: 503, message: 'The backup could not be written: the disk is full.' },
} as const satisfies Record<string, { status: number; message: string }>;

/** A code of ERROR_CODES. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** The codes of ERROR_CODES with status `S`: what a class of that status accepts. */
export type ErrorCodeWithStatus<S extends number> = { [K in ErrorCode]: (typeof ERROR_CODES)[K]['status'] extends S ? K : never }[ErrorCode];

/** The field codes of a 422's `data` (docs/errors.md, "Validation codes"). */
export const FIELD_ERROR_CODES = [
  'validation_required',
  'validation_min_text_constraint',
  'validation_max_text_constraint',
  'validation_invalid_format',
  'validation_invalid_email',
  'validation_invalid_url',
  'validation_invalid_date',
  'validation_invalid_number',
  'validation_min_number',
  'validation_max_number',
  'validation_not_integer',
  'validation_invalid_value',
  'validation_too_many_values',
  'validation_missing_rel_records',
  'validation_not_unique',
  'validation_invalid_json',
  'validation_json_size_limit',
  'validation_too_many_files',
  'validation_file_size_limit',
  'validation_invalid_mime_type',
  'validation_invalid_latitude',
  'validation_invalid_longitude',
  'validation_content_size_limit',
  'validation_min_greater_equal_than_required',
  'validation_max_less_equal_than_required',
  'validation_email_domain_not_allowed',
  'validation_url_domain_not_allowed',
  'validation_not_enough_values',
] as const;

/** A code of FIELD_ERROR_CODES. */
export type FieldErrorCode = (typeof FIELD_ERROR_CODES)[number];

/** One entry of a validation error's `data`, keyed by field name. */
export interface FieldError {
  code: FieldErrorCode;
  message: string;
}

/**
 * Base class: an error with an HTTP status, a stable code and a client-safe message. recordbase's
 * own errors come from the subclasses, whose codes are in ERROR_CODES; a host (in a hook, or its
 * own adapter) may construct one directly with any status and code of its own.
 */
export class RecordbaseError extends Error {
  readonly status: number;
  readonly code: string;
  /** The body's `data`: `{}`, field errors for a 422, or what a batch failure reports. */
  readonly data: Readonly<Record<string, unknown>>;

  constructor(options: { status: number; code: string; message: string; data?: Readonly<Record<string, unknown>>; cause?: unknown }) {
    super(options.message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.status = options.status;
    this.code = options.code;
    this.data = options.data ?? {};
  }
}

/** The constructor options of one of our codes: status and default message from ERROR_CODES. */
export function describeError(code: ErrorCode, message?: string, cause?: unknown): { status: number; code: ErrorCode; message: string; cause?: unknown } {
  const entry = ERROR_CODES[code];
  return { status: entry.status, code, message: message ?? entry.message, cause };
}

/** 400: the request itself is malformed (bad JSON, bad filter, bad parameters). */
export class BadRequestError extends RecordbaseError {
  constructor(message: string, code: ErrorCodeWithStatus<400> = 'bad_request', cause?: unknown) {
    super(describeError(code, message, cause));
  }
}

/** 401: the operation needs an identity and the request has none (or auth() threw). */
export class UnauthorizedError extends RecordbaseError {
  constructor(message?: string, code: ErrorCodeWithStatus<401> = 'unauthorized') {
    super(describeError(code, message));
  }
}

/**
 * 400 (or 403 when batches are off): a batch that is malformed, or failed as a whole. A failed
 * batch's `data.requests` names the request that failed, with its own error body.
 */
export class BatchError extends RecordbaseError {
  constructor(options: { code: 'invalid_batch' | 'batch_failed' | 'batch_not_allowed'; message?: string; data?: Record<string, unknown>; cause?: unknown }) {
    super({ ...describeError(options.code, options.message, options.cause), data: options.data });
  }
}

/** 409: the write lost a race (a deadlock or serialization failure); retrying it is safe. */
export class ConflictError extends RecordbaseError {
  constructor(message?: string, code: ErrorCodeWithStatus<409> = 'write_conflict', cause?: unknown) {
    super(describeError(code, message, cause));
  }
}

/** 403: a collection rule refused the operation. */
export class ForbiddenError extends RecordbaseError {
  constructor(message?: string, code: ErrorCodeWithStatus<403> = 'forbidden') {
    super(describeError(code, message));
  }
}

/** 404: missing collection, record or file (also: a view/update/delete rule that hides the record). */
export class NotFoundError extends RecordbaseError {
  constructor(message?: string, code: ErrorCodeWithStatus<404> = 'not_found') {
    super(describeError(code, message));
  }
}

/** 413: an uploaded file or the request body is over its limit. */
export class PayloadTooLargeError extends RecordbaseError {
  constructor(message?: string, code: ErrorCodeWithStatus<413> = 'payload_too_large') {
    super(describeError(code, message));
  }
}

/** 422: submitted data failed validation; `data` is keyed by field. */
export class ValidationError extends RecordbaseError {
  declare readonly data: Readonly<Record<string, FieldError>>;

  constructor(data: Record<string, FieldError>, message?: string) {
    super({ ...describeError('validation_failed', message), data });
  }
}

/** 429: one client (an address, an identity) holds as much of a shared resource as it may; others still get theirs. */
export class TooManyRequestsError extends RecordbaseError {
  constructor(message?: string, code: ErrorCodeWithStatus<429> = 'realtime_too_many_clients_per_address') {
    super(describeError(code, message));
  }
}

/**
 * 429: a rate limit's rule (`rateLimits.rules`) counted as many requests of this client in its
 * window as it allows; PocketBase's body. `retryAfterSeconds` is the wait until the window ends
 * (the response's Retry-After).
 */
export class RateLimitError extends RecordbaseError {
  constructor(readonly retryAfterSeconds: number) {
    super(describeError('rate_limited'));
  }
}

/** 503: the database is unreachable, or the router is not (or could not get) ready. */
export class UnavailableError extends RecordbaseError {
  constructor(message?: string, code: ErrorCodeWithStatus<503> = 'unavailable', cause?: unknown) {
    super(describeError(code, message, cause));
  }
}

/** 500: anything unexpected. The message stays generic; the cause goes to the logger only. */
export class InternalError extends RecordbaseError {
  constructor(cause?: unknown) {
    super(describeError('internal', undefined, cause));
  }
}

/**
 * Thrown at `ready` (and so answered as 503 with this message) when the declared collections
 * cannot be applied: an invalid definition or an unsafe change to an existing table.
 */
export class SchemaError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SchemaError';
  }
}
