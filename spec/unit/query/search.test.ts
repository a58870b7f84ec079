import { BadRequestError } from '../../../lib/errors.js';
import { applyFields } from '../../../lib/query/apply-fields.js';
import { compileSort } from '../../../lib/query/compile-sort.js';
import { parseFields } from '../../../lib/query/parse-fields.js';
import { cutText, MARK_END, MARK_START, presentHighlight, readHighlightedFields, readSearchParam, renderHighlight } from '../../../lib/query/search.js';
import { buildSchemaRegistry } from '../../../lib/schema/collection-schema.js';
import { rawSql } from '../../../lib/sql-fragment.js';

/** Issue 47: the pure parts of search (docs/search.md): the parameter, `:highlight`, `@rank`. */

describe('readSearchParam', () => {
  test.each([
    [undefined, undefined],
    ['', undefined],
    ['   ', undefined],
    ['fast car', 'fast car'],
    ['a\u0000b', 'a b'],
    ['\u0000', undefined],
    ['x'.repeat(1000), 'x'.repeat(1000)],
  ])('%j reads as %j', (given, expected) => {
    expect(readSearchParam(given)).toBe(expected);
  });

  test('past 1,000 characters, or not a string, is a 400 invalid_search', () => {
    for (const given of ['x'.repeat(1001), ['a'], { a: 1 }]) {
      let error: unknown;
      try {
        readSearchParam(given);
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(BadRequestError);
      expect((error as BadRequestError).code).toBe('invalid_search');
    }
  });
});

describe(':highlight', () => {
  test('parses on top-level fields only', () => {
    expect(readHighlightedFields(parseFields('id,title:highlight,body:excerpt(10),-x'))).toEqual(['title']);
    expect(() => parseFields('expand.author.name:highlight')).toThrow(/":highlight" applies to the listed records' own fields/);
    expect(() => parseFields('title:highlite')).toThrow(/expected ":excerpt\(n\)", ":excerpt\(n,true\)" or ":highlight"/);
  });

  test('a rendered value is escaped once, its marks kept; a plain value is escaped and cut', () => {
    const rendered = renderHighlight(`a <b> & ${MARK_START}car${MARK_END} "q" 'x'`, { stripTags: (t) => t });
    expect(applyFields({ title: rendered }, parseFields('title:highlight'))).toEqual({ title: 'a &lt;b&gt; &amp; <mark>car</mark> &quot;q&quot; &#39;x&#39;' });
    expect(presentHighlight('<script>')).toBe('&lt;script&gt;');
    expect(presentHighlight('y'.repeat(20_000))).toHaveLength(2_000);
    // Without :highlight the same value is not touched by it.
    expect(applyFields({ title: '<i>' }, parseFields('title'))).toEqual({ title: '<i>' });
  });

  test('cutText never splits a surrogate pair', () => {
    expect(cutText('ab🍎', 3)).toBe('ab');
    expect(cutText('ab🍎', 4)).toBe('ab🍎');
  });
});

describe('compileSort @rank', () => {
  const registry = buildSchemaRegistry([{ name: 'posts', fields: [{ name: 'title', type: 'text' }], indexes: [{ search: ['title'] }] }]);
  const context = { registry, collection: registry.collections[0]!, alias: 'r', mode: 'user' as const };

  test('orders by the search rank, with its bindings, id last in the same direction', () => {
    const rank = { sql: 'ts_rank(x, ?)', bindings: ['car'] };
    expect(compileSort('-@rank,title', { ...context, rank })).toEqual({ sql: 'ts_rank(x, ?) DESC, "r"."title" ASC, "r"."id" ASC', bindings: ['car'] });
    expect(compileSort('-@rank', { ...context, rank: rawSql('R') })).toEqual({ sql: 'R DESC, "r"."id" DESC', bindings: [] });
  });

  test('without a search it is a 400', () => {
    expect(() => compileSort('-@rank', context)).toThrow('Invalid sort: @rank needs a search parameter.');
  });
});
