import type { CollectionDefinition } from '../../lib/index.js';
import { makePng } from '../support/file-fixtures.js';
import { startTestApp, TEST_IDENTITIES, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/**
 * Issue 46: a file field whose view rule fails for the caller is absent from the record, and its
 * files do not open either: a download (and a thumbnail) by a name the caller learnt elsewhere is
 * the 404 of a file that is not there, public field or protected alike. Superusers and the
 * callers the rule lets read it download as before.
 */
const ALICE = TEST_IDENTITIES['token-alice']!.id;
const OWN = 'id = @request.auth.id';

function collections(): CollectionDefinition[] {
  return [
    {
      name: 'people',
      fields: [
        { name: 'nick', type: 'text' },
        { name: 'avatar', type: 'file', mimeTypes: ['image/png'], thumbs: ['10x10'], rules: { view: OWN } },
        { name: 'scan', type: 'file', protected: true, rules: { view: OWN } },
        { name: 'vault', type: 'file', rules: { view: null } },
        { name: 'open', type: 'file' },
      ],
      rules: { list: '', view: '' },
    },
  ];
}

describe.each(testEngines())('a file field view rule guards its downloads on %s', (engine) => {
  let app: TestApp;
  let names: Record<'avatar' | 'scan' | 'vault' | 'open', string>;
  let png: Buffer;
  const fileUrl = (name: string, query = '') => `/backend/api/files/people/${ALICE}/${name}${query}`;

  beforeAll(async () => {
    app = await startTestApp(engine, { collections: collections() });
    png = await makePng(4, 4);
    const res = await app.http
      .post('/backend/api/collections/people/records')
      .set('Authorization', 'token-root')
      .field('id', ALICE)
      .field('nick', 'alice')
      .attach('avatar', png, 'face.png')
      .attach('scan', Buffer.from('scan bytes'), 'scan.txt')
      .attach('vault', Buffer.from('vault bytes'), 'vault.txt')
      .attach('open', Buffer.from('open bytes'), 'open.txt');
    expect(res.status).toBe(200);
    names = { avatar: res.body.avatar, scan: res.body.scan, vault: res.body.vault, open: res.body.open };
  }, 120_000);

  afterAll(async () => {
    await app?.close();
  });

  async function download(name: string, token?: string, query = ''): Promise<{ status: number; body: Buffer; code?: string }> {
    let req = app.http.get(fileUrl(name, query)).buffer(true).parse((res, done) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => done(null, Buffer.concat(chunks)));
    });
    if (token) req = req.set('Authorization', token);
    const res = await req;
    const body = res.body as Buffer;
    const code = res.status === 200 ? undefined : (JSON.parse(body.toString()) as { data?: unknown; message: string }).message;
    return { status: res.status, body, code };
  }

  test('the field is absent from the record for another caller, present for its owner', async () => {
    const bob = await app.http.get(`/backend/api/collections/people/records/${ALICE}`).set('Authorization', 'token-bob');
    expect(bob.status).toBe(200);
    expect(Object.keys(bob.body)).not.toContain('avatar');
    expect(bob.body.open).toBe(names.open);
    const alice = await app.http.get(`/backend/api/collections/people/records/${ALICE}`).set('Authorization', 'token-alice');
    expect(alice.body.avatar).toBe(names.avatar);
  });

  test('a public file field with a view rule: 404 for whom the rule refuses, the bytes for whom it lets', async () => {
    expect(await download(names.avatar, 'token-bob')).toMatchObject({ status: 404, code: "The requested file wasn't found." });
    expect(await download(names.avatar)).toMatchObject({ status: 404 });
    expect(await download(names.avatar, 'token-bob', '?thumb=10x10')).toMatchObject({ status: 404 });
    expect((await download(names.avatar, 'token-alice')).body.equals(png)).toBe(true);
    expect((await download(names.avatar, 'token-root')).body.equals(png)).toBe(true);
    expect(await download(names.avatar, 'token-alice', '?thumb=10x10')).toMatchObject({ status: 200 });
  });

  test('a protected file field with a view rule needs both the collection view rule and the field rule', async () => {
    expect(await download(names.scan, 'token-bob')).toMatchObject({ status: 404 });
    expect(await download(names.scan)).toMatchObject({ status: 401 });
    expect((await download(names.scan, 'token-alice')).body.toString()).toBe('scan bytes');
    expect((await download(names.scan, 'token-root')).body.toString()).toBe('scan bytes');
  });

  test('a null view rule: superusers only; a field without rules downloads for anyone', async () => {
    expect(await download(names.vault, 'token-alice')).toMatchObject({ status: 404 });
    expect((await download(names.vault, 'token-root')).body.toString()).toBe('vault bytes');
    expect((await download(names.open)).body.toString()).toBe('open bytes');
  });
});
