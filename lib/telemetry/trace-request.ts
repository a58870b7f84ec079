import { performance } from 'node:perf_hooks';
import { endSpan, isTracing, startSpan, type TelemetrySpan } from './start-span.js';
import { isMetering, recordRequestDuration } from './telemetry-metrics.js';

/** The request and response as tracing reads them (Express's, by shape: this floor knows no Express). */
export interface TracedExchange {
  req: { readonly method: string };
  res: { readonly statusCode: number; once(event: 'close', listener: () => void): unknown };
}

/** What the request's span and duration are labelled with: the route's pattern, and the collection when it exists. */
export interface RequestRoute {
  /** The route table's pattern (`/api/collections/:collection/records`). */
  path: string;
  /** The collection's name, only when the path names one that exists (never a name from the URL that none has). */
  collection?: string;
}

const templates = new Map<string, string>();

/** The route's pattern as OpenTelemetry writes a template: `:x` as `{x}`, made once per route. */
export function templateOfRoute(path: string): string {
  let template = templates.get(path);
  if (template === undefined) templates.set(path, (template = path.replace(/:([A-Za-z0-9_]+)/g, '{$1}')));
  return template;
}

/**
 * Starts the span of one request the router serves (SERVER, named `METHOD /template`, its parent
 * the trace context the host's SDK extracted, else a root) and, when the response closes, ends it
 * with the status (an error from 500 on) and records `http.server.request.duration`. Attributes
 * and labels are the method, the template, the status and a known collection: nothing the client
 * wrote. Returns the span (undefined without the API) for the request's children to hang from.
 */
export function traceRequest(exchange: TracedExchange, route: RequestRoute): TelemetrySpan | undefined {
  if (!isTracing() && !isMetering()) return undefined;
  const startedAt = performance.now();
  const method = exchange.req.method;
  const template = templateOfRoute(route.path);
  const attributes: Record<string, string> = { 'http.request.method': method, 'http.route': template };
  if (route.collection !== undefined) attributes['recordbase.collection'] = route.collection;
  const span = startSpan(`${method} ${template}`, { kind: 'server', attributes });
  exchange.res.once('close', () => {
    const status = exchange.res.statusCode;
    span?.setAttribute('http.response.status_code', status);
    endSpan(span, status >= 500);
    recordRequestDuration((performance.now() - startedAt) / 1000, { method, route: template, status, collection: route.collection });
  });
  return span;
}
