import { SCOPE_NAME, telemetryApi, telemetryScopeVersion, type Attributes, type ObservableShape, type RecorderShape } from './telemetry-api.js';

/**
 * What one router reports to the observable gauges, read when the host's SDK collects (never on
 * a request's path). Each is optional: a router without realtime, replica or thumbnails has none.
 */
export interface GaugeSource {
  /** Realtime streams open on this instance. */
  streams?(): number;
  /** Outbox entries written but not yet read by this instance (undefined: not known); may ask the database, so a promise. */
  outboxDepth?(): number | undefined | Promise<number | undefined>;
  /** The replica's lag's upper bound in milliseconds (undefined: not known). */
  replicaLagMs?(): number | undefined;
  /** Thumbnails waiting to be made. */
  thumbnailQueue?(): number;
}

/** The instruments recordbase records to, one set per meter provider. */
interface Instruments {
  provider: object;
  /** False when the provider is none (the API's no-op meter): nothing is recorded. */
  recording: boolean;
  requestDuration: RecorderShape;
  connectionWait: RecorderShape;
  gateWait: RecorderShape;
  deliveryLatency: RecorderShape;
}

const SECONDS = { unit: 's' } as const;
/** Buckets of OpenTelemetry's HTTP semantic conventions (seconds). */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];

const sources = new Set<GaugeSource>();
let instruments: Instruments | undefined;

/**
 * The instruments of the current global meter provider, made again when it changed: unlike its
 * tracer, the API's meter taken before the host registered an SDK stays a no-op for good, and a
 * host may register after the router started. Undefined without the API.
 */
function currentInstruments(): Instruments | undefined {
  const api = telemetryApi();
  if (api === undefined) return undefined;
  const provider = api.metrics.getMeterProvider();
  if (instruments?.provider === provider) return instruments.recording ? instruments : undefined;
  const meter = api.metrics.getMeter(SCOPE_NAME, telemetryScopeVersion());
  const seconds = (description: string) => ({ ...SECONDS, description, advice: { explicitBucketBoundaries: DURATION_BUCKETS } });
  instruments = {
    provider,
    recording: meter !== api.createNoopMeter(),
    requestDuration: meter.createHistogram('http.server.request.duration', seconds('Duration of the HTTP requests recordbase served.')),
    connectionWait: meter.createHistogram('db.client.connection.wait_time', seconds("Time a statement's unit of work waited for a pooled connection.")),
    gateWait: meter.createHistogram('recordbase.db.fair_gate.wait_time', seconds("Time a unit of work waited for its client's turn at the fair gate (lib/db/statements/fair-gate.ts).")),
    deliveryLatency: meter.createHistogram('recordbase.realtime.delivery.latency', seconds('From the commit of a write to its realtime event being sent to a stream.')),
  };
  observe(meter.createObservableGauge('recordbase.realtime.streams', { description: 'Realtime streams open on this instance.', unit: '{stream}' }), (source) => source.streams?.(), sum);
  observe(meter.createObservableGauge('recordbase.realtime.outbox.depth', { description: 'Outbox entries written and not yet read by this instance.', unit: '{entry}' }), (source) => source.outboxDepth?.(), sum);
  observe(meter.createObservableGauge('recordbase.db.replica.lag', { description: "The read replica's lag, an upper bound.", unit: 's' }), (source) => toSeconds(source.replicaLagMs?.()), max);
  observe(meter.createObservableGauge('recordbase.thumbnail.queue.length', { description: 'Thumbnails waiting to be made.', unit: '{thumbnail}' }), (source) => source.thumbnailQueue?.(), sum);
  return instruments.recording ? instruments : undefined;
}

/** Reports the sources' values combined into one (several routers in one process report one value, without a label of their own). */
function observe(gauge: ObservableShape, read: (source: GaugeSource) => number | undefined | Promise<number | undefined>, combine: (values: number[]) => number): void {
  gauge.addCallback(async (result) => {
    const values: number[] = [];
    for (const source of sources) {
      // A source that fails (the database did not answer) reports nothing this time.
      const value = await Promise.resolve()
        .then(() => read(source))
        .catch(() => undefined);
      if (value !== undefined && Number.isFinite(value)) values.push(value);
    }
    if (values.length > 0) result.observe(combine(values));
  });
}

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
const max = (values: number[]) => Math.max(...values);
const toSeconds = (ms: number | undefined) => (ms === undefined ? undefined : ms / 1000);

/** Adds a router's gauges; returns what removes them (the router's close()). */
export function registerGaugeSource(source: GaugeSource): () => void {
  sources.add(source);
  currentInstruments();
  return () => sources.delete(source);
}

/** The labels of a request's duration: the route template, method, status and a collection that exists; nothing else (bounded cardinality). */
export interface RequestLabels {
  method: string;
  route: string;
  status: number;
  collection?: string;
}

/** Records one request's duration. */
export function recordRequestDuration(seconds: number, labels: RequestLabels): void {
  const recorder = currentInstruments()?.requestDuration;
  if (recorder === undefined) return;
  const attributes: Attributes = { 'http.request.method': labels.method, 'http.route': labels.route, 'http.response.status_code': labels.status };
  if (labels.collection !== undefined) attributes['recordbase.collection'] = labels.collection;
  recorder.record(seconds, attributes);
}

/** Records a wait for a pooled connection (seconds). */
export function recordConnectionWait(seconds: number): void {
  currentInstruments()?.connectionWait.record(seconds);
}

/** Records a wait at the fair gate (seconds). */
export function recordGateWait(seconds: number): void {
  currentInstruments()?.gateWait.record(seconds);
}

/** Records the time from a write's commit to its event sent to a stream (seconds). */
export function recordDeliveryLatency(seconds: number): void {
  currentInstruments()?.deliveryLatency.record(seconds);
}

/** Whether a host's SDK takes metrics now (a meter provider is registered). */
export function isMetering(): boolean {
  return currentInstruments() !== undefined;
}
