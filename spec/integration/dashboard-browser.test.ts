import type { Browser, Locator, Page } from 'playwright-core';
import type { CollectionDefinition } from '../../lib/index.js';
import { browserAvailable, eventually, launchBrowser, luminance, openWatchedPage, type PageWatch } from '../support/browser.js';
import { makePng } from '../support/file-fixtures.js';
import { OPEN_RULES } from '../support/open-rules.js';
import { startSiblingRouter, startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

const APP_START_TIMEOUT = 90_000;
const ROOT = 'token-root';
const TEST_TOKENS = ['token-root', 'token-alice', 'token-bob'];
/** A record value that would run script if the UI ever rendered data as HTML. */
const XSS = '<img src=x onerror=alert(1)>';
/** More records than one page of the records table holds. */
const ITEM_COUNT = 30;
const PNG = makePng(8, 6);

/**
 * users (presentable name), posts (a field of every kind the editor offers), items (no
 * presentable field: labelled by id), tasks (a relation to items, whose picker finds an item by its text).
 */
function dashboardCollections(): CollectionDefinition[] {
  return [
    {
      name: 'users',
      fields: [
        { name: 'name', type: 'text', presentable: true },
        // Rules of its own (issue 46): a superuser passes them, so the dashboard shows and edits it.
        { name: 'email', type: 'email', rules: { view: 'id = @request.auth.id', update: null } },
      ],
      rules: OPEN_RULES,
    },
    {
      name: 'posts',
      fields: [
        { name: 'title', type: 'text', required: true, presentable: true, help: 'A short title' },
        { name: 'body', type: 'text' },
        { name: 'views', type: 'number' },
        { name: 'published', type: 'bool' },
        { name: 'category', type: 'select', values: ['news', 'howto'] },
        { name: 'tags', type: 'select', values: ['a', 'b', 'c'], maxSelect: 3 },
        { name: 'meta', type: 'json' },
        { name: 'publishedAt', type: 'date' },
        { name: 'author', type: 'relation', collection: 'users' },
        { name: 'place', type: 'geoPoint' },
        { name: 'cover', type: 'file' },
        { name: 'summary', type: 'editor' },
        { name: 'stamp', type: 'autodate', onCreate: true },
      ],
      rules: OPEN_RULES,
      // Its records view has a search box (issue 47); the other collections have none.
      indexes: [{ search: ['title', 'body'], language: 'english' }],
    },
    {
      name: 'items',
      fields: [
        { name: 'n', type: 'number' },
        { name: 'label', type: 'text' },
      ],
      rules: OPEN_RULES,
    },
    {
      name: 'tasks',
      fields: [
        { name: 'title', type: 'text', presentable: true },
        { name: 'item', type: 'relation', collection: 'items' },
      ],
      rules: OPEN_RULES,
    },
  ];
}

/** The browser globals the page functions below use (the project's TypeScript has no DOM library). */
declare const document: {
  activeElement: unknown;
  scrollingElement: { scrollWidth: number };
  body: unknown;
  documentElement: unknown;
  getElementById(id: string): { textContent: string | null } | null;
};
declare const localStorage: { getItem(key: string): string | null; setItem(key: string, value: string): void };
declare function getComputedStyle(element: unknown): { backgroundColor: string };

/** The seeded posts' titles with their views, so an order by views is known. */
const SEED_VIEWS: Record<string, number> = { alpha: 30, bravo: 10, charlie: 20, [XSS]: 40, filed: 50 };
const SEED_TITLES = Object.keys(SEED_VIEWS);

/** Whether Chromium is here (without it, and without CI, the browser tests are skipped with a warning). */
const WITH_BROWSER = browserAvailable();
/** One browser for the file; each test opens its own context or reuses the superuser's page. */
let browser: Browser;
beforeAll(async () => {
  if (WITH_BROWSER) browser = await launchBrowser();
}, 60_000);
afterAll(async () => {
  await browser?.close();
});

describe.each(testEngines())('the dashboard on %s', (engine) => {
  let app: TestApp;
  /** Every page opened, so the final test can check them all for CSP reports, dialogs and URLs. */
  const watches: PageWatch[] = [];
  /** The superuser's page, signed in once and reused by the records, editor and live tests. */
  let root: Page;
  const ids: Record<string, string> = {};

  const api = (path: string) => `/backend/api/collections/${path}`;
  const dashboardUrl = () => `${app.baseUrl}/backend/_/`;

  async function createRecord(collection: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
    const res = await app.http.post(api(`${collection}/records`)).set('Authorization', ROOT).send(body);
    expect(res.status).toBe(200);
    return res.body as Record<string, unknown>;
  }
  async function findPost(title: string): Promise<Record<string, unknown> | undefined> {
    const res = await app.http.get(api('posts/records')).query({ filter: `title = ${JSON.stringify(title)}` }).set('Authorization', ROOT);
    expect(res.status).toBe(200);
    return (res.body.items as Record<string, unknown>[])[0];
  }
  async function countPosts(filter?: string): Promise<number> {
    const res = await app.http.get(api('posts/records')).query({ perPage: 1, ...(filter ? { filter } : {}) }).set('Authorization', ROOT);
    return res.body.totalItems as number;
  }

  async function openPage(options: Parameters<typeof openWatchedPage>[1] = {}): Promise<PageWatch> {
    const watch = await openWatchedPage(browser, { timezoneId: 'UTC', ...options });
    watches.push(watch);
    return watch;
  }
  /** Signs in as the SDK would have: the token in localStorage.pocketbase_auth, then a reload. */
  async function signInThroughStorage(page: Page, token: string): Promise<void> {
    await page.goto(dashboardUrl());
    await page.evaluate((t) => localStorage.setItem('pocketbase_auth', JSON.stringify({ token: t, record: null })), token);
    await page.reload();
  }
  const collectionsNav = (page: Page) => page.getByRole('navigation', { name: 'Collections' });
  const recordsTable = (page: Page, collection: string) => page.getByRole('table', { name: `${collection} records` });
  const bodyRows = (page: Page, collection: string) =>
    recordsTable(page, collection).getByRole('row').filter({ hasNot: page.getByRole('columnheader') });
  const headerCell = (page: Page, field: string) =>
    page.getByRole('columnheader').filter({ has: page.getByRole('button', { name: field, exact: true }) });
  const filterBox = (page: Page) => page.getByRole('searchbox', { name: 'Filter' });
  /** The dialog that is open on top (a confirmation opens over the editor). */
  const topDialog = (page: Page) => page.getByRole('dialog').or(page.getByRole('alertdialog')).last();

  async function openCollection(page: Page, collection: string): Promise<void> {
    await collectionsNav(page).getByRole('link', { name: new RegExp(`^${collection}\\b`) }).click();
    await recordsTable(page, collection).waitFor();
  }
  async function applyFilter(page: Page, filter: string): Promise<void> {
    await filterBox(page).fill(filter);
    await filterBox(page).press('Enter');
  }
  /** The seeded or created post titles, in the table's row order (a row is known by the title it shows). */
  async function titlesShown(page: Page, known: string[] = SEED_TITLES): Promise<string[]> {
    const texts = await bodyRows(page, 'posts').allInnerTexts();
    return texts.map((text) => known.find((title) => text.includes(title)) ?? `? ${text.slice(0, 40)}`);
  }
  async function rowFor(page: Page, title: string): Promise<Locator> {
    const row = bodyRows(page, 'posts').filter({ hasText: title });
    await row.first().waitFor();
    return row.first();
  }
  /** The text of the elements that describe a control (aria-describedby). */
  function description(control: Locator): Promise<string> {
    return control.evaluate((el) =>
      ((el as { getAttribute(name: string): string | null }).getAttribute('aria-describedby') ?? '')
        .split(/\s+/)
        .filter(Boolean)
        .map((id: string) => document.getElementById(id)?.textContent ?? '')
        .join(' '),
    );
  }
  /**
   * Clicks the editor's Save and returns the update request it sent. Chromium does not hand a
   * body holding files to the driver, so a multipart body reads as "" (its content type shows it).
   */
  async function saveUpdate(dialog: Locator): Promise<{ contentType: string; body: string }> {
    const [request] = await Promise.all([
      root.waitForRequest((r) => r.method() === 'PATCH' && r.url().includes('/api/collections/posts/records/')),
      dialog.getByRole('button', { name: 'Save' }).click(),
    ]);
    return { contentType: (await request.allHeaders())['content-type'] ?? '', body: request.postDataBuffer()?.toString('latin1') ?? '' };
  }
  /** Whether the element has the page's focus. */
  const hasFocus = (locator: Locator) => locator.evaluate((el) => el === document.activeElement);
  /** A field's control in the editor, found by its accessible name (the field name). */
  const control = (dialog: Locator, name: string) => dialog.getByLabel(name, { exact: true });

  /** Picks values of a multi-select field: a `<select multiple>` or checkboxes named by value in a group named by the field. */
  async function pickMany(dialog: Locator, field: string, values: string[]): Promise<void> {
    const labelled = control(dialog, field);
    if ((await labelled.count()) === 1 && (await labelled.evaluate((el) => el.tagName)) === 'SELECT') {
      await labelled.selectOption(values);
      return;
    }
    const group = dialog.getByRole('group', { name: field, exact: true });
    for (const value of values) await group.getByRole('checkbox', { name: value, exact: true }).check();
  }

  beforeAll(async () => {
    app = await startTestApp(engine, { collections: dashboardCollections(), dashboard: true });
    ids.ann = (await createRecord('users', { name: 'Ann', email: 'ann@example.com' })).id as string;
    ids.ben = (await createRecord('users', { name: 'Ben', email: 'ben@example.com' })).id as string;
    for (const title of ['alpha', 'bravo', 'charlie', XSS]) {
      ids[title] = (await createRecord('posts', { title, views: SEED_VIEWS[title], body: `${title} body` })).id as string;
    }
    const filed = await app.http
      .post(api('posts/records'))
      .set('Authorization', ROOT)
      .field('title', 'filed')
      .field('views', String(SEED_VIEWS.filed))
      .field('body', 'kept body')
      .field('published', 'true')
      .field('category', 'news')
      .field('tags', 'a')
      .field('tags', 'b')
      .field('author', ids.ann!)
      .field('publishedAt', '2024-01-02 03:04:05.000Z')
      .field('@jsonPayload', JSON.stringify({ meta: { keep: [1, 2] }, place: { lon: 1.5, lat: 2.5 } }))
      .field('summary', '<b>bold</b><img src=x onerror=alert(2)>')
      .attach('cover', PNG, 'first.png');
    expect(filed.status).toBe(200);
    ids.filed = filed.body.id as string;
    const items = await Promise.all(Array.from({ length: ITEM_COUNT }, (_, i) => createRecord('items', { n: i + 1, label: `item-${i + 1}` })));
    ids.item7 = items[6]!.id as string;
    if (WITH_BROWSER) root = (await openPage()).page;
  }, APP_START_TIMEOUT);
  afterAll(async () => {
    for (const watch of watches) await watch.close().catch(() => undefined);
    await app?.close();
  });

  test("is off by default: {mount}/_/ is the router's JSON 404", async () => {
    const plain = await startSiblingRouter(app, { collections: dashboardCollections() });
    try {
      for (const path of ['/backend/_/', '/backend/_']) {
        const res = await plain.http.get(path);
        expect(res.status).toBe(404);
        expect(res.headers['content-type']).toMatch(/^application\/json/);
        expect(res.body).toMatchObject({ status: 404, data: {} });
      }
    } finally {
      await plain.close();
    }
  });

  (WITH_BROWSER ? describe : describe.skip)('in a browser', () => {
    describe('sign-in', () => {
      test('without a token: the page (strict CSP) shows the Token field and Sign in', async () => {
        const { page } = await openPage();
        const response = await page.goto(dashboardUrl());
        const csp = response!.headers()['content-security-policy'] ?? '';
        expect(csp).toContain("script-src 'self'");
        expect(csp).toContain("default-src 'none'");
        await page.getByLabel('Token', { exact: true }).waitFor();
        await page.getByRole('button', { name: 'Sign in' }).waitFor();
        expect(await collectionsNav(page).getByRole('link').count()).toBe(0);
      });

      test('a non-superuser token shows "not a superuser" and no data', async () => {
        const { page } = await openPage();
        await page.goto(dashboardUrl());
        await page.getByLabel('Token', { exact: true }).fill('token-alice');
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page.getByRole('alert').filter({ hasText: 'not a superuser' }).waitFor();
        expect(await page.getByRole('table').count()).toBe(0);
        expect(await page.getByText('alpha').count()).toBe(0);
      });

      test('a superuser token entered in the form shows the collections; Sign out forgets it', async () => {
        const { page } = await openPage();
        await page.goto(dashboardUrl());
        await page.getByLabel('Token', { exact: true }).fill(ROOT);
        await page.getByRole('button', { name: 'Sign in' }).click();
        await collectionsNav(page).getByRole('link', { name: /^posts\b/ }).waitFor();
        await page.getByRole('button', { name: 'Sign out' }).click();
        await page.getByLabel('Token', { exact: true }).waitFor();
        expect(await page.evaluate(() => localStorage.getItem('pocketbase_auth'))).toBeNull();
        await page.reload();
        await page.getByLabel('Token', { exact: true }).waitFor();
      });

      test('signing in with the keyboard puts the focus on the first collection; signing out, on the Token field', async () => {
        const { page } = await openPage();
        await page.goto(dashboardUrl());
        const token = page.getByLabel('Token', { exact: true });
        await token.fill(ROOT);
        await token.press('Enter');
        const first = collectionsNav(page).getByRole('link').first();
        await first.waitFor();
        await eventually(async () => expect(await hasFocus(first)).toBe(true));
        expect(await first.innerText()).toMatch(/^users\b/);
        await page.getByRole('button', { name: 'Sign out' }).press('Enter');
        await eventually(async () => expect(await hasFocus(token)).toBe(true));
      });

      test("the SDK's stored token signs in without the form; the sidebar links carry the record counts", async () => {
        await signInThroughStorage(root, ROOT);
        const nav = collectionsNav(root);
        await nav.getByRole('link', { name: 'posts 5', exact: true }).waitFor();
        await nav.getByRole('link', { name: `items ${ITEM_COUNT}`, exact: true }).waitFor();
        await nav.getByRole('link', { name: 'users 2', exact: true }).waitFor();
        expect(await root.getByLabel('Token', { exact: true }).count()).toBe(0);
        await root.getByRole('banner').filter({ hasText: 'recordbase' }).waitFor();
        await root.getByRole('main').waitFor();
      });
    });

    describe('records', () => {
      beforeEach(async () => {
        await openCollection(root, 'posts');
      });

      test('the table shows a row per record, labelled by the presentable field, with header buttons', async () => {
        await eventually(async () => expect((await titlesShown(root)).sort()).toEqual([...SEED_TITLES].sort()));
        for (const field of ['title', 'views']) await headerCell(root, field).waitFor();
      });

      test('clicking a header sorts by it and sets aria-sort', async () => {
        const byViews = [...SEED_TITLES].sort((a, b) => SEED_VIEWS[a]! - SEED_VIEWS[b]!);
        await headerCell(root, 'views').getByRole('button').click();
        await eventually(async () => {
          expect(await headerCell(root, 'views').getAttribute('aria-sort')).toBe('ascending');
          expect(await titlesShown(root)).toEqual(byViews);
        });
        expect(await headerCell(root, 'title').getAttribute('aria-sort')).toBe('none');
        await headerCell(root, 'views').getByRole('button').click();
        await eventually(async () => {
          expect(await headerCell(root, 'views').getAttribute('aria-sort')).toBe('descending');
          expect(await titlesShown(root)).toEqual([...byViews].reverse());
        });
      });

      test('a filter narrows the rows; a bad one shows the server\'s message in an alert', async () => {
        await applyFilter(root, "title ~ 'b'");
        await eventually(async () => expect(await titlesShown(root)).toEqual(['bravo']));
        const bad = await app.http.get(api('posts/records')).query({ filter: 'title ~' }).set('Authorization', ROOT);
        expect(bad.status).toBe(400);
        await applyFilter(root, 'title ~');
        await root.getByRole('alert').filter({ hasText: bad.body.message as string }).waitFor();
        await applyFilter(root, '');
        await eventually(async () => expect(await titlesShown(root)).toHaveLength(SEED_TITLES.length));
      });

      test('a count of one says "1 record": in the pager and in the question of Delete matching', async () => {
        await applyFilter(root, "title = 'alpha'");
        const pager = root.getByText(/^Page \d+ of \d+ · /);
        await eventually(async () => expect(await pager.innerText()).toBe('Page 1 of 1 · 1 record'));
        await root.getByRole('button', { name: 'Delete matching' }).click();
        const confirm = root.getByRole('dialog', { name: 'Delete 1 record?' });
        await confirm.getByRole('button', { name: 'Cancel' }).click();
        await confirm.waitFor({ state: 'hidden' });
        await applyFilter(root, '');
        await eventually(async () => expect(await pager.innerText()).toBe(`Page 1 of 1 · ${SEED_TITLES.length} records`));
      });

      test('Columns toggles a column', async () => {
        await root.getByRole('button', { name: 'Columns' }).click();
        const box = root.getByRole('checkbox', { name: 'body', exact: true });
        const shown = await box.isChecked();
        expect(await headerCell(root, 'body').count()).toBe(shown ? 1 : 0);
        await box.setChecked(!shown);
        await eventually(async () => expect(await headerCell(root, 'body').count()).toBe(shown ? 0 : 1));
        await box.setChecked(shown);
        await eventually(async () => expect(await headerCell(root, 'body').count()).toBe(shown ? 1 : 0));
        await root.getByRole('button', { name: 'Columns' }).click();
      });

      test('Next page and Previous page move through a collection larger than a page; rows without a presentable field show the id', async () => {
        await openCollection(root, 'items');
        const rows = bodyRows(root, 'items');
        await rows.first().waitFor();
        const firstPage = await rows.allInnerTexts();
        expect(firstPage.length).toBeLessThan(ITEM_COUNT);
        const all = await app.http.get(api('items/records')).query({ perPage: 500, fields: 'id' }).set('Authorization', ROOT);
        const itemIds = (all.body.items as { id: string }[]).map((item) => item.id);
        for (const text of firstPage) expect(itemIds.some((id) => text.includes(id))).toBe(true);
        await root.getByRole('button', { name: 'Next page' }).click();
        const secondPage = await eventually(async () => {
          const texts = await rows.allInnerTexts();
          expect(texts.length).toBeGreaterThan(0);
          expect(texts.filter((text) => firstPage.includes(text))).toEqual([]);
          return texts;
        });
        expect(secondPage.length).toBeGreaterThan(0);
        await root.getByRole('button', { name: 'Previous page' }).click();
        await eventually(async () => expect(await rows.allInnerTexts()).toEqual(firstPage));
      });

      test('a record value that is HTML is shown as text: no element, no script', async () => {
        const row = await rowFor(root, XSS);
        expect(await row.innerText()).toContain(XSS);
        expect(await root.locator('img[src="x"]').count()).toBe(0);
      });

      test("each field type's cell: flags as yes/no, points as lon, lat, lists joined, relations by label, images as thumbnails", async () => {
        const stored = (await findPost('filed'))!;
        const columns = (await recordsTable(root, 'posts').getByRole('columnheader').allInnerTexts()).map((text) => text.trim());
        const cellsOf = async (title: string) => {
          const texts = await (await rowFor(root, title)).getByRole('cell').allInnerTexts();
          return Object.fromEntries(columns.map((column, i) => [column, texts[i]]));
        };
        await eventually(async () =>
          expect(await cellsOf('filed')).toEqual({
            title: 'filed',
            body: 'kept body',
            views: '50',
            published: 'yes',
            category: 'news',
            tags: 'a, b',
            meta: '{"keep":[1,2]}',
            publishedAt: '2024-01-02 03:04:05.000Z',
            author: 'Ann',
            place: '1.5, 2.5',
            cover: '',
            summary: '<b>bold</b><img src=x onerror=alert(2)>',
            stamp: stored.stamp,
          }),
        );
        const thumb = (await rowFor(root, 'filed')).getByRole('img', { name: stored.cover as string, exact: true });
        const src = new URL((await thumb.getAttribute('src'))!, dashboardUrl());
        expect(`${src.pathname}${src.search}`).toBe(`/backend/api/files/${stored.collectionId as string}/${ids.filed}/${stored.cover as string}?thumb=100x100`);
        expect(await cellsOf('alpha')).toMatchObject({ published: 'no', category: '', tags: '', meta: '', author: '', place: '0, 0', cover: '' });
      });
    });

    describe('editor', () => {
      beforeEach(async () => {
        await openCollection(root, 'posts');
        await applyFilter(root, '');
      });

      test('New record: fields of every kind are saved, the row appears, and the API holds the values', async () => {
        await root.getByRole('button', { name: 'New record' }).click();
        const dialog = root.getByRole('dialog', { name: 'New posts record' });
        await dialog.waitFor();
        expect(await description(control(dialog, 'title'))).toContain('A short title');
        await control(dialog, 'title').fill('delta');
        await control(dialog, 'body').fill('delta body');
        await control(dialog, 'views').fill('7');
        await control(dialog, 'published').check();
        await control(dialog, 'category').selectOption('howto');
        await pickMany(dialog, 'tags', ['a', 'c']);
        await control(dialog, 'meta').fill('{"k": [1, 2]}');
        const date = control(dialog, 'publishedAt');
        const dateType = await date.evaluate((el) => (el as { type: string }).type);
        await date.fill(dateType === 'datetime-local' ? '2024-05-06T07:08' : '2024-05-06 07:08:00.000Z');
        const author = dialog.getByRole('combobox', { name: 'author' }).or(dialog.getByRole('searchbox', { name: 'author' }));
        await author.fill('Be');
        await root.getByRole('option', { name: /Ben/ }).or(dialog.getByRole('button', { name: /Ben/ })).first().click();
        await dialog.getByRole('button', { name: /Remove/ }).first().waitFor();
        await control(dialog, 'place longitude').fill('13.4');
        await control(dialog, 'place latitude').fill('52.5');
        await control(dialog, 'cover').setInputFiles({ name: 'pic.png', mimeType: 'image/png', buffer: PNG });
        await dialog.getByRole('button', { name: 'Save' }).click();
        await dialog.waitFor({ state: 'hidden' });
        await rowFor(root, 'delta');
        const stored = await findPost('delta');
        expect(stored).toMatchObject({
          body: 'delta body',
          views: 7,
          published: true,
          category: 'howto',
          tags: ['a', 'c'],
          meta: { k: [1, 2] },
          publishedAt: '2024-05-06 07:08:00.000Z',
          author: ids.ben,
          place: { lon: 13.4, lat: 52.5 },
        });
        expect(stored!.cover).toMatch(/^pic_[a-z0-9]{10}\.png$/);
      });

      test('a chosen file shows by its name and an image preview; the input\'s own "No file chosen" is out of sight', async () => {
        await root.getByRole('button', { name: 'New record' }).click();
        const dialog = root.getByRole('dialog', { name: 'New posts record' });
        const input = control(dialog, 'cover');
        await dialog.getByText('Choose a file', { exact: true }).waitFor();
        await input.setInputFiles({ name: 'pic.png', mimeType: 'image/png', buffer: PNG });
        const files = dialog.getByRole('list', { name: 'cover: files' });
        await files.getByText('pic.png (new)', { exact: true }).waitFor();
        const preview = files.locator('img');
        await eventually(async () =>
          expect(
            await preview.evaluate((el) => {
              const img = el as unknown as { src: string; naturalWidth: number; naturalHeight: number };
              return { scheme: img.src.split(':')[0], width: img.naturalWidth, height: img.naturalHeight };
            }),
          ).toEqual({ scheme: 'blob', width: 8, height: 6 }),
        );
        // The browser writes its text inside the input's own box, which takes no room.
        const box = (await input.boundingBox())!;
        expect(box.width * box.height).toBeLessThanOrEqual(1);
        await dialog.getByText('Replace the file', { exact: true }).waitFor();
        await dialog.getByRole('button', { name: 'Remove pic.png' }).click();
        await files.locator('img').waitFor({ state: 'detached' });
        await dialog.getByText('Choose a file', { exact: true }).waitFor();
        await dialog.getByRole('button', { name: 'Cancel' }).click();
        await dialog.waitFor({ state: 'hidden' });
      });

      test('the relation picker finds a record of a collection without a presentable field by its text, and keeps the focus in its search box after a pick', async () => {
        await openCollection(root, 'tasks');
        await root.getByRole('button', { name: 'New record' }).click();
        const dialog = root.getByRole('dialog', { name: 'New tasks record' });
        await control(dialog, 'title').fill('check item seven');
        const search = dialog.getByRole('searchbox', { name: 'item', exact: true });
        await search.fill('ITEM-7');
        const results = dialog.getByRole('list', { name: 'item: results' }).getByRole('button');
        await eventually(async () => expect(await results.allInnerTexts()).toEqual([`${ids.item7} (label: item-7)`]));
        await results.first().focus();
        await root.keyboard.press('Enter');
        await eventually(async () => expect(await hasFocus(search)).toBe(true));
        expect(await dialog.getByRole('list', { name: 'item: picked' }).getByRole('listitem').allInnerTexts()).toEqual([expect.stringContaining(`${ids.item7} (label: item-7)`)]);
        await dialog.getByRole('button', { name: 'Save' }).click();
        await dialog.waitFor({ state: 'hidden' });
        const stored = await app.http.get(api('tasks/records')).query({ filter: "title = 'check item seven'" }).set('Authorization', ROOT);
        expect((stored.body.items as Record<string, unknown>[]).map((task) => task.item)).toEqual([ids.item7]);
      });

      test('a 422 shows the server\'s message at the field, which gets aria-invalid', async () => {
        const refused = await app.http.post(api('posts/records')).set('Authorization', ROOT).send({});
        expect(refused.status).toBe(422);
        const message = refused.body.data.title.message as string;
        await root.getByRole('button', { name: 'New record' }).click();
        const dialog = root.getByRole('dialog', { name: 'New posts record' });
        await control(dialog, 'body').fill('no title');
        await dialog.getByRole('button', { name: 'Save' }).click();
        const title = control(dialog, 'title');
        await eventually(async () => {
          expect(await title.getAttribute('aria-invalid')).toBe('true');
          expect(await description(title)).toContain(message);
        });
        await dialog.getByRole('button', { name: 'Cancel' }).click();
        await dialog.waitFor({ state: 'hidden' });
        expect(await findPost('')).toBeUndefined();
      });

      test('editing only the title of a record with a file keeps the file and every other field', async () => {
        const before = await findPost('filed');
        await (await rowFor(root, 'filed')).click();
        const dialog = root.getByRole('dialog', { name: 'Edit posts record' });
        await dialog.waitFor();
        expect(await control(dialog, 'title').inputValue()).toBe('filed');
        await dialog.getByText('Ann').first().waitFor();
        const stamp = await control(dialog, 'stamp').evaluate((el) => {
          const input = el as unknown as { readOnly: boolean; tagName: string };
          return { tagName: input.tagName, readOnly: input.readOnly };
        });
        expect(stamp).toEqual({ tagName: 'INPUT', readOnly: true });
        expect(await root.locator('img[src="x"]').count()).toBe(0);
        await control(dialog, 'title').fill('filed2');
        const sent = await saveUpdate(dialog);
        expect(sent.contentType).toMatch(/^application\/json/);
        expect(JSON.parse(sent.body)).toEqual({ title: 'filed2' });
        await dialog.waitFor({ state: 'hidden' });
        await rowFor(root, 'filed2');
        const after = await findPost('filed2');
        expect(after).toEqual({ ...before, title: 'filed2', updated: after!.updated });
      });

      test('editing the title and replacing the file (multipart) clears nothing else', async () => {
        const before = await findPost('filed2');
        await (await rowFor(root, 'filed2')).click();
        const dialog = root.getByRole('dialog', { name: 'Edit posts record' });
        await dialog.waitFor();
        await control(dialog, 'title').fill('filed3');
        await control(dialog, 'cover').setInputFiles({ name: 'second.png', mimeType: 'image/png', buffer: PNG });
        const sent = await saveUpdate(dialog);
        expect(sent.contentType).toMatch(/^multipart\/form-data/);
        await dialog.waitFor({ state: 'hidden' });
        const after = await eventually(async () => {
          const post = await findPost('filed3');
          expect(post).toBeDefined();
          return post!;
        });
        expect(after.cover).toMatch(/^second_[a-z0-9]{10}\.png$/);
        expect(after).toEqual({ ...before, title: 'filed3', cover: after.cover, updated: after.updated });
      });

      test('Delete in the editor asks for confirmation, then deletes', async () => {
        await (await rowFor(root, 'charlie')).click();
        const dialog = root.getByRole('dialog', { name: 'Edit posts record' });
        await dialog.getByRole('button', { name: 'Delete', exact: true }).click();
        // The confirmation by its name: until it has rendered, the last dialog is the editor, whose own Delete it then covers.
        await root.getByRole('dialog', { name: 'Delete this record?' }).getByRole('button', { name: 'Delete', exact: true }).click();
        await bodyRows(root, 'posts').filter({ hasText: 'charlie' }).waitFor({ state: 'detached' });
        const res = await app.http.get(api(`posts/records/${ids.charlie}`)).set('Authorization', ROOT);
        expect(res.status).toBe(404);
      });

      test('Delete matching asks "Delete N records?" and deletes only what the filter matches', async () => {
        for (const n of [1, 2, 3]) await createRecord('posts', { title: `bulk-${n}` });
        const total = await countPosts();
        await applyFilter(root, "title ~ 'bulk'");
        await eventually(async () => expect(await bodyRows(root, 'posts').count()).toBe(3));
        await root.getByRole('button', { name: 'Delete matching' }).click();
        const confirm = topDialog(root);
        await confirm.filter({ hasText: 'Delete 3 records?' }).waitFor();
        await confirm.getByRole('button', { name: 'Cancel' }).click();
        expect(await countPosts("title ~ 'bulk'")).toBe(3);
        await root.getByRole('button', { name: 'Delete matching' }).click();
        await root.getByRole('dialog', { name: 'Delete 3 records?' }).getByRole('button', { name: 'Delete', exact: true }).click();
        await eventually(async () => expect(await countPosts("title ~ 'bulk'")).toBe(0));
        expect(await countPosts()).toBe(total - 3);
        await applyFilter(root, '');
      });
    });

    test('a collection with a search index has a search box that finds a record by a word of its body through ?search= (most relevant first); others have none', async () => {
      await createRecord('posts', { title: 'searched-one', body: 'The runners kept running along the river' });
      await createRecord('posts', { title: 'searched-two', body: 'A run, and a river, and a run again' });
      await openCollection(root, 'items');
      expect(await root.getByRole('searchbox', { name: 'Search' }).count()).toBe(0);
      await openCollection(root, 'posts');
      const box = root.getByRole('searchbox', { name: 'Search' });
      expect(await box.getAttribute('placeholder')).toMatch(/^Search title, body: /);
      // English stemming: "runs" finds "running" and "run", which the filter's ~ (a substring) would not.
      const listed = root.waitForRequest((request) => new URL(request.url()).pathname.endsWith('/api/collections/posts/records') && new URL(request.url()).searchParams.get('search') === 'runs');
      await box.fill('runs');
      await box.press('Enter');
      const request = await listed;
      expect(new URL(request.url()).searchParams.get('sort')).toBe('-@rank');
      const known = ['searched-one', 'searched-two'];
      await eventually(async () => expect(await titlesShown(root, known)).toEqual(['searched-two', 'searched-one']));
      expect(await root.getByRole('button', { name: 'Delete matching' }).isDisabled()).toBe(true);
      await box.fill('river -runners');
      await box.press('Enter');
      await eventually(async () => expect(await titlesShown(root, known)).toEqual(['searched-two']));
      await box.fill('');
      await box.press('Enter');
      const total = await countPosts();
      await eventually(async () => expect(await root.getByText(/^Page \d+ of \d+ · /).innerText()).toMatch(new RegExp(` · ${total} records$`)));
      expect(await root.getByRole('button', { name: 'Delete matching' }).isDisabled()).toBe(false);
    });

    test('a field with rules of its own is shown and edited as any other, and the schema lists its rules', async () => {
      await openCollection(root, 'users');
      const ann = recordsTable(root, 'users').getByRole('row').filter({ hasText: 'Ann' }).first();
      await ann.waitFor();
      expect(await ann.innerText()).toContain('ann@example.com');
      await ann.click();
      const dialog = root.getByRole('dialog', { name: 'Edit users record' });
      await dialog.waitFor();
      expect(await control(dialog, 'email').inputValue()).toBe('ann@example.com');
      await control(dialog, 'email').fill('ann.new@example.com');
      await dialog.getByRole('button', { name: 'Save' }).click();
      await dialog.waitFor({ state: 'hidden' });
      const stored = await app.http.get(api(`users/records/${ids.ann}`)).set('Authorization', ROOT);
      expect(stored.body.email).toBe('ann.new@example.com');
      await root.getByRole('button', { name: 'Schema' }).click();
      const fields = root.getByRole('table', { name: 'users fields' });
      await fields.waitFor();
      const email = fields.getByRole('row').filter({ has: root.getByRole('cell', { name: 'email', exact: true }) }).first();
      expect(await email.innerText()).toContain('view: id = @request.auth.id; update: superusers only');
      await root.getByRole('button', { name: 'Records' }).click();
      await recordsTable(root, 'users').waitFor();
    });

    test('the schema lists every index the table has: (created, id), each single relation, a GIN index per multi-valued field', async () => {
      await openCollection(root, 'posts');
      await root.getByRole('button', { name: 'Schema' }).click();
      const list = root.getByRole('list', { name: 'posts indexes' });
      await list.waitFor();
      const shown = await list.getByRole('listitem').allInnerTexts();
      expect(shown).toEqual([
        'idx_posts_created: (created, id), automatic',
        'idx_posts_tags_gin: gin (tags), automatic',
        'idx_posts_author: (author), automatic',
        expect.stringMatching(/^_rb_search_posts_[0-9a-f]{8}: search \(title, body\), english$/),
      ]);
      const rows: { indexname: string }[] = await app.database.db.select('indexname').from('pg_indexes').whereRaw('schemaname = current_schema()').where({ tablename: 'posts' });
      const made = rows.map((r) => r.indexname).filter((name) => !name.endsWith('_pkey'));
      expect(shown.map((text) => text.split(':')[0]).sort()).toEqual(made.sort());
      await root.getByRole('button', { name: 'Records' }).click();
      await recordsTable(root, 'posts').waitFor();
    });

    test('live: a record created by another client appears without reload', async () => {
      await openCollection(root, 'posts');
      await applyFilter(root, '');
      await rowFor(root, 'alpha');
      await createRecord('posts', { title: 'live-one', views: 1 });
      await rowFor(root, 'live-one');
    });

    test('keyboard: Tab reaches the filter, New record and the rows; Enter opens a row; Escape closes', async () => {
      await root.reload();
      await recordsTable(root, 'posts').or(collectionsNav(root)).first().waitFor();
      await openCollection(root, 'posts');
      await root.getByRole('banner').click({ position: { x: 2, y: 2 } });
      const reached = { filter: false, newRecord: false, row: false };
      const isFocused = (locator: Locator) => locator.evaluateAll((els) => els.includes(document.activeElement!));
      for (let i = 0; i < 80 && !reached.row; i++) {
        await root.keyboard.press('Tab');
        if (await isFocused(filterBox(root))) reached.filter = true;
        if (await isFocused(root.getByRole('button', { name: 'New record' }))) reached.newRecord = true;
        if (await isFocused(bodyRows(root, 'posts'))) reached.row = true;
      }
      expect(reached).toEqual({ filter: true, newRecord: true, row: true });
      await root.keyboard.press('Enter');
      const dialog = root.getByRole('dialog', { name: 'Edit posts record' });
      await dialog.waitFor();
      await root.keyboard.press('Escape');
      await dialog.waitFor({ state: 'hidden' });
    });

    test('at 390 px wide the page does not scroll sideways', async () => {
      const { page } = await openPage({ viewport: { width: 390, height: 800 } });
      await page.goto(dashboardUrl());
      await page.getByLabel('Token', { exact: true }).waitFor();
      const width = () => page.evaluate(() => document.scrollingElement!.scrollWidth);
      expect(await width()).toBeLessThanOrEqual(390);
      await signInThroughStorage(page, ROOT);
      await openCollection(page, 'posts');
      await bodyRows(page, 'posts').first().waitFor();
      expect(await width()).toBeLessThanOrEqual(390);
      // No toolbar button wraps alone onto a row of its own, and each is inside the page.
      const boxes = await Promise.all(
        ['New record', 'Columns', 'Schema', 'Delete matching'].map(async (name) => ({ name, box: (await page.getByRole('button', { name, exact: true }).boundingBox())! })),
      );
      for (const { box } of boxes) expect(box.x + box.width).toBeLessThanOrEqual(390);
      const alone = boxes.filter((b) => !boxes.some((other) => other !== b && Math.abs(other.box.y - b.box.y) < 2)).map((b) => b.name);
      expect(alone).toEqual([]);
    });

    test('the color scheme follows prefers-color-scheme', async () => {
      const background = async (colorScheme: 'light' | 'dark') => {
        const { page } = await openPage({ colorScheme });
        await page.goto(dashboardUrl());
        await page.getByLabel('Token', { exact: true }).waitFor();
        return page.evaluate(() => {
          const opaque = (el: unknown) => {
            const color = getComputedStyle(el).backgroundColor;
            return /^rgba\(.*,\s*0\)$/.test(color) || color === 'transparent' ? null : color;
          };
          return opaque(document.body) ?? opaque(document.documentElement) ?? 'no background';
        });
      };
      expect(luminance(await background('dark'))).toBeLessThan(0.2);
      expect(luminance(await background('light'))).toBeGreaterThan(0.5);
    });

    test('no page saw a CSP violation or a dialog, and no token went into a URL but file tokens', async () => {
      expect(watches.length).toBeGreaterThan(3);
      for (const watch of watches) {
        expect(watch.cspViolations).toEqual([]);
        expect(watch.dialogs).toEqual([]);
        for (const url of watch.requestUrls) {
          for (const token of TEST_TOKENS) expect(url).not.toContain(token);
          if (new URL(url).searchParams.has('token')) expect(new URL(url).pathname).toMatch(/\/api\/files\//);
        }
      }
      expect(watches[0]!.requestUrls.some((url) => url.includes('/backend/api/'))).toBe(true);
    });
  });
});
