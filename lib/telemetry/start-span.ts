import { SCOPE_NAME, SPAN_KIND, SPAN_STATUS_ERROR, telemetryApi, telemetryScopeVersion, type Attributes, type LinkShape, type SpanShape, type TracerShape } from './telemetry-api.js';

/** A span recordbase started, or undefined when telemetry is off (no API, or its no-op tracer). */
export type TelemetrySpan = SpanShape;

let tracerOf: { provider: object; tracer: TracerShape } | undefined;
let noopTracerProvider: object | undefined;

/**
 * recordbase's tracer, taken again whenever the global tracer provider changed (a host may
 * register its SDK after the router started, or replace it): the API's tracer before registration
 * is a proxy that follows the first provider, not a later one. Undefined while no SDK is
 * registered (the global proxy delegates to the API's no-op provider): nothing is started then,
 * not even a no-op span, which keeps a request's cost with no SDK to a few property reads.
 */
function currentTracer(): TracerShape | undefined {
  const api = telemetryApi();
  if (api === undefined) return undefined;
  const provider = api.trace.getTracerProvider();
  noopTracerProvider ??= new api.ProxyTracerProvider().getDelegate();
  if ((provider as { getDelegate?: () => object }).getDelegate?.() === noopTracerProvider) return undefined;
  if (tracerOf?.provider !== provider) tracerOf = { provider, tracer: api.trace.getTracer(SCOPE_NAME, telemetryScopeVersion()) };
  return tracerOf.tracer;
}

const INVALID_TRACE_ID = '00000000000000000000000000000000';

/**
 * Whether `span` carries a trace (a real SDK's span, recorded or sampled out) rather than the
 * API's no-op span: children of a no-op span are not started at all, which keeps the cost with
 * no SDK to a property read per statement.
 */
export function carriesTrace(span: SpanShape | undefined): span is SpanShape {
  return span !== undefined && span.spanContext().traceId !== INVALID_TRACE_ID;
}

/** What a span is started with: its kind, its attributes, its links, and its parent when explicit. */
export interface StartSpanOptions {
  kind?: keyof typeof SPAN_KIND;
  attributes?: Attributes;
  links?: LinkShape[];
  /** The parent span; absent: the active context's span (a host's AsyncLocalStorage context manager carries it), else a root. */
  parent?: SpanShape;
  /** A root whatever the active context holds (a realtime delivery: its own trace, linked to the write's). */
  root?: boolean;
}

/**
 * Starts a span named `name` (always a template or a fixed word, never text from a request), or
 * returns undefined when no API is loaded. With no SDK registered the API answers its no-op span.
 */
export function startSpan(name: string, options: StartSpanOptions = {}): TelemetrySpan | undefined {
  const tracer = currentTracer();
  if (tracer === undefined) return undefined;
  const api = telemetryApi()!;
  const parentContext = options.parent === undefined ? api.context.active() : api.trace.setSpan(api.context.active(), options.parent);
  return tracer.startSpan(name, { kind: SPAN_KIND[options.kind ?? 'internal'], attributes: options.attributes, links: options.links, root: options.root }, parentContext);
}

/**
 * Starts a child of `parent`, or of the active context's span when there is no explicit parent;
 * none at all when the explicit parent is the no-op span (no SDK): most spans of a request are
 * children, and with no SDK they then cost nothing.
 */
export function startChildSpan(name: string, options: StartSpanOptions & { parent: SpanShape | undefined }): TelemetrySpan | undefined {
  if (options.parent !== undefined && !carriesTrace(options.parent)) return undefined;
  return startSpan(name, options);
}

/** Ends `span`, marked an error when `failed` (the error's text is never recorded: it may hold a value from the request). */
export function endSpan(span: TelemetrySpan | undefined, failed = false): void {
  if (span === undefined) return;
  if (failed) span.setStatus({ code: SPAN_STATUS_ERROR });
  span.end();
}

/**
 * Runs `work` with `span` as the active context's span, so spans started under it by code that
 * has no explicit parent (storage, thumbnails) are its children when the host's SDK has an
 * async context manager. Without a span, or with the no-op one, `work` runs as it is.
 */
export function runWithSpan<R>(span: TelemetrySpan | undefined, work: () => R): R {
  if (!carriesTrace(span)) return work();
  const api = telemetryApi()!;
  return api.context.with(api.trace.setSpan(api.context.active(), span), work);
}

/**
 * The active context's span while it is still recording: kept by work that starts later (a
 * thumbnail batch) as its parent, and the parent of statements that carry none. An ended span is
 * none: with an async context manager, a timer set up during a request (realtime's heartbeat,
 * started when a stream woke it) keeps that request's context for good, and its statements must
 * not hang from a request that ended long ago.
 */
export function activeSpan(): SpanShape | undefined {
  const api = telemetryApi();
  const span = api?.trace.getSpan(api.context.active());
  return carriesTrace(span) && span.isRecording() ? span : undefined;
}

/** The span's W3C `traceparent` (what the outbox keeps for a delivery on another instance to link to), or null. */
export function traceparentOf(span: SpanShape | undefined): string | null {
  if (!carriesTrace(span)) return null;
  const { traceId, spanId, traceFlags } = span.spanContext();
  return `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A link to the span a `traceparent` names (the write a delivery delivers), or undefined for none or a malformed one. */
export function linkToTraceparent(traceparent: string | null | undefined): LinkShape | undefined {
  const match = traceparent == null ? null : TRACEPARENT.exec(traceparent);
  if (match === null || match[1] === INVALID_TRACE_ID) return undefined;
  return { context: { traceId: match[1]!, spanId: match[2]!, traceFlags: Number.parseInt(match[3]!, 16), isRemote: true } };
}

/** Whether a host's SDK takes spans now (a tracer provider is registered). */
export function isTracing(): boolean {
  return currentTracer() !== undefined;
}

/**
 * Runs `work` in the root context, so what it starts (timers, a LISTEN connection's handlers)
 * does not inherit the request that happened to start it: with an async context manager it
 * would otherwise keep that request's trace for as long as it runs.
 */
export function runDetached<R>(work: () => R): R {
  const api = telemetryApi();
  return api === undefined ? work() : api.context.with(api.ROOT_CONTEXT, work);
}
