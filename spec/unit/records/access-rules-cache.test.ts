import { describe, expect, test } from '@jest/globals';
import { compileRule, compileUserFilter } from '../../../lib/records/access-rules.js';
import { compileRecordOrder } from '../../../lib/records/record-order.js';
import type { Caller } from '../../../lib/records/caller.js';
import { guardedRegistry } from '../query/target-rules-schema.js';

/**
 * Filters, rules and sorts that read nothing of the request are compiled once per collection
 * and reused (issue 17); anything that reads the request (`@request.*`, macros, a relation hop
 * that carries the target's view rule) must still compile per request, or one caller's values
 * would leak into another's query.
 */
const posts = guardedRegistry.get('posts')!;
const as = (id: string | null, superuser = false): Caller => ({ request: { auth: id === null ? null : { id, superuser }, query: {}, body: {}, method: 'GET' } });
const alice = as('alice0000000001');
const bob = as('bob000000000001');

describe('compiling once what does not depend on the request', () => {
  test('a plain filter compiles to the same SQL for every caller (and is reused)', () => {
    const first = compileUserFilter({ registry: guardedRegistry, collection: posts, filter: "title = 'x' && author != ''", caller: alice });
    const second = compileUserFilter({ registry: guardedRegistry, collection: posts, filter: "title = 'x' && author != ''", caller: bob });
    expect(second[0]).toBe(first[0]);
    expect(first[0]!.bindings).toEqual(['x', '']);
  });

  test("@request values are bound per caller, never reused across callers", () => {
    const filter = 'author = @request.auth.id';
    const a = compileUserFilter({ registry: guardedRegistry, collection: posts, filter, caller: alice });
    const b = compileUserFilter({ registry: guardedRegistry, collection: posts, filter, caller: bob });
    expect(a[0]!.bindings).toContain('alice0000000001');
    expect(b[0]!.bindings).toContain('bob000000000001');
    expect(b[0]!.bindings).not.toContain('alice0000000001');
  });

  test("a relation hop carries the target's view rule for this caller, compiled per request", () => {
    const filter = "author.email ~ 'admin@'";
    const a = compileUserFilter({ registry: guardedRegistry, collection: posts, filter, caller: alice });
    const b = compileUserFilter({ registry: guardedRegistry, collection: posts, filter, caller: bob });
    expect(a[0]!.bindings).toEqual(['alice0000000001', '%admin@%']);
    expect(b[0]!.bindings).toEqual(['bob000000000001', '%admin@%']);
  });

  test("a back-relation named alone (no dot) also carries its target's view rule, compiled per caller", () => {
    // `bookmarks_via_user` is one segment, yet it hops into bookmarks, whose view rule reads the caller.
    const users = guardedRegistry.get('users')!;
    const filter = 'bookmarks_via_user:length > 0';
    const a = compileUserFilter({ registry: guardedRegistry, collection: users, filter, caller: alice });
    const b = compileUserFilter({ registry: guardedRegistry, collection: users, filter, caller: bob });
    expect(a[0]!.bindings).toContain('alice0000000001');
    expect(b[0]!.bindings).toContain('bob000000000001');
    expect(b[0]!.bindings).not.toContain('alice0000000001');
  });

  test('a superuser and a user are compiled apart (what they may reach differs)', () => {
    const filter = "title = 'x'";
    const user = compileUserFilter({ registry: guardedRegistry, collection: posts, filter, caller: alice });
    const root = compileUserFilter({ registry: guardedRegistry, collection: posts, filter, caller: as('root00000000001', true) });
    expect(root[0]).not.toBe(user[0]);
  });

  test('rules that read the request compile per caller', () => {
    const users = guardedRegistry.get('users')!;
    const a = compileRule({ registry: guardedRegistry, collection: users, action: 'view', caller: alice });
    const b = compileRule({ registry: guardedRegistry, collection: users, action: 'view', caller: bob });
    expect(a).toEqual([expect.objectContaining({ bindings: ['alice0000000001'] })]);
    expect(b).toEqual([expect.objectContaining({ bindings: ['bob000000000001'] })]);
  });

  test('a plain sort is reused; a sort through a relation carries the caller', () => {
    const plain = compileRecordOrder({ registry: guardedRegistry, collection: posts, sort: '-created,title', caller: alice });
    expect(compileRecordOrder({ registry: guardedRegistry, collection: posts, sort: '-created,title', caller: bob })).toBe(plain);
    const a = compileRecordOrder({ registry: guardedRegistry, collection: posts, sort: 'author.email', caller: alice });
    const b = compileRecordOrder({ registry: guardedRegistry, collection: posts, sort: 'author.email', caller: bob });
    expect(a.bindings).toEqual(['alice0000000001']);
    expect(b.bindings).toEqual(['bob000000000001']);
  });
});
