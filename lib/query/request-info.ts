import type { Identity } from '../auth/identity.js';

/**
 * Where a rule is being checked (`@request.context`, PocketBase's values): an ordinary request,
 * a realtime subscription's message, a protected file's download, a related record's expansion,
 * a request inside a batch.
 */
export type RequestContext = 'default' | 'realtime' | 'protectedFile' | 'expand' | 'batch';

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
  /**
   * `@request.headers.<name>`, names normalised by normalizeHeaderName (`X-Token` is `x_token`),
   * each as the host's middleware left it in `req.headers` (lib/query/request-headers.ts). Absent:
   * no headers (the server API).
   */
  headers?: Readonly<Record<string, string>>;
  /** `@request.context`; absent: `'default'`. */
  context?: RequestContext;
}

/** `request` as seen from `context` (a protected file's download, a realtime message, ...). */
export function withRequestContext(request: RequestInfo, context: RequestContext): RequestInfo {
  return { ...request, context };
}
