import { context, metrics, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { MeterProvider, MetricReader, type DataPoint, type MetricData } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';

/** A metric reader the test collects from when it likes (no timer). */
class CollectingReader extends MetricReader {
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
}

/** The OpenTelemetry SDK as a host would register it, exporting to memory. */
export interface TestTelemetry {
  readonly spans: InMemorySpanExporter;
  /** Every metric collected now. */
  collectMetrics(): Promise<MetricData[]>;
  /** Unregisters every global provider (the next test file starts clean). */
  stop(): Promise<void>;
}

/**
 * Registers the real SDK globally: a tracer provider with an in-memory exporter behind a simple
 * processor, a meter provider with a reader, and (unless `contextManager` is false) the
 * AsyncLocalStorage context manager the Node SDK installs.
 */
export function registerTestTelemetry(options: { contextManager?: boolean } = {}): TestTelemetry {
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  const reader = new CollectingReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  if (options.contextManager !== false) context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(tracerProvider);
  metrics.setGlobalMeterProvider(meterProvider);
  return {
    spans,
    async collectMetrics() {
      const { resourceMetrics } = await reader.collect();
      return resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics);
    },
    async stop() {
      trace.disable();
      metrics.disable();
      context.disable();
      await tracerProvider.shutdown();
      await meterProvider.shutdown();
    },
  };
}

/** The data points of the metric named `name`. */
export function pointsOf(collected: MetricData[], name: string): DataPoint<unknown>[] {
  return collected.filter((metric) => metric.descriptor.name === name).flatMap((metric) => metric.dataPoints as DataPoint<unknown>[]);
}

/**
 * Everything the exported telemetry says, as one text: every span's name, attributes, events and
 * their attributes, links and their attributes, status message and resource, and every metric's
 * name and data points' attributes. What an attack test searches for markers.
 */
export function describeExported(spans: readonly ReadableSpan[], collected: MetricData[]): string {
  const parts: unknown[] = [];
  for (const span of spans) {
    parts.push(span.name, span.attributes, span.status, span.resource.attributes, span.instrumentationScope);
    for (const event of span.events) parts.push(event.name, event.attributes);
    for (const link of span.links) parts.push(link.attributes);
  }
  for (const metric of collected) {
    parts.push(metric.descriptor);
    for (const point of metric.dataPoints) parts.push(point.attributes);
  }
  return JSON.stringify(parts);
}
