import type { Identity } from '../auth/identity.js';

/**
 * What a filter or rule may read of the current request (`@request.*`). Built by the HTTP layer,
 * read by the query compiler; it carries no Express types so the compiler stays pure.
 */
export interface RequestInfo {
  /** `null` for a guest. */
  auth: Identity | null;
  /** Query string parameters (`@request.query.<name>`); repeated parameters keep the first value. */
  query: Record<string, string>;
  /** The submitted body fields (`@request.body.<field>`), already coerced to field types where known. */
  body: Record<string, unknown>;
  /** Upper-case HTTP method (`@request.method`). */
  method: string;
}
