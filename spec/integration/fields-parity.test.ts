import { createRecordsRouter, ValidationError, type CollectionDefinition, type FieldDefinition } from '../../lib/index.js';
import { buildSchemaRegistry } from '../../lib/schema/collection-schema.js';
import { DEFAULT_RECORD_ID_FORMAT } from '../../lib/schema/record-id.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { createMemoryLogger, startTestApp, type TestApp } from '../support/test-app.js';
import { openTestDatabase, testEngines } from '../support/test-database.js';

/**
 * PocketBase's field types and options brought over (issue 31 item 2): geoPoint, autodate,
 * editor, text autogeneratePattern, date min/max, email and url domain lists, relation
 * minSelect, presentable and help; each through HTTP (JSON and multipart), batch and the server
 * API, on both engines; and a collection export as PocketBase writes it, started unchanged.
 */

const RECORD_DATE = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const ROOT = { Authorization: 'token-root' };
const HOOK_FORGED = '2002-02-02 00:00:00.000Z';
const api = (p: string) => `/backend/api/collections/${p}`;

function collections(): CollectionDefinition[] {
  return [
    { name: 'tags', fields: [{ name: 'label', type: 'text' }], rules: OPEN_RULES },
    {
      name: 'places',
      fields: [
        { name: 'name', type: 'text', presentable: true, help: 'What the place is called.' },
        { name: 'slug', type: 'text', autogeneratePattern: 'place-[a-z0-9]{8}', pattern: '^[a-z0-9-]+$', max: 40 },
        { name: 'code', type: 'text', required: true, autogeneratePattern: '[A-Z]{3}[0-9]{3}' },
        { name: 'loc', type: 'geoPoint' },
        { name: 'notes', type: 'editor', maxSize: 64 },
        { name: 'stamped', type: 'autodate', onCreate: true },
        { name: 'touched', type: 'autodate', onUpdate: true },
        { name: 'both', type: 'autodate', onCreate: true, onUpdate: true },
        { name: 'opens', type: 'date', min: '2020-01-01', max: '2030-12-31 23:59:59.999Z' },
        { name: 'contact', type: 'email', onlyDomains: ['example.com'] },
        { name: 'site', type: 'url', exceptDomains: ['evil.example'] },
        { name: 'tags', type: 'relation', collection: 'tags', maxSelect: 5, minSelect: 2 },
      ],
      rules: OPEN_RULES,
    },
    { name: 'pins', fields: [{ name: 'at', type: 'geoPoint', required: true }], rules: OPEN_RULES },
    { name: 'visits', fields: [{ name: 'place', type: 'relation', collection: 'places' }], rules: OPEN_RULES },
    // Refuses any write whose body a rule sees an autodate in: a client's value must never reach the rules.
    {
      name: 'guarded',
      fields: [{ name: 'seen', type: 'autodate', onCreate: true, onUpdate: true }],
      rules: { ...OPEN_RULES, create: '@request.body.seen:isset = false', update: '@request.body.seen:isset = false' },
    },
  ];
}

