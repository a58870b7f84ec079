import { describe, expect, test } from '@jest/globals';
import { compileCostedFilter, compileFilter } from '../../../lib/query/compile-filter.js';
import { DeferredValue, resolveBindings } from '../../../lib/query/deferred-value.js';
import { buildSchemaRegistry } from '../../../lib/schema/collection-schema.js';
import { NOW, postsContext } from './query-test-schema.js';

/**
 * A condition compiled once and checked many times (a realtime subscription) reads the clock at
 * each check: with `deferMacros`, macros are DeferredValues with the comparison's type and
 * coercion decided at compile time, resolved by resolveBindings.
 */
describe('deferred macros', () => {
  const later = new Date('2025-01-02T03:04:05.006Z');

  test.each([
    ['created >= @now', ['2024-05-15T10:20:30.400Z'], ['2025-01-02T03:04:05.006Z']],
    ['created < @todayStart', ['2024-05-15T00:00:00.000Z'], ['2025-01-02T00:00:00.000Z']],
    ['title = @now', ['2024-05-15 10:20:30.400Z'], ['2025-01-02 03:04:05.006Z']],
    ['title ~ @now', ['%2024-05-15 10:20:30.400Z%'], ['%2025-01-02 03:04:05.006Z%']],
    ['views = @hour', [10], [3]],
  ])('%s: the same SQL, bound as compiled now or resolved later', (filter, atCompile, atLater) => {
    const immediate = compileFilter(filter, postsContext());
    const deferred = compileFilter(filter, postsContext({ deferMacros: true }));
    expect(deferred.sql).toBe(immediate.sql);
    expect(immediate.bindings).toEqual(atCompile);
    expect(deferred.bindings.every((b) => b instanceof DeferredValue)).toBe(true);
    expect(resolveBindings(deferred.bindings, NOW)).toEqual(atCompile);
    expect(resolveBindings(deferred.bindings, later)).toEqual(atLater);
  });

  test("a relation hop's target view rule that reads the clock is deferred too", () => {
    const registry = buildSchemaRegistry([
      { name: 'events', rules: { view: 'starts <= @now' }, fields: [{ name: 'starts', type: 'date' }] },
      { name: 'tickets', rules: { view: '' }, fields: [{ name: 'event', type: 'relation', collection: 'events' }] },
    ]);
    const context = { registry, collection: registry.get('tickets')!, alias: 'r', request: { auth: null, query: {}, body: {}, method: 'GET' }, mode: 'user' as const, now: NOW };
    const deferred = compileFilter("event.id != ''", { ...context, deferMacros: true });
    const macro = deferred.bindings.filter((b) => b instanceof DeferredValue);
    expect(macro).toHaveLength(1);
    expect(resolveBindings(macro, later)).toEqual(['2025-01-02T03:04:05.006Z']);
  });

  test('literals and request values are bound as they are', () => {
    expect(compileFilter("title = 'x' && views > 2", postsContext({ deferMacros: true })).bindings).toEqual(['x', 2]);
  });
});

describe('filter limits stricter than a list', () => {
  const limits = { maxCost: 3, maxHops: 1, what: "a realtime subscription's filter" };
  test('the cost is reported and bounded, naming what is bounded', () => {
    expect(compileCostedFilter("title = 'a' && views > 1", postsContext({ limits })).cost).toBe(2);
    expect(() => compileFilter("title = 'a' && views > 1 && views < 9 && title != 'b'", postsContext({ limits }))).toThrow(
      /too complex for a realtime subscription's filter: .* at most 3 in all/,
    );
  });
  test('relation paths are bounded by maxHops', () => {
    expect(() => compileFilter("author.name = 'x'", postsContext({ limits }))).not.toThrow();
    expect(() => compileFilter("author.best.name = 'x'", postsContext({ limits }))).toThrow(/has more than 1 relation hop\b/);
  });
});
