import { context, propagation, type Context } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type { HistogramMetricData } from '@opentelemetry/sdk-metrics';
import { makePng } from '../support/file-fixtures.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { openSse } from '../support/sse-reader.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';
import { pointsOf, registerTestTelemetry, type TestTelemetry } from '../support/telemetry-sdk.js';

/*
 * Issue 44, part 1: the spans and metrics a host's OpenTelemetry SDK receives, through a
 * listening server. The SDK is registered after the router started (a host may do so), so the
 * tracer and meter must be taken again then.
 */

const collections = [
  {
    name: 'posts',
    fields: [
      { name: 'title', type: 'text' as const },
      { name: 'image', type: 'file' as const, maxSelect: 1 },
    ],
    rules: OPEN_RULES,
  },
];

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN_ID = '00f067aa0ba902b7';

/** The finished spans once `test` holds for them (a request's span ends when its response closes, possibly after the client read it). */
async function spansWhen(telemetry: TestTelemetry, test: (spans: ReadableSpan[]) => boolean): Promise<ReadableSpan[]> {
  for (let i = 0; i < 200 && !test(telemetry.spans.getFinishedSpans()); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  return telemetry.spans.getFinishedSpans();
}

const childrenOf = (spans: ReadableSpan[], parent: ReadableSpan) => spans.filter((span) => span.parentSpanContext?.spanId === parent.spanContext().spanId);

describe.each(testEngines())('OpenTelemetry spans and metrics on %s', (engine) => {
  let app: TestApp;
  let telemetry: TestTelemetry;

  beforeAll(async () => {
    app = await startTestApp(engine, {
      collections,
      hooks: { posts: { beforeCreate: (e) => void (e.data.title === 'boom' && (() => { throw new Error('a hook failed'); })()) } },
    });
    // After the router started, as a host that sets up its SDK late would.
    telemetry = registerTestTelemetry();
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    // What a host's HTTP instrumentation does: the caller's traceparent becomes the active context.
    const host = app.server.listeners('request')[0] as (req: unknown, res: unknown) => void;
    app.server.removeAllListeners('request');
    app.server.on('request', (req, res) => {
      const extracted: Context = propagation.extract(context.active(), req.headers);
      context.with(extracted, () => host(req, res));
    });
  }, 90_000);

  afterAll(async () => {
    await app?.close();
    propagation.disable();
    await telemetry?.stop();
  });

  beforeEach(() => telemetry.spans.reset());

  it("names a request's span by its route, under the caller's trace, with its statements as children", async () => {
    await app.http.post('/backend/api/collections/posts/records').set('traceparent', `00-${TRACE_ID}-${CALLER_SPAN_ID}-01`).send({ title: 'hello' }).expect(200);
    const spans = await spansWhen(telemetry, (all) => all.some((span) => span.name.startsWith('POST ')));
    const request = spans.find((span) => span.name === 'POST /api/collections/{collection}/records')!;
    expect(request).toBeDefined();
    expect(request.kind).toBe(1); // SERVER
    expect(request.spanContext().traceId).toBe(TRACE_ID);
    expect(request.parentSpanContext?.spanId).toBe(CALLER_SPAN_ID);
    expect(request.attributes).toEqual({ 'http.request.method': 'POST', 'http.route': '/api/collections/{collection}/records', 'http.response.status_code': 200, 'recordbase.collection': 'posts' });
    expect(request.status.code).toBe(0); // UNSET
    const statements = childrenOf(spans, request).filter((span) => span.attributes['db.system.name'] === 'postgresql');
    expect(statements.map((span) => span.attributes['db.operation.name'])).toEqual(expect.arrayContaining(['INSERT']));
    const insert = statements.find((span) => span.attributes['db.operation.name'] === 'INSERT')!;
    expect(insert.name).toBe('INSERT posts');
    expect(insert.kind).toBe(2); // CLIENT
    expect(insert.attributes).toEqual({ 'db.system.name': 'postgresql', 'db.operation.name': 'INSERT', 'db.collection.name': 'posts' });
  });

  it('starts a root span without a caller, and marks a 500 an error', async () => {
    await app.http.get('/backend/api/collections/posts/records').expect(200);
    await app.http.post('/backend/api/collections/posts/records').send({ title: 'boom' }).expect(500);
    const spans = await spansWhen(telemetry, (all) => all.filter((span) => span.kind === 1).length >= 2);
    const [list, failed] = spans.filter((span) => span.kind === 1);
    expect(list!.parentSpanContext).toBeUndefined();
    expect(list!.status.code).toBe(0);
    expect(failed!.attributes['http.response.status_code']).toBe(500);
    expect(failed!.status).toEqual({ code: 2 }); // ERROR, no message: it could quote a value
  });

  it("gives storage calls and thumbnail renders spans under the request's span", async () => {
    const created = await app.http.post('/backend/api/collections/posts/records').field('title', 'pic').attach('image', makePng(40, 40), 'pic.png').expect(200);
    const upload = (await spansWhen(telemetry, (all) => all.some((span) => span.kind === 1))).find((span) => span.kind === 1)!;
    const writes = childrenOf(telemetry.spans.getFinishedSpans(), upload).filter((span) => span.name.startsWith('storage '));
    // The disk storage moves the spooled upload into place (adopt) rather than streaming it (write).
    expect(writes.map((span) => span.name)).toContain('storage adopt');
    expect(writes[0]!.attributes).toEqual({ 'recordbase.storage.operation': writes[0]!.name.slice('storage '.length) });
    telemetry.spans.reset();
    await app.http.get(`/backend/api/files/posts/${created.body.id}/${created.body.image}?thumb=10x10`).expect(200);
    const spans = await spansWhen(telemetry, (all) => all.some((span) => span.kind === 1));
    const download = spans.find((span) => span.kind === 1)!;
    expect(download.name).toBe('GET /api/files/{collection}/{recordId}/{filename}');
    const render = spans.find((span) => span.name === 'thumbnail render')!;
    expect(render.parentSpanContext?.spanId).toBe(download.spanContext().spanId);
    expect(render.attributes).toEqual({ 'recordbase.thumbnail.count': 1 });
    expect(childrenOf(spans, download).map((span) => span.name)).toEqual(expect.arrayContaining(['storage stat', 'storage write', 'thumbnail render']));
  });

  it('records request durations by route, method, status and collection, pool waits, and the gauges', async () => {
    await app.http.get('/backend/api/collections/posts/records').expect(200);
    await app.http.get('/backend/api/health').expect(200);
    const stream = await openSse(`${app.baseUrl}/backend/api/realtime`);
    try {
      await stream.clientId();
      const collected = await telemetry.collectMetrics();
      const durations = pointsOf(collected, 'http.server.request.duration');
      const list = durations.find((point) => point.attributes['http.route'] === '/api/collections/{collection}/records' && point.attributes['http.request.method'] === 'GET');
      expect(list?.attributes).toEqual({ 'http.request.method': 'GET', 'http.route': '/api/collections/{collection}/records', 'http.response.status_code': 200, 'recordbase.collection': 'posts' });
      expect(durations.find((point) => point.attributes['http.route'] === '/api/health')?.attributes).toEqual({ 'http.request.method': 'GET', 'http.route': '/api/health', 'http.response.status_code': 200 });
      const histogram = collected.find((metric) => metric.descriptor.name === 'http.server.request.duration') as HistogramMetricData;
      expect(histogram.descriptor.unit).toBe('s');
      const waits = pointsOf(collected, 'db.client.connection.wait_time') as { value: { count: number } }[];
      expect(waits.reduce((sum, point) => sum + point.value.count, 0)).toBeGreaterThan(0);
      // Every request's unit passes the fair gate (its client is its address): each pass is a wait, most of them 0.
      const turns = pointsOf(collected, 'recordbase.db.fair_gate.wait_time') as { value: { count: number } }[];
      expect(turns.reduce((sum, point) => sum + point.value.count, 0)).toBeGreaterThan(0);
      expect(pointsOf(collected, 'recordbase.realtime.streams').map((point) => point.value)).toEqual([1]);
      expect(pointsOf(collected, 'recordbase.thumbnail.queue.length').map((point) => point.value)).toEqual([0]);
      // Awake with a stream: the outbox is counted from this instance's read position (nothing unread here).
      expect(pointsOf(collected, 'recordbase.realtime.outbox.depth').map((point) => point.value)).toEqual([expect.any(Number)]);
      // No replica: no lag to report.
      expect(pointsOf(collected, 'recordbase.db.replica.lag')).toEqual([]);
    } finally {
      stream.close();
    }
    for (let i = 0; i < 200 && pointsOf(await telemetry.collectMetrics(), 'recordbase.realtime.streams')[0]?.value !== 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(pointsOf(await telemetry.collectMetrics(), 'recordbase.realtime.streams').map((point) => point.value)).toEqual([0]);
  });

  it("keeps statements under the request's span with no context manager (the parent travels with the request)", async () => {
    context.disable();
    await app.http.get('/backend/api/collections/posts/records').expect(200);
    const spans = await spansWhen(telemetry, (all) => all.some((span) => span.kind === 1));
    const request = spans.find((span) => span.kind === 1)!;
    const statements = childrenOf(spans, request).filter((span) => span.attributes['db.system.name'] === 'postgresql');
    expect(statements.map((span) => span.name)).toEqual(expect.arrayContaining(['SELECT posts']));
    // No statement of this request became a root of its own.
    expect(spans.filter((span) => span.attributes['db.system.name'] !== undefined && span.parentSpanContext === undefined)).toEqual([]);
  });
});