describe.each(testEngines())('PocketBase field types and options on %s', (engine) => {
  let app: TestApp;

  beforeAll(async () => {
    // A before-hook that forges the autodate fields of records named "hooked": the server's instant still wins.
    const forge = (e: { data: Record<string, unknown> }) => {
      if (e.data.name === 'hooked') Object.assign(e.data, { stamped: HOOK_FORGED, touched: HOOK_FORGED, both: HOOK_FORGED });
    };
    app = await startTestApp(engine, { collections: collections(), hooks: { places: { beforeCreate: forge, beforeUpdate: forge } } });
  }, 90_000);
  afterAll(async () => {
    await app?.close();
  });

  const create = (body: object, collection = 'places') => app.http.post(api(`${collection}/records`)).send(body);
  const update = (id: string, body: object) => app.http.patch(api(`places/records/${id}`)).send(body);
  /** The stored row, read straight from the table. */
  const row = async (id: string, table = 'places') => (await app.database.db(table).where({ id }).first()) as Record<string, unknown>;
  async function createPlace(body: object = {}): Promise<Record<string, unknown>> {
    const res = await create(body);
    expect(res.status).toBe(200);
    return res.body as Record<string, unknown>;
  }
  function expectFieldError(res: { status: number; body: unknown }, field: string, code: string): void {
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ status: 422, data: { [field]: { code } } });
  }

  describe('geoPoint', () => {
    test('a point is {lon, lat}; the origin when not sent, null or ""; other keys are dropped, never stored', async () => {
      const a = await createPlace({ loc: { lon: 23.32, lat: 42.69, note: 'x'.repeat(1000), nested: { deep: true } } });
      expect(a.loc).toEqual({ lon: 23.32, lat: 42.69 });
      expect(Object.keys(a.loc as object)).toEqual(['lon', 'lat']);
      expect((await row(a.id as string)).loc).toEqual({ lon: 23.32, lat: 42.69 });
      expect((await createPlace()).loc).toEqual({ lon: 0, lat: 0 });
      expect((await createPlace({ loc: null })).loc).toEqual({ lon: 0, lat: 0 });
      expect((await createPlace({ loc: '' })).loc).toEqual({ lon: 0, lat: 0 });
      expect((await createPlace({ loc: { lat: 5 } })).loc).toEqual({ lon: 0, lat: 5 });
      expect((await createPlace({ loc: '{"lon": -1.5, "lat": "2"}' })).loc).toEqual({ lon: -1.5, lat: 2 });
    });

    test.each([
      [{ lon: 0, lat: 90.0001 }, 'validation_invalid_latitude'],
      [{ lon: 10, lat: -91 }, 'validation_invalid_latitude'],
      [{ lon: 180.5, lat: 0 }, 'validation_invalid_longitude'],
      [{ lon: -181, lat: 1 }, 'validation_invalid_longitude'],
      [{ lon: 'east', lat: 1 }, 'validation_invalid_value'],
      [{ lon: true, lat: 1 }, 'validation_invalid_value'],
      [{ lon: [1], lat: 1 }, 'validation_invalid_value'],
      [[23.32, 42.69], 'validation_invalid_value'],
      ['23.32,42.69', 'validation_invalid_value'],
      ['{"lon": 1e400, "lat": 0}', 'validation_invalid_value'],
      [42, 'validation_invalid_value'],
      [{ lon: 'NaN', lat: 1 }, 'validation_invalid_value'],
      [{ lon: 'Infinity', lat: 1 }, 'validation_invalid_value'],
      [{ lon: '1e400', lat: 1 }, 'validation_invalid_value'],
      [{ lon: '0x10', lat: 1 }, 'validation_invalid_value'],
      [{ lon: { valueOf: 5 }, lat: 1 }, 'validation_invalid_value'],
      [{ lon: 1, lat: { lat: 1 } }, 'validation_invalid_value'],
      [{ lon: null, lat: 1e308 }, 'validation_invalid_latitude'],
      [[{ lon: 1, lat: 2 }, { lon: 3, lat: 4 }], 'validation_invalid_value'],
      [[[1, 2]], 'validation_invalid_value'],
      [true, 'validation_invalid_value'],
    ])('%j is refused with %s, and nothing is stored', async (loc, code) => {
      const before = Number((await app.database.db('places').count({ n: '*' }).first())!.n);
      expectFieldError(await create({ loc }), 'loc', code);
      expect(Number((await app.database.db('places').count({ n: '*' }).first())!.n)).toBe(before);
    });

    test('a JSON number beyond double range, a prototype key and a large object are refused or ignored, never stored', async () => {
      const huge = await app.http.post(api('places/records')).set('Content-Type', 'application/json').send('{"loc": {"lon": 1e400, "lat": 0}}');
      expectFieldError(huge, 'loc', 'validation_invalid_value');
      const proto = await app.http.post(api('places/records')).set('Content-Type', 'application/json').send('{"loc": {"__proto__": {"lon": 5, "lat": 6}}}');
      expect(proto.status).toBe(200);
      expect(proto.body.loc).toEqual({ lon: 0, lat: 0 });
      const wide = Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, i]));
      const big = await createPlace({ loc: { ...wide, lon: 4, lat: 5 } });
      expect((await row(big.id as string)).loc).toEqual({ lon: 4, lat: 5 });
    });

    test('the edges of the ranges are points; a required point refuses the origin (PocketBase: not "Null Island")', async () => {
      expect((await createPlace({ loc: { lon: -180, lat: 90 } })).loc).toEqual({ lon: -180, lat: 90 });
      expectFieldError(await create({}, 'pins'), 'at', 'validation_required');
      expectFieldError(await create({ at: { lon: 0, lat: 0 } }, 'pins'), 'at', 'validation_required');
      expect((await create({ at: { lon: 0, lat: 0.000001 } }, 'pins')).status).toBe(200);
    });

    test('multipart sends the point as a JSON part or through @jsonPayload (as the SDK does)', async () => {
      const plain = await app.http.post(api('places/records')).field('loc', '{"lon": 7, "lat": 8}');
      expect(plain.status).toBe(200);
      expect(plain.body.loc).toEqual({ lon: 7, lat: 8 });
      const payload = await app.http.post(api('places/records')).field('@jsonPayload', JSON.stringify({ loc: { lon: 9, lat: 10 } }));
      expect(payload.body.loc).toEqual({ lon: 9, lat: 10 });
      expectFieldError(await app.http.post(api('places/records')).field('loc', 'not json'), 'loc', 'validation_invalid_value');
    });

    test('filters and sort read loc.lon and loc.lat as numbers, also through a relation; loc = null is the origin', async () => {
      const north = await createPlace({ name: 'geo-north', loc: { lon: 10, lat: 60 } });
      const south = await createPlace({ name: 'geo-south', loc: { lon: -20, lat: -30 } });
      const origin = await createPlace({ name: 'geo-origin' });
      const names = async (query: string) => {
        const res = await app.http.get(api(`places/records?${query}`));
        expect(res.status).toBe(200);
        return (res.body.items as { name: string }[]).map((r) => r.name);
      };
      const geo = encodeURIComponent('name ~ "geo-"');
      expect(await names(`filter=${geo}%26%26${encodeURIComponent('loc.lat > 0')}`)).toEqual(['geo-north']);
      expect(await names(`filter=${geo}%26%26${encodeURIComponent('(loc.lon <= -20 || loc.lat >= 60)')}&sort=name`)).toEqual(['geo-north', 'geo-south']);
      expect(await names(`filter=${geo}&sort=-loc.lat`)).toEqual(['geo-north', 'geo-origin', 'geo-south']);
      expect(await names(`filter=${geo}&sort=loc.lon,name`)).toEqual(['geo-south', 'geo-origin', 'geo-north']);
      expect(await names(`filter=${geo}%26%26${encodeURIComponent('loc = null')}`)).toEqual(['geo-origin']);
      expect(await names(`filter=${geo}%26%26${encodeURIComponent('loc != null')}&sort=name`)).toEqual(['geo-north', 'geo-south']);
      for (const place of [north, south, origin]) expect((await create({ place: place.id }, 'visits')).status).toBe(200);
      const visits = await app.http.get(api(`visits/records?filter=${encodeURIComponent('place.loc.lat < 0')}&expand=place`));
      expect(visits.body.items.map((v: { expand: { place: { name: string } } }) => v.expand.place.name)).toEqual(['geo-south']);
      const sorted = await app.http.get(api('visits/records?sort=-place.loc.lon&expand=place'));
      expect(sorted.body.items.map((v: { expand: { place: { name: string } } }) => v.expand.place.name)).toEqual(['geo-north', 'geo-origin', 'geo-south']);
    });

    test('geoDistance(loc.lon, loc.lat, lon, lat) filters real rows in kilometres, also through a relation and with the origin', async () => {
      const sofia = await createPlace({ name: 'gd-sofia', loc: { lon: 23.3219, lat: 42.6977 } });
      const plovdiv = await createPlace({ name: 'gd-plovdiv', loc: { lon: 24.7453, lat: 42.1354 } }); // 132.5 km from Sofia
      const paris = await createPlace({ name: 'gd-paris', loc: { lon: 2.3522, lat: 48.8566 } }); // 1757.2 km
      await createPlace({ name: 'gd-origin' }); // 5287.8 km
      const names = async (filter: string, collection = 'places') => {
        const res = await app.http.get(api(`${collection}/records?filter=${encodeURIComponent(filter)}&sort=${collection === 'places' ? 'name' : 'place.name'}&expand=place`));
        expect([filter, res.status]).toEqual([filter, 200]);
        return (res.body.items as { name?: string; expand?: { place: { name: string } } }[]).map((r) => r.name ?? r.expand!.place.name);
      };
      const from = (a: string) => `name ~ "gd-" && geoDistance(${a}.lon, ${a}.lat, 23.3219, 42.6977)`;
      expect(await names(`${from('loc')} < 1`)).toEqual(['gd-sofia']);
      expect(await names(`${from('loc')} < 133`)).toEqual(['gd-plovdiv', 'gd-sofia']);
      expect(await names(`${from('loc')} < 132`)).toEqual(['gd-sofia']);
      expect(await names(`${from('loc')} > 1757 && ${from('loc')} < 1758`)).toEqual(['gd-paris']);
      expect(await names(`${from('loc')} > 5000`)).toEqual(['gd-origin']);
      expect(await names('name ~ "gd-" && geoDistance(loc.lon, loc.lat, loc.lon, loc.lat) = 0')).toEqual(['gd-origin', 'gd-paris', 'gd-plovdiv', 'gd-sofia']);
      for (const place of [sofia, plovdiv, paris]) expect((await create({ place: place.id }, 'visits')).status).toBe(200);
      expect(await names('place.name ~ "gd-" && geoDistance(place.loc.lon, place.loc.lat, 2.3522, 48.8566) < 10', 'visits')).toEqual(['gd-paris']);
    });

    test.each([
      ['geoDistance(loc, 0, 0, 0) < 1', /argument 1 must be a number/],
      ['geoDistance(name, 0, 0, 0) < 1', /argument 1 must be a number/],
      ["geoDistance(loc.lon, loc.lat, '1', 0) < 1", /argument 3 must be a number/],
      ['geoDistance(loc.lon, loc.lat, 0) < 1', /geoDistance/],
    ])('%s is a 400 naming the problem', async (filter, message) => {
      const res = await app.http.get(api(`places/records?filter=${encodeURIComponent(filter)}`));
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(message);
    });

    test('a whole point equals no text or number (compare loc.lon and loc.lat), `~` searches its JSON text, and no comparison is a 500', async () => {
      await createPlace({ name: 'whole', loc: { lon: 1, lat: 2 } });
      // An ordering of a whole point against a bool means nothing in either database: only its status is asserted.
      for (const [filter, count] of [['loc = \'{"lon":1,"lat":2}\'', 0], ['loc = 1', 0], ['loc > true', undefined], ['loc < "x"', undefined], ['loc ~ \'"lat": 2\'', 1]] as const) {
        const res = await app.http.get(api(`places/records?filter=${encodeURIComponent(`name = "whole" && ${filter}`)}`));
        expect([filter, res.status]).toEqual([filter, 200]);
        if (count !== undefined) expect([filter, res.body.items.length]).toEqual([filter, count]);
      }
    });

    test.each([
      ['filter', 'loc.alt > 1', /a geoPoint field has only "loc.lon" and "loc.lat"/],
      ['filter', 'loc.lon.x = 1', /a geoPoint field has only/],
      ['filter', 'loc.__proto__ = 1', /a geoPoint field has only/],
      ['sort', 'loc.constructor', /a geoPoint field has only/],
      ['filter', "loc.lat > 'north'", /not a valid number/],
    ])('%s %s is a 400 naming the problem, never a 500', async (param, value, message) => {
      const res = await app.http.get(api(`places/records?${param}=${encodeURIComponent(value)}`));
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(message);
    });
  });

  describe('autodate', () => {
    test('set by the server: onCreate on create, onUpdate on update, both on both; null until set', async () => {
      const before = Date.now();
      const a = await createPlace({ name: 'dated' });
      expect(a.stamped).toMatch(RECORD_DATE);
      expect(a.both).toBe(a.stamped);
      expect(a.touched).toBeNull();
      expect(Date.parse(a.stamped as string)).toBeGreaterThanOrEqual(before - 5);
      await new Promise((resolve) => setTimeout(resolve, 20));
      const res = await update(a.id as string, { name: 'dated again' });
      expect(res.status).toBe(200);
      expect(res.body.stamped).toBe(a.stamped);
      expect(res.body.touched).toMatch(RECORD_DATE);
      expect(res.body.both).toBe(res.body.touched);
      expect(Date.parse(res.body.both)).toBeGreaterThan(Date.parse(a.both as string));
      const listed = await app.http.get(api(`places/records?filter=${encodeURIComponent(`stamped = "${a.stamped as string}" && touched != null`)}`));
      expect(listed.body.items.map((r: { id: string }) => r.id)).toEqual([a.id]);
    });

    test('a client never sets it: JSON, modifier keys, multipart, @jsonPayload, a superuser, batch, the server API', async () => {
      const forged = '2001-01-01 00:00:00.000Z';
      const forgedAll = { stamped: forged, touched: forged, both: forged, 'stamped+': forged, '+both': forged, 'touched-': forged };
      const isServerSet = (record: Record<string, unknown>) => {
        for (const key of ['stamped', 'touched', 'both'] as const) expect(record[key]).not.toBe(forged);
        expect(record.stamped).toMatch(RECORD_DATE);
      };
      const json = await createPlace(forgedAll);
      isServerSet(json);
      expect(json.touched).toBeNull();
      const asRoot = await app.http.post(api('places/records')).set(ROOT).send(forgedAll);
      isServerSet(asRoot.body);
      const form = await app.http.post(api('places/records')).field('stamped', forged).field('both', forged).field('@jsonPayload', JSON.stringify({ touched: forged }));
      expect(form.status).toBe(200);
      isServerSet(form.body);
      const updated = await update(json.id as string, forgedAll);
      isServerSet(updated.body);
      expect(updated.body.stamped).toBe(json.stamped);
      const batch = await app.http.post('/backend/api/batch').send({
        requests: [
          { method: 'POST', url: '/api/collections/places/records', body: forgedAll },
          { method: 'PATCH', url: `/api/collections/places/records/${json.id as string}`, body: forgedAll },
        ],
      });
      expect(batch.status).toBe(200);
      for (const answer of batch.body as { body: Record<string, unknown> }[]) isServerSet(answer.body);
      const viaApi = await app.router.api.collection('places').create(forgedAll, { as: 'superuser' });
      isServerSet(viaApi);
      isServerSet(await app.router.api.collection('places').update(viaApi.id, forgedAll, { as: 'superuser' }));
      for (const id of [json.id, asRoot.body.id, form.body.id, viaApi.id] as string[]) {
        const stored = await row(id);
        for (const key of ['stamped', 'touched', 'both']) expect(stored[key] === null ? null : new Date(stored[key] as string).getUTCFullYear()).not.toBe(2001);
      }
    });

    test('rules never see a client\'s value in @request.body, in JSON or multipart', async () => {
      const forged = '2001-01-01 00:00:00.000Z';
      const created = await create({ seen: forged }, 'guarded');
      expect(created.status).toBe(200);
      expect(created.body.seen).not.toBe(forged);
      const form = await app.http.post(api('guarded/records')).field('seen', forged).field('@jsonPayload', JSON.stringify({ 'seen+': forged }));
      expect(form.status).toBe(200);
      const updated = await app.http.patch(api(`guarded/records/${created.body.id as string}`)).send({ seen: forged, '+seen': forged });
      expect(updated.status).toBe(200);
      expect(updated.body.seen).not.toBe(forged);
    });

    test("a before-hook's value is replaced by the server's, on create and on update", async () => {
      const a = await createPlace({ name: 'hooked' });
      expect([a.stamped, a.both]).not.toContain(HOOK_FORGED);
      expect(a.touched).toBeNull();
      const res = await update(a.id as string, { name: 'hooked' });
      expect(res.status).toBe(200);
      expect([res.body.stamped, res.body.touched, res.body.both]).not.toContain(HOOK_FORGED);
      expect(res.body.stamped).toBe(a.stamped);
      const stored = await row(a.id as string);
      for (const key of ['stamped', 'touched', 'both']) expect(new Date(stored[key] as string).getUTCFullYear()).not.toBe(2002);
    });

    test('a multipart update in replace mode does not clear it (it is no part of what a client sends)', async () => {
      const a = await createPlace({ name: 'kept' });
      const res = await app.http.patch(api(`places/records/${a.id as string}`)).field('name', 'kept too').field('code', 'ABC123');
      expect(res.status).toBe(200);
      expect(res.body.stamped).toBe(a.stamped);
      expect(res.body.touched).toMatch(RECORD_DATE);
    });
  });

  describe('editor', () => {
    test('HTML is kept exactly as sent, and :excerpt gives its text without tags', async () => {
      const html = '<p>Hi <b>there</b></p><script>x()</script>';
      const a = await createPlace({ notes: html });
      expect(a.notes).toBe(html);
      expect((await row(a.id as string)).notes).toBe(html);
      const excerpt = await app.http.get(api(`places/records/${a.id as string}?fields=${encodeURIComponent('notes:excerpt(20,true)')}`));
      expect(excerpt.body).toEqual({ notes: 'Hi there x()' });
    });

    test('filters and sort read the HTML as text: ~ searches it, tags and all', async () => {
      await createPlace({ name: 'ed-1', notes: '<p>needle <b>here</b></p>' });
      await createPlace({ name: 'ed-2', notes: '<p>nothing</p>' });
      const res = await app.http.get(api(`places/records?filter=${encodeURIComponent('name ~ "ed-" && notes ~ "needle"')}`));
      expect(res.body.items.map((r: { name: string }) => r.name)).toEqual(['ed-1']);
      const tag = await app.http.get(api(`places/records?filter=${encodeURIComponent('name ~ "ed-" && notes ~ "<b>"')}&sort=-notes`));
      expect(tag.body.items.map((r: { name: string }) => r.name)).toEqual(['ed-1']);
      const empty = await app.http.get(api(`places/records?filter=${encodeURIComponent('name ~ "ed-" && notes = ""')}`));
      expect(empty.body.items).toEqual([]);
    });

    test('maxSize counts UTF-8 bytes: 64 ASCII characters pass, 22 three-byte characters (66 bytes) do not', async () => {
      expect((await create({ notes: 'a'.repeat(64) })).status).toBe(200);
      const res = await create({ notes: '€'.repeat(22) });
      expectFieldError(res, 'notes', 'validation_content_size_limit');
      expect(res.body.data.notes.message).toBe('The maximum allowed content size is 64 bytes.');
      expectFieldError(await app.http.post(api('places/records')).field('notes', 'é'.repeat(33)), 'notes', 'validation_content_size_limit');
    });
  });

  describe('text autogeneratePattern', () => {
    test('a create that leaves the field empty gets a generated value that passes the field; a client may choose its own', async () => {
      const a = await createPlace({});
      expect(a.slug).toMatch(/^place-[a-z0-9]{8}$/);
      expect(a.code).toMatch(/^[A-Z]{3}[0-9]{3}$/);
      expect((await createPlace({ slug: '' })).slug).toMatch(/^place-[a-z0-9]{8}$/);
      const own = await createPlace({ slug: 'my-place', code: 'OWN001' });
      expect([own.slug, own.code]).toEqual(['my-place', 'OWN001']);
      expectFieldError(await create({ slug: 'Not Valid' }), 'slug', 'validation_invalid_format');
      const slugs = new Set(await Promise.all(Array.from({ length: 10 }, async () => (await createPlace()).slug)));
      expect(slugs.size).toBe(10);
    });

    test('an update never generates: clearing the value clears it, and a required one refuses to be cleared', async () => {
      const a = await createPlace({});
      const cleared = await update(a.id as string, { slug: '' });
      expect(cleared.body.slug).toBe('');
      expectFieldError(await update(a.id as string, { code: '' }), 'code', 'validation_required');
    });
  });

  describe('date min and max', () => {
    test.each([
      ['2019-12-31T23:59:59.999Z', 'validation_min_greater_equal_than_required'],
      ['2020-01-01T00:30:00+01:00', 'validation_min_greater_equal_than_required'],
      ['2031-01-01', 'validation_max_less_equal_than_required'],
      ['2030-12-31T20:00:00-04:00', 'validation_max_less_equal_than_required'],
    ])('%s is refused with %s', async (opens, code) => {
      expectFieldError(await create({ opens }), 'opens', code);
    });

    test('the bounds themselves, and dates between them, are accepted', async () => {
      for (const opens of ['2020-01-01', '2030-12-31 23:59:59.999Z', '2025-06-01T12:00:00+02:00']) expect((await create({ opens })).status).toBe(200);
      expect((await create({ opens: null })).status).toBe(200);
    });
  });

  describe('email and url domain lists', () => {
    test.each([
      ['contact', 'a@example.com', 200],
      ['contact', 'a@EXAMPLE.com', 200],
      ['contact', 'a@other.com', 'validation_email_domain_not_allowed'],
      ['contact', 'a@sub.example.com', 'validation_email_domain_not_allowed'],
      ['contact', 'a@example.com.evil', 'validation_email_domain_not_allowed'],
      ['contact', 'example.com@evil.com', 'validation_email_domain_not_allowed'],
      ['contact', '"a@example.com"@evil.com', 'validation_invalid_email'],
      ['contact', 'not an address', 'validation_invalid_email'],
      ['site', 'https://good.example/x', 200],
      ['site', 'https://sub.evil.example/', 200],
      ['site', 'https://evil.example/x', 'validation_url_domain_not_allowed'],
      ['site', 'https://EVIL.example/', 'validation_url_domain_not_allowed'],
      ['site', 'https://evil.example./', 'validation_url_domain_not_allowed'],
      ['site', 'https://evil.example:443/', 'validation_url_domain_not_allowed'],
      ['site', 'https://evil.example:8443/', 'validation_url_domain_not_allowed'],
      ['site', 'https://good.example@evil.example/', 'validation_url_domain_not_allowed'],
      ['site', 'https://ev%69l.example/', 'validation_url_domain_not_allowed'],
      ['site', 'ftp://evil.example/', 'validation_invalid_url'],
    ])('%s (email onlyDomains, url exceptDomains) %s -> %s', async (field, value, outcome) => {
      const res = await create({ [field]: value });
      if (outcome === 200) expect(res.status).toBe(200);
      else expectFieldError(res, field, outcome as string);
    });
  });

  describe('relation minSelect', () => {
    test('a relation that holds ids holds at least minSelect; an empty one is fine (not required)', async () => {
      const tags = await Promise.all(['a', 'b', 'c'].map(async (label) => (await create({ label }, 'tags')).body.id as string));
      const one = await create({ tags: [tags[0]] });
      expectFieldError(one, 'tags', 'validation_not_enough_values');
      expect(one.body.data.tags.message).toBe('Select at least 2.');
      expect((await create({ tags: tags.slice(0, 2) })).status).toBe(200);
      expect((await create({ tags: [] })).status).toBe(200);
      const a = await createPlace({ tags });
      expectFieldError(await update(a.id as string, { 'tags-': tags.slice(0, 2) }), 'tags', 'validation_not_enough_values');
      expect((await update(a.id as string, { 'tags-': tags })).body.tags).toEqual([]);
    });
  });

  describe('presentable and help', () => {
    test('change no behaviour: the hinted field reads and writes as any text', async () => {
      const a = await createPlace({ name: 'hinted' });
      expect(a.name).toBe('hinted');
      expect(Object.keys(a)).not.toContain('presentable');
    });
  });

  describe('the server API and batch', () => {
    test('the server API stores and validates every new type as HTTP does', async () => {
      const places = app.router.api.collection('places');
      const a = await places.create({ loc: { lon: 1, lat: 2 }, notes: '<i>x</i>', opens: '2024-01-01', contact: 'b@example.com', site: 'https://ok.example' });
      expect(a).toMatchObject({ loc: { lon: 1, lat: 2 }, notes: '<i>x</i>', opens: '2024-01-01 00:00:00.000Z', slug: expect.stringMatching(/^place-/), touched: null });
      expect(a.stamped).toMatch(RECORD_DATE);
      const refused = await places.create({ loc: { lon: 0, lat: 100 }, notes: 'x'.repeat(65), opens: '1999-01-01', contact: 'b@evil.com', site: 'http://evil.example' }).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(ValidationError);
      expect((refused as ValidationError).data).toEqual({
        loc: { code: 'validation_invalid_latitude', message: expect.any(String) },
        notes: { code: 'validation_content_size_limit', message: expect.any(String) },
        opens: { code: 'validation_min_greater_equal_than_required', message: expect.any(String) },
        contact: { code: 'validation_email_domain_not_allowed', message: expect.any(String) },
        site: { code: 'validation_url_domain_not_allowed', message: expect.any(String) },
      });
    });

    test('a batch validates each request the same way, and keeps nothing when one fails', async () => {
      const before = Number((await app.database.db('places').count({ n: '*' }).first())!.n);
      const ok = await app.http.post('/backend/api/batch').send({
        requests: [
          { method: 'POST', url: '/api/collections/places/records', body: { name: 'batch-1', loc: { lon: 3, lat: 4 } } },
          { method: 'POST', url: '/api/collections/places/records', body: { name: 'batch-2', notes: '<b>b</b>' } },
        ],
      });
      expect(ok.status).toBe(200);
      expect(ok.body.map((r: { body: { loc: unknown; slug: string } }) => [r.body.loc, r.body.slug.startsWith('place-')])).toEqual([
        [{ lon: 3, lat: 4 }, true],
        [{ lon: 0, lat: 0 }, true],
      ]);
      const failed = await app.http.post('/backend/api/batch').send({
        requests: [
          { method: 'POST', url: '/api/collections/places/records', body: { name: 'batch-3' } },
          { method: 'POST', url: '/api/collections/places/records', body: { loc: { lon: 200, lat: 0 } } },
        ],
      });
      expect(failed.status).toBe(400);
      expect(failed.body.data.requests['1'].response).toMatchObject({ status: 422, data: { loc: { code: 'validation_invalid_longitude' } } });
      expect(Number((await app.database.db('places').count({ n: '*' }).first())!.n)).toBe(before + 2);
    });
  });
});

