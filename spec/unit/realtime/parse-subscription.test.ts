import { RecordbaseError } from '../../../lib/errors.js';
import { mayChangeIdentity } from '../../../lib/realtime/client-registry.js';
import { parseSubscription } from '../../../lib/realtime/parse-subscription.js';
import { frameMessage } from '../../../lib/realtime/sse-stream.js';
import { newClientId } from '../../../lib/realtime/realtime-hub.js';
import { buildSchemaRegistry } from '../../../lib/schema/collection-schema.js';

const registry = buildSchemaRegistry([{ name: 'posts', id: 'pbc_posts000001', fields: [{ name: 'title', type: 'text' }] }]);
const posts = registry.get('posts')!;
const withOptions = (topic: string, options: unknown) => `${topic}?options=${encodeURIComponent(JSON.stringify(options))}`;

describe('parseSubscription', () => {
  test.each([
    ['posts/*', undefined],
    ['pbc_posts000001/*', undefined],
    ['posts', undefined],
    ['posts/abc123', 'abc123'],
    ['pbc_posts000001/abc123', 'abc123'],
  ])('%s names the collection (record %s)', (raw, recordId) => {
    const sub = parseSubscription(raw, registry);
    expect(sub.collection).toBe(posts);
    expect(sub.recordId).toBe(recordId);
    expect(sub.raw).toBe(raw);
  });

  test.each(['PB_CONNECT', 'nosuch/*', '', '/*'])('%j names no collection and is accepted', (raw) => {
    expect(parseSubscription(raw, registry).collection).toBeUndefined();
  });

  test('options as the SDK sends them: query values as strings, filter, expand, fields; the raw string kept', () => {
    const raw = withOptions('posts/rec1', { query: { filter: 'views > 1', expand: 'author', fields: 'id,title', custom: 5, flag: true, obj: { a: 1 } }, headers: { 'X-Token': 'abc' } });
    const sub = parseSubscription(raw, registry);
    expect(sub.raw).toBe(raw);
    expect(sub.filter).toBe('views > 1');
    expect({ ...sub.query }).toEqual({ filter: 'views > 1', expand: 'author', fields: 'id,title', custom: '5', flag: 'true', obj: '{"a":1}' });
    expect([...sub.shape.tree.keys()]).toEqual(['author']);
    expect(sub.shape.selection).toBeDefined();
  });

  test('an empty options object and an empty filter add nothing; a blank filter is kept for the check, which refuses it as a list does', () => {
    const sub = parseSubscription(withOptions('posts/*', { query: { filter: '' } }), registry);
    expect(sub.filter).toBeUndefined();
    expect(sub.shape.tree.size).toBe(0);
    expect(parseSubscription(withOptions('posts/*', { query: { filter: '  ' } }), registry).filter).toBe('  ');
  });

  test.each([
    ['a line break', 'posts/*\nevent:forged'],
    ['a NUL', 'posts/*\u0000'],
    ['options not JSON', 'posts/*?options=%7Bnope'],
    ['options not an object', withOptions('posts/*', [1])],
    ['query not an object', withOptions('posts/*', { query: 'x' })],
    ['a bad fields', withOptions('posts/*', { query: { fields: 'title:nosuchmodifier' } })],
  ])('%s is a 400 invalid_subscription naming the subscription', (_label, raw) => {
    let error: unknown;
    try {
      parseSubscription(raw, registry);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(RecordbaseError);
    expect((error as RecordbaseError).status).toBe(400);
    expect((error as RecordbaseError).code).toBe('invalid_subscription');
    expect((error as RecordbaseError).message).toContain('Invalid subscription "posts/*');
  });
});

describe('the identity lock', () => {
  const alice = { id: 'alice' };
  test.each([
    [null, null, true],
    [null, alice, true],
    [alice, { id: 'alice', extra: 1 }, true],
    [alice, { id: 'bob' }, false],
    [alice, null, false],
  ])('from %j to %j: %s', (before, after, allowed) => {
    expect(mayChangeIdentity(before, after)).toBe(allowed);
  });
});

describe('framing', () => {
  test('every message carries the id line, the event as given and one data line', () => {
    expect(frameMessage('abc', 'posts/*?options=x', '{"a":1}')).toBe('id:abc\nevent:posts/*?options=x\ndata:{"a":1}\n\n');
  });
  test('client ids are 40 letters and digits, each different', () => {
    const ids = new Set(Array.from({ length: 100 }, () => newClientId()));
    expect(ids.size).toBe(100);
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9]{40}$/);
  });
});
