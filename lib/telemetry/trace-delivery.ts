import { endSpan, isTracing, linkToTraceparent, startSpan, traceparentOf, type TelemetrySpan } from './start-span.js';
import { isMetering, recordDeliveryLatency } from './telemetry-metrics.js';

/** Writes remembered in this process, for a delivery whose outbox row carries no traceparent (an autocommit write). */
const MAX_REMEMBERED_WRITES = 1_024;
const REMEMBERED_FOR_MS = 60_000;
const writes = new Map<string, { traceparent: string; at: number }>();

const keyOf = (table: string, recordId: string) => `${table}\u0000${recordId}`;

/**
 * Remembers, in memory only, that the traced request `span` wrote the row `recordId` of `table`:
 * an autocommit write sends no BEGIN to carry its traceparent into the outbox, so a delivery in
 * this process finds its link here. Bounded (the oldest go first) and short-lived; never exported.
 */
export function rememberWrite(table: string, recordId: string, span: TelemetrySpan | undefined): void {
  const traceparent = traceparentOf(span);
  if (traceparent === null) return;
  const key = keyOf(table, recordId);
  writes.delete(key);
  writes.set(key, { traceparent, at: Date.now() });
  if (writes.size > MAX_REMEMBERED_WRITES) writes.delete(writes.keys().next().value!);
}

/** The traceparent a write of this process left for `table`'s row `recordId`, taken (each change is delivered once here). */
function takeRememberedWrite(table: string, recordId: string): string | undefined {
  const key = keyOf(table, recordId);
  const found = writes.get(key);
  writes.delete(key);
  return found !== undefined && Date.now() - found.at <= REMEMBERED_FOR_MS ? found.traceparent : undefined;
}

/** One change realtime delivers, as its span and latency need it (lib/db/realtime/realtime-outbox-sql.ts's OutboxChange). */
export interface DeliveredChange {
  /** The collection table (the outbox's `collection`). */
  readonly collection: string;
  readonly recordId: string;
  readonly action: string;
  readonly traceparent?: string;
  readonly writtenAtMs: number;
}

/**
 * Starts the CONSUMER span `realtime deliver` of one change that reaches subscribers on this
 * instance, linked to the span of the request that wrote it (the outbox's traceparent, written
 * on any instance; else a write of this process), with the collection's name and the action; and
 * records `recordbase.realtime.delivery.latency` (from the write's transaction start, in the
 * database's clock, to now). Returns what ends the span. Without the API, nothing.
 */
export function traceDelivery(change: DeliveredChange, collectionName: string): () => void {
  if (!isTracing() && !isMetering()) return () => undefined;
  recordDeliveryLatency(Math.max(0, Date.now() - change.writtenAtMs) / 1000);
  const link = linkToTraceparent(change.traceparent ?? takeRememberedWrite(change.collection, change.recordId));
  const span = startSpan('realtime deliver', {
    kind: 'consumer',
    attributes: { 'recordbase.collection': collectionName, 'recordbase.realtime.action': change.action },
    links: link === undefined ? undefined : [link],
    root: true,
  });
  return () => endSpan(span);
}
