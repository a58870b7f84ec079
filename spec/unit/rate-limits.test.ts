import { resolveOptions } from '../../lib/options.js';
import { addressGroup } from '../../lib/http/rate-limits/address-group.js';
import { RateLimitRuleMatcher } from '../../lib/http/rate-limits/match-rate-limit-rule.js';
import { RateLimiter, type CountedRule } from '../../lib/http/rate-limits/rate-limiter.js';
import { createMemoryLogger } from '../support/test-app.js';

/** Issue 44, part 3: the rate limits' option checks, address groups, PocketBase's rule choice and the in-memory counters. */

const collections = [{ name: 'posts', fields: [] }];
const resolve = (rateLimits: unknown) => resolveOptions({ collections, rateLimits } as never, {}).rateLimits;
const counted = (rules: Omit<CountedRule, 'index' | 'audience'>[] & { audience?: CountedRule['audience'] }[]): CountedRule[] =>
  rules.map((rule, index) => ({ audience: '', ...rule, index }) as CountedRule);

describe('rateLimits option', () => {
  test('defaults: no rules, no exclusions, 100,000 tracked keys; audience defaults to everyone', () => {
    expect(resolve(undefined)).toEqual({ rules: [], excludedIps: [], maxTrackedKeys: 100_000 });
    expect(resolve(false)).toBe(false);
    expect(resolve({ rules: [{ label: 'posts:create', maxRequests: 2, duration: 5 }] })).toMatchObject({ rules: [{ label: 'posts:create', maxRequests: 2, duration: 5, audience: '' }] });
  });

  test.each([
    [{ rules: {} }, /rateLimits.rules must be an array/],
    [{ rules: [{ label: 'nope', maxRequests: 1, duration: 1 }] }, /rateLimits.rules\[0\].label must be a path .* got "nope"/],
    [{ rules: [{ label: 'post /api/', maxRequests: 1, duration: 1 }] }, /rateLimits.rules\[0\].label must be/],
    [{ rules: [{ label: 'posts:authWithPassword', maxRequests: 1, duration: 1 }] }, /does not serve \(sign-in and its kin are the host's\)/],
    [{ rules: [{ label: 'ghosts:list', maxRequests: 1, duration: 1 }] }, /"ghosts:list" names no declared collection/],
    [{ rules: [{ label: '/api/', maxRequests: 0, duration: 1 }] }, /maxRequests must be a positive integer/],
    [{ rules: [{ label: '/api/', maxRequests: 1, duration: 1.5 }] }, /duration must be a positive whole number of seconds/],
    [{ rules: [{ label: '/api/', maxRequests: 1, duration: 1, audience: '@admin' }] }, /audience must be "", "@guest" or "@auth", got "@admin"/],
    [{ rules: [{ label: '/api/', maxRequests: 1, duration: 1, per: 'ip' }] }, /rateLimits.rules\[0\].per is not a setting of a rule/],
    [{ rules: [{ label: '/api/', maxRequests: 1, duration: 1 }, { label: '/api/', maxRequests: 2, duration: 1, audience: '@guest' }] }, /rules\[1\] conflicts with rateLimits.rules\[0\]/],
    [{ excludedIps: ['10.0.0.0/33'] }, /excludedIps\[0\] must be an IP address or a CIDR subnet/],
    [{ excludedIps: ['localhost'] }, /excludedIps\[0\] must be/],
    [{ maxTrackedKeys: 0 }, /rateLimits.maxTrackedKeys must be a positive integer/],
    [{ burst: 1 }, /rateLimits.burst is not an option/],
  ])('%j is refused: %s', (value, message) => {
    expect(() => resolve(value)).toThrow(message);
  });

  test('labels PocketBase accepts and recordbase serves, and audiences that do not overlap', () => {
    const rules = ['/', '/api/', '/api/batch', 'POST /api/realtime', 'GET /api/collections/posts/records', 'posts:list', '*:file', '*:create'].map((label) => ({ label, maxRequests: 1, duration: 1 }));
    expect(() => resolve({ rules: [...rules, { label: '/x/', maxRequests: 1, duration: 1, audience: '@guest' }, { label: '/x/', maxRequests: 1, duration: 1, audience: '@auth' }], excludedIps: ['::1', '10.0.0.0/8', 'fd00::/8'] })).not.toThrow();
  });
});

describe('addressGroup', () => {
  test.each([
    ['203.0.113.9', '203.0.113.9'],
    ['::ffff:203.0.113.9', '203.0.113.9'],
    ['::ffff:cb00:7109', '203.0.113.9'],
    ['2001:db8:1:2::1', '2001:db8:1:2::/64'],
    ['2001:0DB8:0001:0002:ffff:ffff:ffff:ffff', '2001:db8:1:2::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    [undefined, 'unknown'],
    ['not:an:address', 'not:an:address'],
  ])('%s is the client %s', (ip, group) => {
    expect(addressGroup(ip)).toBe(group);
  });
});

describe('RateLimitRuleMatcher (PocketBase\'s FindRateLimitRule)', () => {
  const rules = counted([
    { label: '/api/', maxRequests: 1, duration: 1 },
    { label: '*:create', maxRequests: 1, duration: 1 },
    { label: 'posts:create', maxRequests: 1, duration: 1, audience: '@guest' },
    { label: 'POST /api/batch', maxRequests: 1, duration: 1 },
    { label: '/api/collections/', maxRequests: 1, duration: 1, audience: '@auth' },
  ]);
  const matcher = new RateLimitRuleMatcher(rules);
  const create = ['posts:create', '*:create', 'POST /api/collections/posts/records', '/api/collections/posts/records'];

  test('the first label that matches wins, collection labels first; an audience that is not the caller\'s is skipped', () => {
    expect(matcher.find(create, { authenticated: false, collectionLabels: 2 })).toEqual({ rule: rules[2], perCollection: true });
    expect(matcher.find(create, { authenticated: true, collectionLabels: 2 })).toEqual({ rule: rules[1], perCollection: true });
    expect(matcher.find(['POST /api/batch', '/api/batch'], { authenticated: false, collectionLabels: 0 })).toEqual({ rule: rules[3], perCollection: false });
  });

  test('path prefixes: in the rules\' order, after exact labels; a label ending in / covers the path itself', () => {
    const list = ['posts:list', '*:list', 'GET /api/collections/posts/records', '/api/collections/posts/records'];
    expect(matcher.find(list, { authenticated: true, collectionLabels: 2 })?.rule).toBe(rules[0]);
    expect(matcher.find(['GET /api', '/api'], { authenticated: false, collectionLabels: 0 })?.rule).toBe(rules[0]);
    expect(matcher.find(['GET /other', '/other'], { authenticated: false, collectionLabels: 0 })).toBeUndefined();
  });
});

describe('RateLimiter in memory', () => {
  let now = 60_000 * 1000;
  const limiter = (rules: CountedRule[], maxTrackedKeys = 100) => new RateLimiter({ rules, maxTrackedKeys, logger: createMemoryLogger(), now: () => now });

  test('a fixed window: maxRequests admitted, then the seconds to its end; a new window starts again', () => {
    const [rule] = counted([{ label: '/api/', maxRequests: 2, duration: 10 }]);
    const l = limiter([rule!]);
    now = 1_000_000 + 2_500;
    expect([l.take(rule!, '', 'x'), l.take(rule!, '', 'x'), l.take(rule!, '', 'x')]).toEqual([0, 0, 8]);
    expect(l.take(rule!, '', 'y')).toBe(0);
    now += 7_600;
    expect(l.take(rule!, '', 'x')).toBe(0);
  });

  test('takeAll: all counted or none, the longest wait when one bucket would overflow', () => {
    const rules = counted([{ label: 'a:create', maxRequests: 3, duration: 10 }, { label: 'b:create', maxRequests: 50, duration: 60 }]);
    const l = limiter(rules);
    now = 2_000_000;
    const hits = (a: number, b: number) => [...Array<number>(a).fill(0).map(() => ({ rule: rules[0]!, scope: 'a', client: 'x' })), ...Array<number>(b).fill(0).map(() => ({ rule: rules[1]!, scope: 'b', client: 'x' }))];
    expect(l.takeAll(hits(4, 1))).toBe(10);
    expect(l.takeAll(hits(3, 50))).toBe(0);
    expect(l.take(rules[1]!, 'b', 'x')).toBe(40);
  });

  test('counters of ended windows are dropped at the next sweep, with no shared store too', async () => {
    const [rule] = counted([{ label: '/api/', maxRequests: 5, duration: 1 }]);
    const l = limiter([rule!]);
    now = 3_000_000;
    for (let i = 0; i < 10; i++) l.take(rule!, '', `192.0.2.${i}`);
    l.take({ ...rule!, index: 1, duration: 60 }, '', 'long');
    expect(l.trackedKeys).toBe(11);
    now += 10_001;
    await l.sync();
    expect(l.trackedKeys).toBe(1);
  });

  test('memory: at most maxTrackedKeys counters, however many clients', () => {
    const [rule] = counted([{ label: '/api/', maxRequests: 5, duration: 60 }]);
    const l = limiter([rule!], 1000);
    for (let i = 0; i < 1_000_000; i++) l.take(rule!, '', `10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`);
    expect(l.trackedKeys).toBe(1000);
  });
});