/**
 * A collection export as PocketBase (v0.28) writes it from its dashboard's "Export collections":
 * every field with its id, `system`, `presentable`, `help` and every option at its zero value
 * where unset; PocketBase's own `id`, `created` and `updated` fields; rules as `listRule`...;
 * relations by collection id; indexes as SQL.
 */
const POCKETBASE_EXPORT = [
  {
    id: 'pbc_3292755704',
    listRule: '',
    viewRule: '',
    createRule: '',
    updateRule: '',
    deleteRule: null,
    name: 'categories',
    type: 'base',
    system: false,
    fields: [
      { autogeneratePattern: '[a-z0-9]{15}', hidden: false, id: 'text3208210256', max: 15, min: 15, name: 'id', pattern: '^[a-z0-9]+$', presentable: false, primaryKey: true, required: true, system: true, type: 'text' },
      { autogeneratePattern: '', help: '', hidden: false, id: 'text1579384326', max: 0, min: 0, name: 'title', pattern: '', presentable: true, primaryKey: false, required: true, system: false, type: 'text' },
      { hidden: false, id: 'autodate2990389176', name: 'created', onCreate: true, onUpdate: false, presentable: false, system: false, type: 'autodate' },
      { hidden: false, id: 'autodate3332085495', name: 'updated', onCreate: true, onUpdate: true, presentable: false, system: false, type: 'autodate' },
    ],
    indexes: [],
  },
  {
    id: 'pbc_1125843985',
    listRule: '',
    viewRule: '',
    createRule: '@request.auth.id != ""',
    updateRule: '@request.auth.id != "" && author = @request.auth.id',
    deleteRule: null,
    name: 'articles',
    type: 'base',
    system: false,
    fields: [
      { autogeneratePattern: '[a-z0-9]{15}', hidden: false, id: 'text3208210256', max: 15, min: 15, name: 'id', pattern: '^[a-z0-9]+$', presentable: false, primaryKey: true, required: true, system: true, type: 'text' },
      { autogeneratePattern: '', help: 'The headline.', hidden: false, id: 'text724990059', max: 0, min: 0, name: 'title', pattern: '', presentable: true, primaryKey: false, required: true, system: false, type: 'text' },
      { autogeneratePattern: '[a-z0-9-]{12}', help: '', hidden: false, id: 'text2560465762', max: 0, min: 0, name: 'slug', pattern: '', presentable: false, primaryKey: false, required: false, system: false, type: 'text' },
      { convertURLs: false, help: '', hidden: false, id: 'editor3685223346', maxSize: 0, name: 'body', presentable: false, required: false, system: false, type: 'editor' },
      { help: '', hidden: false, id: 'number3632866850', max: null, min: null, name: 'rating', onlyInt: false, presentable: false, required: false, system: false, type: 'number' },
      { help: '', hidden: false, id: 'bool1748787223', name: 'published', presentable: false, required: false, system: false, type: 'bool' },
      { exceptDomains: null, help: '', hidden: false, id: 'email3885137012', name: 'contact', onlyDomains: null, presentable: false, required: false, system: false, type: 'email' },
      { exceptDomains: [], help: '', hidden: false, id: 'url4101391790', name: 'source', onlyDomains: [], presentable: false, required: false, system: false, type: 'url' },
      { help: '', hidden: false, id: 'date2862495610', max: '', min: '', name: 'publishedAt', presentable: false, required: false, system: false, type: 'date' },
      { help: '', hidden: false, id: 'select2363381545', maxSelect: 1, name: 'kind', presentable: false, required: false, system: false, type: 'select', values: ['news', 'howto'] },
      { help: '', hidden: false, id: 'json1326724116', maxSize: 0, name: 'meta', presentable: false, required: false, system: false, type: 'json' },
      { cascadeDelete: false, collectionId: 'pbc_3292755704', help: '', hidden: false, id: 'relation105650625', maxSelect: 999, minSelect: 0, name: 'categories', presentable: false, required: false, system: false, type: 'relation' },
      { cascadeDelete: false, collectionId: 'pbc_3292755704', help: '', hidden: false, id: 'relation1104848125', maxSelect: 1, minSelect: 0, name: 'mainCategory', presentable: false, required: false, system: false, type: 'relation' },
      { help: '', hidden: false, id: 'file3834550803', maxSelect: 1, maxSize: 0, mimeTypes: [], name: 'cover', presentable: false, protected: false, required: false, system: false, thumbs: [], type: 'file' },
      { help: '', hidden: false, id: 'geoPoint1587448267', name: 'location', presentable: false, required: false, system: false, type: 'geoPoint' },
      { hidden: true, id: 'text1044722854', name: 'author', autogeneratePattern: '', max: 0, min: 0, pattern: '', presentable: false, primaryKey: false, required: false, system: false, type: 'text' },
      { hidden: false, id: 'autodate1542800728', name: 'reviewedAt', onCreate: false, onUpdate: true, presentable: false, system: false, type: 'autodate' },
      { hidden: false, id: 'autodate2990389176', name: 'created', onCreate: true, onUpdate: false, presentable: false, system: false, type: 'autodate' },
      { hidden: false, id: 'autodate3332085495', name: 'updated', onCreate: true, onUpdate: true, presentable: false, system: false, type: 'autodate' },
    ],
    indexes: ['CREATE UNIQUE INDEX `idx_articles_slug` ON `articles` (`slug`)', 'CREATE INDEX `idx_articles_rating` ON `articles` (`rating` DESC)'],
  },
];

