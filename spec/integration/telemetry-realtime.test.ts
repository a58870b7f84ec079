import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { OUTBOX_TABLE } from '../../lib/db/shared-names.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { openSse, type SseConnection } from '../support/sse-reader.js';
import { startSiblingRouter, startTestApp, type SiblingRouter, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';
import { pointsOf, registerTestTelemetry, type TestTelemetry } from '../support/telemetry-sdk.js';

/*
 * Issue 44, part 1: a realtime delivery is a span of its own (a root: it runs when the outbox is
 * read, not in the write's request), linked to the span of the request that wrote the change, and
 * the commit-to-delivery latency is a histogram. A traced write carries its traceparent into the
 * outbox (its transaction's SET LOCAL, or its statement's leading comment), so an instance that
 * did not write it links too.
 */

const collections = [{ name: 'notes', fields: [{ name: 'title', type: 'text' as const }], rules: OPEN_RULES }];

async function spansWhen(telemetry: TestTelemetry, test: (spans: ReadableSpan[]) => boolean): Promise<ReadableSpan[]> {
  for (let i = 0; i < 300 && !test(telemetry.spans.getFinishedSpans()); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  return telemetry.spans.getFinishedSpans();
}

describe.each(testEngines())('realtime delivery spans on %s', (engine) => {
  let app: TestApp;
  let sibling: SiblingRouter | undefined;
  let telemetry: TestTelemetry;
  const streams: SseConnection[] = [];

  beforeAll(async () => {
    telemetry = registerTestTelemetry();
    app = await startTestApp(engine, { collections });
  }, 90_000);

  afterAll(async () => {
    for (const stream of streams) stream.close();
    await sibling?.close();
    await app?.close();
    await telemetry?.stop();
  });

  /** A stream on `baseUrl` subscribed to notes. */
  async function subscribe(baseUrl: string, post: (body: object) => Promise<{ status: number }>): Promise<SseConnection> {
    const stream = await openSse(`${baseUrl}/backend/api/realtime`);
    streams.push(stream);
    const clientId = await stream.clientId();
    expect((await post({ clientId, subscriptions: ['notes'] })).status).toBe(204);
    return stream;
  }

  it("links an autocommit create's delivery to the create's request span, and records its latency", async () => {
    const stream = await subscribe(app.baseUrl, (body) => app.http.post('/backend/api/realtime').send(body));
    telemetry.spans.reset();
    const created = await app.http.post('/backend/api/collections/notes/records').send({ title: 'one' }).expect(200);
    await stream.next((event) => event.event === 'notes');
    const spans = await spansWhen(telemetry, (all) => all.some((span) => span.name === 'realtime deliver') && all.some((span) => span.kind === 1));
    const create = spans.find((span) => span.name === 'POST /api/collections/{collection}/records')!;
    const delivery = spans.find((span) => span.name === 'realtime deliver')!;
    expect(delivery.kind).toBe(4); // CONSUMER
    expect(delivery.parentSpanContext).toBeUndefined();
    expect(delivery.attributes).toEqual({ 'recordbase.collection': 'notes', 'recordbase.realtime.action': 'create' });
    expect(delivery.links.map((link) => link.context.spanId)).toEqual([create.spanContext().spanId]);
    expect(delivery.links[0]!.context.traceId).toBe(create.spanContext().traceId);
    // One autocommit statement, no BEGIN: its traceparent reached the outbox in the statement's leading comment.
    const [row] = await app.database.db(OUTBOX_TABLE).where({ record_id: created.body.id }).select('traceparent');
    expect(row?.traceparent).toBe(`00-${create.spanContext().traceId}-${create.spanContext().spanId}-01`);
    const latency = pointsOf(await telemetry.collectMetrics(), 'recordbase.realtime.delivery.latency') as { value: { count: number } }[];
    expect(latency.reduce((sum, point) => sum + point.value.count, 0)).toBeGreaterThanOrEqual(1);
  });

  it("writes a batch's traceparent into the outbox, and another router's delivery links to it", async () => {
    sibling = await startSiblingRouter(app, { collections });
    const siblingUrl = (sibling.http as unknown as { app: string }).app;
    const stream = await subscribe(siblingUrl, (body) => sibling!.http.post('/backend/api/realtime').send(body));
    telemetry.spans.reset();
    await app.http
      .post('/backend/api/batch')
      .send({ requests: [{ method: 'POST', url: '/api/collections/notes/records', body: { title: 'batched' } }] })
      .expect(200);
    const event = await stream.next((e) => e.event === 'notes' && e.data!.includes('batched'));
    const recordId = (JSON.parse(event.data!) as { record: { id: string } }).record.id;
    const spans = await spansWhen(telemetry, (all) => all.some((span) => span.name === 'realtime deliver') && all.some((span) => span.name === 'POST /api/batch'));
    const batch = spans.find((span) => span.name === 'POST /api/batch')!;
    const [row] = await app.database.db(OUTBOX_TABLE).where({ record_id: recordId }).select('traceparent');
    expect(row?.traceparent).toBe(`00-${batch.spanContext().traceId}-${batch.spanContext().spanId}-01`);
    // Both routers deliver it (each holds a stream): at most one can have the write in memory, so the other links through the outbox.
    const deliveries = (await spansWhen(telemetry, (all) => all.filter((span) => span.name === 'realtime deliver').length >= 2)).filter((span) => span.name === 'realtime deliver');
    expect(deliveries.map((delivery) => delivery.links.map((link) => link.context.spanId))).toEqual([[batch.spanContext().spanId], [batch.spanContext().spanId]]);
  });
});

describe.each(testEngines())("realtime's background statements on %s", (engine) => {
  let app: TestApp;
  let telemetry: TestTelemetry;

  beforeAll(async () => {
    telemetry = registerTestTelemetry();
    // Asleep almost at once, so the stream below wakes it, and heartbeats every 50 ms once awake.
    app = await startTestApp(engine, { collections, realtime: { idleAfterMs: 100, instanceHeartbeatMs: 50 } });
  }, 90_000);

  afterAll(async () => {
    await app?.close();
    await telemetry?.stop();
  });

  it("are not children of the request that woke realtime (with an async context manager its timers would keep that request's context)", async () => {
    for (let i = 0; i < 100 && !(await sleeping(app)); i++) await new Promise((resolve) => setTimeout(resolve, 20));
    telemetry.spans.reset();
    const stream = await openSse(`${app.baseUrl}/backend/api/realtime`);
    let settledAt: number;
    try {
      await stream.clientId();
      // The connect's own statements are done once it has answered; several heartbeats follow while its span is still open.
      await new Promise((resolve) => setTimeout(resolve, 100));
      settledAt = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 400));
    } finally {
      stream.close();
    }
    const spans = await spansWhen(telemetry, (all) => all.some((span) => span.name === 'GET /api/realtime'));
    const connect = spans.find((span) => span.name === 'GET /api/realtime')!;
    const startedMs = (span: ReadableSpan) => span.startTime[0] * 1000 + span.startTime[1] / 1e6;
    const underIt = spans.filter((span) => span.parentSpanContext?.spanId === connect.spanContext().spanId);
    // The connect's own statements (its client's row) are its children; the heartbeats that follow are not.
    expect(underIt.length).toBeGreaterThan(0);
    expect(underIt.filter((span) => startedMs(span) > settledAt!).map((span) => span.name)).toEqual([]);
  });
});

/** Whether the router's realtime sleeps now: it answers no heartbeat (its instance row's heartbeat stops moving). */
async function sleeping(app: TestApp): Promise<boolean> {
  const before = await app.database.db('_recordbase_realtime_instances').max({ at: 'heartbeat_at' }).first();
  await new Promise((resolve) => setTimeout(resolve, 150));
  const after = await app.database.db('_recordbase_realtime_instances').max({ at: 'heartbeat_at' }).first();
  return String(before?.at) === String(after?.at);
}
