import { readFileSync } from 'node:fs';

/*
 * The parts of `@opentelemetry/api` recordbase uses, typed here by their shape: the package is an
 * optional peer dependency, and no declaration recordbase ships may name it, or a host with strict
 * TypeScript and without the package could not compile (docs/observability.md).
 */

/** A span's identity as the API gives it (W3C trace context). */
export interface SpanContextShape {
  readonly traceId: string;
  readonly spanId: string;
  readonly traceFlags: number;
  readonly isRemote?: boolean;
}

/** An attribute value recordbase sets: only strings, numbers and booleans (never a value from a request). */
export type AttributeValue = string | number | boolean;

/** Attributes, by key. */
export type Attributes = Record<string, AttributeValue>;

/** A span, as far as recordbase writes to one. */
export interface SpanShape {
  spanContext(): SpanContextShape;
  setAttribute(key: string, value: AttributeValue): unknown;
  setStatus(status: { code: number }): unknown;
  isRecording(): boolean;
  end(endTime?: number): void;
}

/** An OpenTelemetry context: opaque to recordbase. */
export interface ContextShape {
  getValue(key: symbol): unknown;
}

/** A link from a span to another (a delivery to the write it delivers). */
export interface LinkShape {
  context: SpanContextShape;
  attributes?: Attributes;
}

/** What a span starts with. */
export interface SpanOptionsShape {
  kind?: number;
  attributes?: Attributes;
  links?: LinkShape[];
  root?: boolean;
}

/** A tracer. */
export interface TracerShape {
  startSpan(name: string, options?: SpanOptionsShape, context?: ContextShape): SpanShape;
}

/** What a metric instrument records. */
export interface RecorderShape {
  record(value: number, attributes?: Attributes): void;
}

/** A counter or up-down counter. */
export interface AdderShape {
  add(value: number, attributes?: Attributes): void;
}

/** What an observable instrument's callback reports to. */
export interface ObservableResultShape {
  observe(value: number, attributes?: Attributes): void;
}

/** An observable instrument (a gauge). */
export interface ObservableShape {
  addCallback(callback: (result: ObservableResultShape) => void | Promise<void>): void;
  removeCallback(callback: (result: ObservableResultShape) => void | Promise<void>): void;
}

/** What an instrument is created with. */
export interface InstrumentOptionsShape {
  description?: string;
  unit?: string;
  advice?: { explicitBucketBoundaries?: number[] };
}

/** A meter. */
export interface MeterShape {
  createHistogram(name: string, options?: InstrumentOptionsShape): RecorderShape;
  createCounter(name: string, options?: InstrumentOptionsShape): AdderShape;
  createObservableGauge(name: string, options?: InstrumentOptionsShape): ObservableShape;
}

/** `@opentelemetry/api`'s module, the parts used. */
export interface OpenTelemetryApi {
  trace: {
    getTracer(name: string, version?: string): TracerShape;
    getTracerProvider(): object;
    setSpan(context: ContextShape, span: SpanShape): ContextShape;
    getSpan(context: ContextShape): SpanShape | undefined;
    wrapSpanContext(spanContext: SpanContextShape): SpanShape;
  };
  context: {
    active(): ContextShape;
    with<R>(context: ContextShape, fn: () => R): R;
  };
  metrics: {
    getMeter(name: string, version?: string): MeterShape;
    getMeterProvider(): object;
  };
  ROOT_CONTEXT: ContextShape;
  /** The API's own proxy: a fresh one's delegate is the API's no-op tracer provider. */
  ProxyTracerProvider: new () => { getDelegate(): object };
  /** The API's no-op meter (what a meter provider that is none answers). */
  createNoopMeter(): MeterShape;
}

/** OpenTelemetry's span kinds and status codes, as numbers (the API's enums). */
export const SPAN_KIND = { internal: 0, server: 1, client: 2, producer: 3, consumer: 4 } as const;
export const SPAN_STATUS_ERROR = 2;

/** The instrumentation scope's name: every tracer and meter recordbase takes is named so. */
export const SCOPE_NAME = 'recordbase';

let api: OpenTelemetryApi | undefined;
let loading: Promise<void> | undefined;
let scopeVersion: string | undefined;

/**
 * Loads `@opentelemetry/api` once (a dynamic import, so a host without it pays nothing and needs
 * nothing): the router awaits it before it serves, every later call is the same promise. Absent
 * or broken, telemetry stays off: every span and instrument below is then a no-op.
 */
export function loadTelemetry(): Promise<void> {
  loading ??= import('@opentelemetry/api').then(
    (module) => {
      const loaded = ((module as { default?: unknown }).default ?? module) as Partial<OpenTelemetryApi>;
      // An API older than the peer range (before metrics, 1.3) is treated as absent rather than half used.
      if (loaded.trace === undefined || loaded.context === undefined || loaded.metrics === undefined || typeof loaded.ProxyTracerProvider !== 'function' || typeof loaded.createNoopMeter !== 'function') return;
      api = loaded as OpenTelemetryApi;
      scopeVersion = readOwnVersion();
    },
    () => undefined,
  );
  return loading;
}

/** The API once loaded, undefined before or without it. */
export function telemetryApi(): OpenTelemetryApi | undefined {
  return api;
}

/** The version of recordbase, the scope's version (undefined if its package.json is not where the build puts it). */
export function telemetryScopeVersion(): string | undefined {
  return scopeVersion;
}

/** recordbase's own version, from the package.json above lib/ (source) or dist/lib/ (built). */
function readOwnVersion(): string | undefined {
  for (const relative of ['../../../package.json', '../../package.json']) {
    try {
      const manifest = JSON.parse(readFileSync(new URL(relative, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (manifest.name === 'recordbase') return manifest.version;
    } catch {
      // Not there: the other layout.
    }
  }
  return undefined;
}
