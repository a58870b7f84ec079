import type { Request } from 'express';
import { BadRequestError } from '../errors.js';

/** True when the request carries a body, whatever its type. */
function hasBody(req: Request): boolean {
  return req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0');
}

/**
 * The parsed JSON body as a plain object; absent bodies are `{}`, anything but an object is a
 * 400. A body neither parser took (form, text) is refused rather than silently treated as
 * empty, which would store a record without the data that was sent.
 */
export function readJsonBody(req: Request): Record<string, unknown> {
  const body: unknown = req.body;
  if (body === undefined && hasBody(req)) {
    const type = req.headers['content-type']?.split(';')[0].trim() || 'none';
    throw new BadRequestError(`Unsupported request body type "${type}": send application/json or multipart/form-data.`, 'unsupported_body');
  }
  if (body === undefined) return {};
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new BadRequestError('The request body must be a JSON object.', 'invalid_body');
  return body as Record<string, unknown>;
}
