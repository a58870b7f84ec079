/**
 * The one error hierarchy. Every failure a client can see is one of these; the error middleware
 * (lib/http/error-middleware.ts) maps it to the single body shape
 * `{status, message, data}`. `code` is stable and documented in docs/errors.md.
 */

/** One entry of a validation error's `data`, keyed by field name. */
export interface FieldError {
  code: string;
  message: string;
}

/** Base class: an error with an HTTP status, a stable code and a client-safe message. */
export class RecordbaseError extends Error {
  readonly status: number;
  readonly code: string;
  readonly data: Record<string, FieldError>;

  constructor(options: { status: number; code: string; message: string; data?: Record<string, FieldError>; cause?: unknown }) {
    super(options.message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.status = options.status;
    this.code = options.code;
    this.data = options.data ?? {};
  }
}

/** 400: the request itself is malformed (bad JSON, bad filter, bad parameters). */
export class BadRequestError extends RecordbaseError {
  constructor(message: string, code = 'bad_request', cause?: unknown) {
    super({ status: 400, code, message, cause });
  }
}

/** 401: the operation needs an identity and the request has none (or auth() threw). */
export class UnauthorizedError extends RecordbaseError {
  constructor(message = 'The request requires valid authentication.', code = 'unauthorized') {
    super({ status: 401, code, message });
  }
}

/** 403: a collection rule refused the operation. */
export class ForbiddenError extends RecordbaseError {
  constructor(message = 'You are not allowed to perform this request.', code = 'forbidden') {
    super({ status: 403, code, message });
  }
}

/** 404: missing collection, record or file (also: a view/update/delete rule that hides the record). */
export class NotFoundError extends RecordbaseError {
  constructor(message = "The requested resource wasn't found.", code = 'not_found') {
    super({ status: 404, code, message });
  }
}

/** 413: an uploaded file or the request body is over its limit. */
export class PayloadTooLargeError extends RecordbaseError {
  constructor(message = 'The request body is too large.', code = 'payload_too_large') {
    super({ status: 413, code, message });
  }
}

/** 422: submitted data failed validation; `data` is keyed by field. */
export class ValidationError extends RecordbaseError {
  constructor(data: Record<string, FieldError>, message = 'Failed to validate the submitted data.') {
    super({ status: 422, code: 'validation_failed', message, data });
  }
}

/** 503: the database is unreachable, or the router is not (or could not get) ready. */
export class UnavailableError extends RecordbaseError {
  constructor(message = 'The service is temporarily unavailable.', code = 'unavailable', cause?: unknown) {
    super({ status: 503, code, message, cause });
  }
}

/** 500: anything unexpected. The message stays generic; the cause goes to the logger only. */
export class InternalError extends RecordbaseError {
  constructor(cause?: unknown) {
    super({ status: 500, code: 'internal', message: 'Something went wrong while processing your request.', cause });
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
