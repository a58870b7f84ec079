import type PocketBase from 'pocketbase';
import type { CollectionDefinition } from '../../lib/index.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';
import { expectClientError, sdkClient } from './sdk-fixtures.js';

const RECORD_DATE = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}Z$/;
/** Starting a PGlite app takes seconds; under a loaded full run, more. */
const APP_START_TIMEOUT = 90_000;

/** PocketBase's field types (issue 31 item 2) as the SDK sends and reads them: JSON, and multipart with @jsonPayload. */
function collections(): CollectionDefinition[] {
  return [
    {
      name: 'spots',
      fields: [
        { name: 'name', type: 'text', presentable: true, help: 'A name.' },
        { name: 'ref', type: 'text', autogeneratePattern: 'ref-[0-9]{6}' },
        { name: 'loc', type: 'geoPoint' },
        { name: 'notes', type: 'editor', maxSize: 100 },
        { name: 'seen', type: 'autodate', onCreate: true, onUpdate: true },
        { name: 'opens', type: 'date', min: '2020-01-01' },
        { name: 'mail', type: 'email', exceptDomains: ['spam.example'] },
        { name: 'doc', type: 'file' },
      ],
      rules: OPEN_RULES,
    },
  ];
}

describe.each(testEngines())('the pocketbase SDK with PocketBase field types on %s', (engine) => {
  let app: TestApp;
  let pb: PocketBase;

  beforeAll(async () => {
    app = await startTestApp(engine, { collections: collections() });
    pb = sdkClient(app);
  }, APP_START_TIMEOUT);
  afterAll(async () => {
    await app?.close();
  });

  test('create and update as JSON: a point, HTML, a generated text, and an autodate the client cannot set', async () => {
    const forged = '2001-01-01 00:00:00.000Z';
    const created = await pb.collection('spots').create({ name: 'Sofia', loc: { lon: 23.32, lat: 42.69 }, notes: '<p>hi</p>', seen: forged, opens: '2024-05-01' });
    expect(created).toMatchObject({ name: 'Sofia', loc: { lon: 23.32, lat: 42.69 }, notes: '<p>hi</p>', ref: expect.stringMatching(/^ref-\d{6}$/), opens: '2024-05-01 00:00:00.000Z' });
    expect(created.seen).toMatch(RECORD_DATE);
    expect(created.seen).not.toBe(forged);
    const updated = await pb.collection('spots').update(created.id, { loc: { lon: 2.35, lat: 48.85 }, 'seen+': forged });
    expect(updated.loc).toEqual({ lon: 2.35, lat: 48.85 });
    expect(updated.ref).toBe(created.ref);
    expect(updated.seen).not.toBe(forged);
  });

  test('multipart: a File makes the SDK send the point through @jsonPayload; it arrives as sent', async () => {
    const created = await pb.collection('spots').create({ name: 'Paris', loc: { lon: 2.35, lat: 48.85 }, seen: '2001-01-01', doc: new Blob(['x'], { type: 'text/plain' }) });
    expect(created.loc).toEqual({ lon: 2.35, lat: 48.85 });
    expect(created.doc).toMatch(/^blob_\w{10}/);
    expect(created.seen).toMatch(RECORD_DATE);
    expect(created.seen.startsWith('2001')).toBe(false);
  });

  test('filters and sort on loc.lat through pb.filter, and :excerpt on the HTML', async () => {
    await pb.collection('spots').create({ name: 'Cape Town', loc: { lon: 18.42, lat: -33.92 }, notes: '<h1>Far</h1> <em>south</em>' });
    const south = await pb.collection('spots').getFullList({ filter: pb.filter('loc.lat < {:lat}', { lat: 0 }), fields: 'name,notes:excerpt(20)' });
    expect(south).toEqual([{ name: 'Cape Town', notes: 'Far south' }]);
    // Sofia moved to Paris in the first test: the same latitude, so the name decides.
    const byLatitude = await pb.collection('spots').getList(1, 10, { sort: '-loc.lat,name', filter: 'loc != null' });
    expect(byLatitude.items.map((r) => [r.name, r.loc.lat])).toEqual([
      ['Paris', 48.85],
      ['Sofia', 48.85],
      ['Cape Town', -33.92],
    ]);
  });

  test('validation failures arrive as ClientResponseError data, keyed by field, with PocketBase codes', async () => {
    const error = await expectClientError(pb.collection('spots').create({ loc: { lon: 0, lat: 95 }, notes: 'x'.repeat(101), opens: '2019-12-31', mail: 'a@spam.example' }), 422);
    expect(error.response.data).toEqual({
      loc: { code: 'validation_invalid_latitude', message: expect.any(String) },
      notes: { code: 'validation_content_size_limit', message: expect.any(String) },
      opens: { code: 'validation_min_greater_equal_than_required', message: expect.any(String) },
      mail: { code: 'validation_email_domain_not_allowed', message: expect.any(String) },
    });
  });
});