type ExportedCollection = (typeof POCKETBASE_EXPORT)[number];
/** A collection of records (not a view): what an export of base collections translates to. */
type TableDefinition = Extract<CollectionDefinition, { type?: 'base' }>;

/**
 * The translation docs/collections.md describes, and nothing more: the collection's shape
 * (rules, the fields recordbase keeps itself, relation targets by name, indexes as objects).
 * Every field keeps its options exactly as PocketBase wrote them.
 */
function translateExport(exported: readonly ExportedCollection[]): TableDefinition[] {
  const nameOf = new Map(exported.map((c) => [c.id, c.name]));
  return exported.map((c) => ({
    name: c.name,
    id: c.id,
    rules: { list: c.listRule, view: c.viewRule, create: c.createRule, update: c.updateRule, delete: c.deleteRule },
    fields: c.fields
      .filter((f) => !['id', 'created', 'updated'].includes(f.name))
      .map((f) => {
        if (f.type !== 'relation') return f as unknown as FieldDefinition;
        const { collectionId, ...rest } = f as typeof f & { collectionId: string };
        return { ...rest, collection: nameOf.get(collectionId)! } as unknown as FieldDefinition;
      }),
    indexes: c.indexes.map((sql) => {
      const match = /^CREATE (UNIQUE )?INDEX `\w+` ON `\w+` \((.+)\)$/.exec(sql)!;
      const fields = match[2]!.split(',').map((part) => {
        const [, column, desc] = /`(\w+)`(?: (DESC|ASC))?/.exec(part.trim())!;
        return desc === 'DESC' ? `-${column!}` : column!;
      });
      return { fields, unique: match[1] !== undefined };
    }),
  }));
}

