/**
 * The error statuses the OpenAPI document declares (lib/openapi/build-openapi-document.ts), each
 * a reusable response with the one error body and an example of it: one table, so that every
 * operation names its errors by these keys and a status is described once.
 */
export const ERROR_RESPONSES: Record<string, { status: number; description: string; example: { status: number; message: string; data: object } }> = {
  BadRequest: {
    status: 400,
    description: 'A malformed request: bad JSON, a bad filter, search, sort, fields or paging parameter, a bulk delete without filter, a delete blocked by a required relation, bad thumbnail parameters.',
    example: { status: 400, message: 'Invalid filter: unknown field "titel" at position 1.', data: {} },
  },
  AggregateRejected: {
    status: 400,
    description: 'A bad groupBy, fields, filter, search, sort or paging parameter (invalid_parameter, invalid_filter, invalid_search, …), a field only superusers may group or aggregate, or more groups than limits.maxAggregateGroups (aggregate_too_many_groups).',
    example: { status: 400, message: 'The aggregate has more than 1000 groups (limits.maxAggregateGroups): narrow it with a filter or group by fewer fields.', data: {} },
  },
  Unauthorized: {
    status: 401,
    description: "The host's auth() refused the token (it threw, or returned no string id); a protected file or a file token without an identity.",
    example: { status: 401, message: 'The request requires valid authentication.', data: {} },
  },
  Forbidden: {
    status: 403,
    description: 'A rule refused: a superusers-only rule for anyone else, a failing create rule, a bulk delete including a record the delete rule refuses.',
    example: { status: 403, message: 'You are not allowed to perform this request.', data: {} },
  },
  NotFound: {
    status: 404,
    description: 'No such record or file, or a record the view, update or delete rule hides from the caller.',
    example: { status: 404, message: "The requested resource wasn't found.", data: {} },
  },
  PayloadTooLarge: {
    status: 413,
    description: 'The body is over maxBodySize, or a file over maxFileSize. Nothing is stored.',
    example: { status: 413, message: 'The request body is too large.', data: {} },
  },
  RangeNotSatisfiable: {
    status: 416,
    description: 'The Range starts at or past the end of the file (Content-Range: bytes */size).',
    example: { status: 416, message: 'The requested range is not satisfiable.', data: {} },
  },
  ValidationFailed: {
    status: 422,
    description: 'Validation failed; data names every failing field with a code (docs/errors.md).',
    example: { status: 422, message: 'Failed to validate the submitted data.', data: { title: { code: 'validation_required', message: 'Cannot be blank.' } } },
  },
  InternalError: {
    status: 500,
    description: 'Something unexpected; the message is generic and the cause goes to the server log.',
    example: { status: 500, message: 'Something went wrong while processing your request.', data: {} },
  },
  Unavailable: {
    status: 503,
    description: 'The database is unreachable, or the router could not start (the message says why).',
    example: { status: 503, message: 'The service is temporarily unavailable.', data: {} },
  },
};
/** The name of one of ERROR_RESPONSES, as an operation lists it. */
export type ErrorResponseName = keyof typeof ERROR_RESPONSES;

/** The responses of an operation: its success, then the named errors, then 500 and 503. */
export function responses(success: Record<string, unknown>, errors: readonly ErrorResponseName[]): Record<string, unknown> {
  const out: Record<string, unknown> = { ...success };
  for (const name of [...errors, 'InternalError', 'Unavailable'] as const) {
    out[String(ERROR_RESPONSES[name].status)] = { $ref: `#/components/responses/${name}` };
  }
  return out;
}
