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
  /**
   * `@request.body.<field>`: in a write's rules, the values the write will store (the normalised
   * write of lib/records/normalize-write.ts, set by the record service); `{}` for every other rule
   * and for filters.
   */
  body: Record<string, unknown>;
  /** Upper-case HTTP method (`@request.method`). */
  method: string;
}
