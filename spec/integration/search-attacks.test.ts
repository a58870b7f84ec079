import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { CollectionDefinition } from '../../lib/index.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

/**
 * Issue 47, search attacked (docs/search.md): any search text is a 200 or a clear 400, never a
 * 500; what a search, its count and its ranking show is only ever what the caller may list; a
 * heavy search or highlight stays within the statement timeout while an honest list answers.
 */

const api = (path: string) => `/backend/api/collections/${path}`;
const TOKENS = { guest: undefined, alice: 'token-alice', bob: 'token-bob', root: 'token-root' } as const;
const ALICE = 'aliceaaaaaaaaaa';
const BOB = 'bobbbbbbbbbbbbb';

const collections: CollectionDefinition[] = [
  {
    name: 'notes',
    fields: [
      { name: 'title', type: 'text' },
      { name: 'body', type: 'text' },
      { name: 'owner', type: 'text' },
      { name: 'published', type: 'bool' },
      { name: 'secret', type: 'text', hidden: true },
      { name: 'guarded', type: 'text', rules: { view: 'owner = @request.auth.id' } },
    ],
    rules: { list: 'published = true || owner = @request.auth.id', view: 'published = true || owner = @request.auth.id', create: null, update: null, delete: null },
    indexes: [{ search: ['title', 'body'], language: 'english' }],
  },
  {
    name: 'heavy',
    fields: [{ name: 'title', type: 'text' }, { name: 'body', type: 'editor' }],
    rules: { list: '', view: '' },
    indexes: [{ search: ['title', 'body'], language: 'english' }],
  },
];

/** A long text of many distinct words, with `apple` among them. */
function longText(seed: number, characters: number): string {
  const words: string[] = [];
  let length = 0;
  for (let i = 0; length < characters; i++) {
    const word = i % 50 === 0 ? 'apple' : `w${((seed * 7919 + i * 104729) % 1000003).toString(36)}`;
    words.push(word);
    length += word.length + 1;
  }
  return words.join(' ');
}