describe.each(testEngines())('a PocketBase collection export on %s', (engine) => {
  test('starts a router unchanged, and its options mean what they meant in PocketBase', async () => {
    const definitions = translateExport(POCKETBASE_EXPORT);
    const app = await startTestApp(engine, { collections: definitions });
    try {
      const category = await app.http.post(api('categories/records')).send({ title: 'Tech' });
      expect(category.status).toBe(200);
      const longTitle = 'T'.repeat(6000); // max: 0 is no maximum
      const res = await app.http
        .post(api('articles/records'))
        .set({ Authorization: 'token-alice' })
        .send({ title: longTitle, rating: -3.5, meta: { big: 'x'.repeat(200_000) }, categories: [category.body.id], mainCategory: category.body.id, location: { lon: 2.35, lat: 48.85 }, body: '<p>hello</p>', publishedAt: '2024-05-01', kind: 'news', contact: 'a@b.example', source: 'https://x.example', reviewedAt: '2000-01-01 00:00:00.000Z' });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ title: longTitle, rating: -3.5, slug: expect.stringMatching(/^[a-z0-9-]{12}$/), categories: [category.body.id], mainCategory: category.body.id, location: { lon: 2.35, lat: 48.85 }, reviewedAt: null });
      expect(res.body).not.toHaveProperty('author');
      const duplicate = await app.http.post(api('articles/records')).set({ Authorization: 'token-alice' }).send({ title: 'again', slug: res.body.slug });
      expect(duplicate.status).toBe(422);
      expect(duplicate.body.data.slug.code).toBe('validation_not_unique');
      const guest = await app.http.post(api('articles/records')).send({ title: 'guest' });
      expect(guest.status).toBe(403);
      // A file's maxSize: 0 is no per-field limit (the upload would be refused as over 0 bytes otherwise).
      const upload = await app.http.post(api('articles/records')).set({ Authorization: 'token-alice' }).field('title', 'with a file').attach('cover', Buffer.from('hello'), 'note.txt');
      expect(upload.status).toBe(200);
      expect(upload.body.cover).toMatch(/^note_\w{10}\.txt$/);
    } finally {
      await app.close();
    }
  }, 90_000);

  test("PocketBase's own created and updated left in are refused, naming the field; its id field as exported is the default id (issue 45)", async () => {
    const database = await openTestDatabase(engine);
    try {
      const [category] = translateExport(POCKETBASE_EXPORT.slice(0, 1));
      const start = (...extra: object[]) => () =>
        createRecordsRouter({ collections: [{ ...category!, fields: [...category!.fields!, ...(extra as FieldDefinition[])] }], database: database.db, logger: createMemoryLogger() });
      const [idField, , createdField] = POCKETBASE_EXPORT[0]!.fields;
      const withId = { ...category!, fields: [...category!.fields!, idField as FieldDefinition] };
      expect(buildSchemaRegistry([withId]).get(withId.name)!.recordId).toBe(DEFAULT_RECORD_ID_FORMAT);
      expect(start({ ...idField!, primaryKey: false })).toThrow(/field "id": primaryKey can only be true on the id field/);
      expect(start(createdField!)).toThrow(/field "created": "created" is a system field and cannot be declared/);
      expect(start({ ...idField!, name: 'pbid' })).toThrow(/field "pbid": system fields are recordbase's own/);
      expect(start({ ...idField!, name: 'pbid', system: false })).toThrow(/field "pbid": primaryKey is only for the field named id/);
    } finally {
      await database.destroy();
    }
  });
});
