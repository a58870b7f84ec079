import { describe, expect, test } from '@jest/globals';
import { compileRule, reuseKey, type RuleDecision } from '../../../lib/records/access-rules.js';
import type { Caller } from '../../../lib/records/caller.js';
import { compileSubscriptionConditions } from '../../../lib/realtime/subscription-conditions.js';
import { parseFilter } from '../../../lib/query/filter-parser.js';
import type { Identity } from '../../../lib/auth/identity.js';
import { buildSchemaRegistry, type CollectionSchema } from '../../../lib/schema/collection-schema.js';
import { guardedRegistry } from '../query/target-rules-schema.js';

/**
 * A rule's decision is a value: 'denied' (a `null` rule for a non-superuser) or the conditions.
 * Callers that answer a refusal their own way (a 404, `false`, a subscription that receives
 * nothing) read it as a value; nothing is thrown and caught back, so a real error is never taken
 * for a refusal.
 */
const as = (auth: Identity | null): Caller => ({ request: { auth, query: {}, body: {}, method: 'GET' } });
const guest = as(null);
const alice = as({ id: 'alice0000000001' });
const root = as({ id: 'root00000000001', superuser: true });
const users = guardedRegistry.get('users')!;
const vaults = guardedRegistry.get('vaults')!;
const posts = guardedRegistry.get('posts')!;

describe('compileRule decides with a value', () => {
  test.each<[string, CollectionSchema, Caller, RuleDecision]>([
    ['a null rule, for a guest', vaults, guest, 'denied'],
    ['a null rule, for an identity', vaults, alice, 'denied'],
    ['a null rule, for a superuser', vaults, root, []],
    ['an empty rule, for a guest', posts, guest, []],
    ['an expression, for a superuser', users, root, []],
  ])('%s', (_what, collection, caller, decision) => {
    expect(compileRule({ registry: guardedRegistry, collection, action: 'view', caller })).toEqual(decision);
  });

  test('an expression is its conditions, bound for this caller', () => {
    const decision = compileRule({ registry: guardedRegistry, collection: users, action: 'view', caller: alice });
    expect(decision).toEqual([expect.objectContaining({ bindings: ['alice0000000001'] })]);
  });
});

/** How a filter may be reused: the same for every request, per the request values it reads, or never. */
type Reuse = 'always' | 'per request values' | 'never';

function reuseOf(filter: string, mode: 'user' | 'rule' | 'superuser'): Reuse {
  const keys = [guest, alice, as({ id: 'bob000000000001' })].map((caller) => reuseKey(parseFilter(filter), users, mode, caller.request));
  if (keys.every((key) => key === undefined)) return 'never';
  if (keys.every((key) => key === '')) return 'always';
  // Another caller's values make another key; the same caller's, the same key.
  expect(new Set(keys).size).toBe(3);
  expect(reuseKey(parseFilter(filter), users, mode, alice.request)).toBe(keys[1]);
  return 'per request values';
}

describe('reuseKey: the one reuse decision, on the parsed filter', () => {
  test.each<[string, Reuse, Reuse]>([
    ["name = 'x' && age > 3", 'always', 'always'],
    ["name:lower = 'x' || friends:length > 1", 'always', 'always'],
    ["friends ?= 'alice0000000001'", 'always', 'always'],
    ['name = @request.auth.id', 'per request values', 'per request values'],
    ['age > @second', 'never', 'never'],
    // a relation hop carries its target's view rule for a client's filter, none in a rule
    ["best.name = 'x'", 'never', 'always'],
    // one segment, but no field: a back-relation, likewise
    ['bookmarks_via_user:length > 0', 'never', 'always'],
    ["@collection.posts.title = 'x'", 'never', 'never'],
    ["@request.body.name = 'x'", 'never', 'never'],
    ["nosuchfield = 'x'", 'never', 'always'],
  ])('%s -> user %s, rule %s', (filter, user, rule) => {
    expect(reuseOf(filter, 'user')).toBe(user);
    expect(reuseOf(filter, 'rule')).toBe(rule);
    expect(reuseOf(filter, 'superuser')).toBe(rule);
  });
});

describe('realtime reads the decision as a value', () => {
  test("a null rule gives a subscription that receives nothing ('denied')", () => {
    const conditions = compileSubscriptionConditions({ registry: guardedRegistry, collection: vaults, action: 'list', caller: alice });
    expect(conditions.fragments).toBe('denied');
  });

  test('an error inside rule compilation is thrown to the caller, not taken for a refusal', () => {
    // A host identity whose property throws when the rule reads it: a programming error, not a `null` rule.
    const broken: Identity = {
      id: 'alice0000000001',
      get name(): string {
        throw new TypeError('identity.name is broken');
      },
    };
    const registry = buildSchemaRegistry([{ name: 'notes', fields: [{ name: 'name', type: 'text' }], rules: { list: 'name = @request.auth.name' } }]);
    const notes = registry.get('notes')!;
    expect(() => compileSubscriptionConditions({ registry, collection: notes, action: 'list', caller: as(broken) })).toThrow('identity.name is broken');
  });
});
