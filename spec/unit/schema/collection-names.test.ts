import { describe, expect, test } from '@jest/globals';
import { buildSchemaRegistry } from '../../../lib/schema/collection-schema.js';
import type { CollectionDefinition } from '../../../lib/schema/definitions.js';

/**
 * One collection check for every type (issue 42, step 1 and bug B1): a view collection's name
 * passes the same checks as a base collection's. Before, a view skipped them: a name over 63
 * characters started once, then every restart failed with "relation already exists" (Postgres cut
 * the name); a view named like one of recordbase's tables stopped every realtime instance from
 * starting.
 */

const view = (name: unknown, extra: object = {}): CollectionDefinition => ({ name, type: 'view', viewQuery: 'SELECT 1 AS id', ...extra }) as unknown as CollectionDefinition;
const base = (name: unknown, extra: object = {}): CollectionDefinition => ({ name, fields: [], ...extra }) as unknown as CollectionDefinition;

describe.each([
  ['base', base],
  ['view', view],
])('a %s collection', (_type, make) => {
  test.each([
    ['64 characters', 'v'.repeat(64), /at most 63 characters/],
    ['an upper-case letter', 'Posts', /must match \[a-z_\]\[a-z0-9_\]\*/],
    ['a dash', 'my-posts', /must match/],
    ['no name', undefined, /must match/],
    ["recordbase's outbox", '_recordbase_realtime_outbox', /"_rb" or "_recordbase" are reserved/],
    ["recordbase's collection table", '_rb_collections', /reserved/],
  ])('named with %s is refused', (_what, name, message) => {
    expect(() => buildSchemaRegistry([make(name)])).toThrow(message);
  });

  test('with 63 characters is accepted', () => {
    expect(buildSchemaRegistry([make('v'.repeat(63))]).collections[0]!.name).toBe('v'.repeat(63));
  });

  test('with a bad id or an unknown key is refused, with the same messages', () => {
    expect(() => buildSchemaRegistry([make('ok', { id: 'a-b' })])).toThrow('collection "ok": id must match [A-Za-z0-9_]{1,63}');
    expect(() => buildSchemaRegistry([make('ok', { listRule: '' })])).toThrow('collection "ok": unknown key "listRule" (rules are written as rules: { list: ... })');
  });
});

test("a view's type-specific checks come after the shared ones, with their own advice", () => {
  expect(() => buildSchemaRegistry([view('ok', { fields: [] })])).toThrow(/fields are inferred from its viewQuery/);
  expect(() => buildSchemaRegistry([view('ok', { viewQuery: ' ' })])).toThrow(/needs "viewQuery"/);
  expect(() => buildSchemaRegistry([base('ok', { type: 'table' })])).toThrow('collection "ok": unknown type "table" (base, the default, or view)');
});