describe.each(testEngines())('search attacks (%s)', (engine) => {
  let app: TestApp;
  const rows: { id: string; owner: string; published: boolean; apples: number }[] = [];

  beforeAll(async () => {
    app = await startTestApp(engine, { collections });
    const notes = app.router.api.collection('notes');
    // Unpublished notes rank highest (apple everywhere): a leak through ranking would put them first.
    for (const owner of ['', ALICE, BOB]) {
      for (const published of [true, false]) {
        for (const apples of [0, 1, 3]) {
          const title = apples === 0 ? 'pears' : Array(published ? 1 : apples).fill('apple').join(' ');
          const body = `${'apple '.repeat(published ? 0 : apples)}note by ${owner || 'nobody'}`;
          const created = await notes.create({ title, body, owner, published, secret: 'apple', guarded: 'apple' }, { as: 'superuser' });
          rows.push({ id: String(created.id), owner, published, apples });
        }
      }
    }
    const heavy = app.router.api.collection('heavy');
    for (let i = 0; i < 40; i++) await heavy.create({ title: `long ${i}`, body: `<p>${longText(i, 40_000)}</p>` }, { as: 'superuser' });
  }, 120_000);

  afterAll(async () => {
    await app?.close();
  });

  const get = (path: string, query: Record<string, string>, token?: string) => {
    const req = app.http.get(api(path)).query(query);
    return token ? req.set('Authorization', token) : req;
  };

  describe('search text', () => {
    const texts: [label: string, text: string][] = [
      ['unbalanced quotes', '"apple'],
      ['a lone quote', '"'],
      ['tsquery operators', "apple & pear | !plum <-> (fig) <2> x:* y:AB 'z'"],
      ['only punctuation', '&|!:*()<>'],
      ['backslashes and quotes', "\\' \\\" ''' \\\\"],
      ['or and -word', 'apple or -pears or'],
      ['a dangling or and minus', 'or - -'],
      ['NUL', 'apple\u0000pear'],
      ['emoji and combining marks', '🍎 apple 👩‍👩‍👧 é'],
      ['a lone surrogate', 'apple \ud800 x'],
      ['a regconfig injection', "apple'::regconfig, 'german') --"],
      ['stop words only', 'the and of'],
      ['1,000 characters of terms', Array(250).fill('ab').join(' ').slice(0, 1000)],
    ];

    test.each(texts)('%s: a 200', async (_label, text) => {
      const res = await get('notes/records', { search: text, sort: '-@rank' }, TOKENS.root);
      expect(res.status).toBe(200);
      expect(Array.isArray(res.body.items)).toBe(true);
    });

    test('10 KB of search text is a 400 naming the bound; 1,000 characters is not', async () => {
      const res = await get('notes/records', { search: 'apple '.repeat(1700) }, TOKENS.root);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ status: 400, message: 'Invalid search: at most 1000 characters.', data: {} });
      expect((await get('notes/records', { search: 'a'.repeat(1000) }, TOKENS.root)).status).toBe(200);
    });

    test('the language is never the request\'s: a language parameter changes nothing', async () => {
      // english stems "apples" to "appl"; simple would not find "apple" with it.
      const stemmed = await get('notes/records', { search: 'apples', language: 'simple', config: 'simple' }, TOKENS.root);
      expect(stemmed.status).toBe(200);
      expect(stemmed.body.totalItems).toBe(rows.filter((r) => r.apples > 0).length);
    });
  });

  describe('rules', () => {
    /** What `token` may list, by a plain list: what every search answer must stay within. */
    async function listable(token: string | undefined): Promise<Set<string>> {
      const res = await get('notes/records', { perPage: '500' }, token);
      expect(res.status).toBe(200);
      return new Set(res.body.items.map((r: { id: string }) => r.id));
    }

    test.each(Object.entries(TOKENS))('%s: search results, totalItems and -@rank cover exactly the matching records it may list', async (_who, token) => {
      const allowed = await listable(token);
      const expected = rows.filter((r) => r.apples > 0 && allowed.has(r.id)).map((r) => r.id);
      const res = await get('notes/records', { search: 'apple', sort: '-@rank', perPage: '500' }, token);
      expect(res.status).toBe(200);
      expect(new Set(res.body.items.map((r: { id: string }) => r.id))).toEqual(new Set(expected));
      expect(res.body.totalItems).toBe(expected.length);
      // The order is the superuser's ranking with what this caller may not list taken out.
      const ranked = (await get('notes/records', { search: 'apple', sort: '-@rank', perPage: '500' }, TOKENS.root)).body.items.map((r: { id: string }) => r.id);
      expect(res.body.items.map((r: { id: string }) => r.id)).toEqual(ranked.filter((id: string) => allowed.has(id)));
      // Paged: the first page is the first of those, and the count is still theirs.
      const first = await get('notes/records', { search: 'apple', sort: '-@rank', perPage: '1' }, token);
      expect(first.body.totalItems).toBe(expected.length);
      expect(first.body.items.map((r: { id: string }) => r.id)).toEqual(ranked.filter((id: string) => allowed.has(id)).slice(0, 1));
    });

    test('the guest sees no unpublished note, however well it ranks', async () => {
      const res = await get('notes/records', { search: 'apple', sort: '-@rank' });
      expect(res.body.items.every((r: { published: boolean }) => r.published)).toBe(true);
    });

    test.each([
      ['a hidden field', 'secret = "apple"'],
      ['a hidden field by ~', 'secret ~ "app"'],
      ['a field with a view rule', 'guarded = "apple"'],
    ])('search with a filter on %s answers exactly as the filter alone does', async (_label, filter) => {
      for (const token of [TOKENS.guest, TOKENS.alice, TOKENS.bob]) {
        const alone = await get('notes/records', { filter, perPage: '500' }, token);
        const searched = await get('notes/records', { filter, search: 'apple', perPage: '500' }, token);
        expect(searched.status).toBe(alone.status);
        if (alone.status !== 200) {
          expect(searched.body).toEqual(alone.body);
          continue;
        }
        const matching = new Set(rows.filter((r) => r.apples > 0).map((r) => r.id));
        const expected = alone.body.items.map((r: { id: string }) => r.id).filter((id: string) => matching.has(id));
        expect(new Set(searched.body.items.map((r: { id: string }) => r.id))).toEqual(new Set(expected));
        expect(searched.body.totalItems).toBe(expected.length);
      }
    });

    test('a search never matches through a hidden field or one with a view rule: they are not in the index', async () => {
      // Every note holds "apple" in secret and guarded; the pears notes hold it nowhere else.
      const pears = rows.filter((r) => r.apples === 0).map((r) => r.id);
      const res = await get('notes/records', { search: 'apple', perPage: '500' }, TOKENS.root);
      for (const id of pears) expect(res.body.items.map((r: { id: string }) => r.id)).not.toContain(id);
    });

    test(':highlight never shows a field the caller may not read', async () => {
      const res = await get('notes/records', { search: 'apple', fields: 'id,secret:highlight,guarded:highlight,title:highlight', perPage: '500' }, TOKENS.bob);
      expect(res.status).toBe(200);
      for (const item of res.body.items as Record<string, unknown>[]) {
        expect(item).not.toHaveProperty('secret');
        const row = rows.find((r) => r.id === item.id)!;
        if (row.owner === BOB) expect(item.guarded).toBe('apple');
        else expect(item).not.toHaveProperty('guarded');
      }
    });
  });

  describe('cost', () => {
    const heavySearches: [label: string, query: Record<string, string>][] = [
      ['a many-term search', { search: Array(140).fill(0).map((_, i) => `w${(i * 104729).toString(36)}`).join(' or ').slice(0, 1000), sort: '-@rank', perPage: '40' }],
      ['a quoted phrase of many terms', { search: `"${longText(3, 990)}"`, sort: '-@rank', perPage: '40' }],
      ['highlight over long texts, a full page', { search: 'apple', sort: '-@rank', perPage: '40', fields: 'id,body:highlight' }],
      ['highlight of a many-term search', { search: Array(200).fill(0).map((_, i) => `w${(i * 7919).toString(36)}`).join(' or ').slice(0, 1000), perPage: '40', fields: 'id,body:highlight' }],
    ];

    test.each(heavySearches)('%s answers within the statement timeout (no 400, no 500) while an honest list answers', async (_label, query) => {
      let attacking = true;
      const attackers = [0, 1].map(async () => {
        const statuses: number[] = [];
        const started = Date.now();
        while (attacking && Date.now() - started < 15_000) statuses.push((await get('heavy/records', query)).status);
        return statuses;
      });
      const honest: number[] = [];
      for (let i = 0; i < 5; i++) {
        const started = Date.now();
        const res = await get('notes/records', { perPage: '5' });
        expect(res.status).toBe(200);
        honest.push(Date.now() - started);
      }
      attacking = false;
      const statuses = (await Promise.all(attackers)).flat();
      expect(statuses.length).toBeGreaterThan(0);
      expect(new Set(statuses)).toEqual(new Set([200]));
      // The honest list waits at most for the attackers' statements in flight, each bounded.
      expect(Math.max(...honest)).toBeLessThan(3_000);
    }, 60_000);

    test('a highlight returns at most the bounded prefix of a long text, marked', async () => {
      const res = await get('heavy/records', { search: 'apple', perPage: '1', fields: 'body:highlight' });
      expect(res.status).toBe(200);
      const body: string = res.body.items[0].body;
      expect(body).toContain('<mark>apple</mark>');
      expect(body.replaceAll('<mark>', '').replaceAll('</mark>', '').length).toBeLessThanOrEqual(2_000);
    });
  });
});
