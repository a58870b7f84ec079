import { describe, expect, test } from '@jest/globals';
import { emptyValueOf, STORAGE_KINDS, type StorageKind } from '../../../lib/schema/storage-kinds.js';
import { declareFields } from './fields/declare-field.js';

describe('the storage kinds', () => {
  const kinds = Object.keys(STORAGE_KINDS) as StorageKind[];

  test.each(kinds)('%s: a NULL column reads as the empty value, which is blank, and a fresh one each time', (kind) => {
    const spec = STORAGE_KINDS[kind];
    expect(spec.readColumn(null)).toEqual(spec.emptyValue());
    expect(spec.isBlank(spec.emptyValue())).toBe(true);
    const a = spec.emptyValue();
    if (typeof a === 'object' && a !== null) expect(spec.emptyValue()).not.toBe(a);
  });

  test.each(kinds)('%s: never NULL exactly when the column is NOT NULL, and only then is a missing row filled', (kind) => {
    const spec = STORAGE_KINDS[kind];
    expect(spec.columnDdl.includes('NOT NULL')).toBe(spec.neverNull);
    const missing = { sql: '(SELECT NULL)', bindings: [] };
    expect(spec.fillEmptySql(missing) === missing).toBe(!spec.neverNull);
  });
});

describe('emptyValueOf', () => {
  // One field of each type, and the list types multi-valued: the empty value follows the storage kind.
  const posts = declareFields(
    { name: 'title', type: 'text' },
    { name: 'contact', type: 'email' },
    { name: 'site', type: 'url' },
    { name: 'status', type: 'select', values: ['draft'] },
    { name: 'author', type: 'relation', collection: 't' },
    { name: 'cover', type: 'file', maxSelect: 1 },
    { name: 'tags', type: 'select', values: ['a'], maxSelect: 3 },
    { name: 'readers', type: 'relation', collection: 't', maxSelect: 2 },
    { name: 'docs', type: 'file', maxSelect: 2 },
    { name: 'published', type: 'bool' },
    { name: 'views', type: 'number' },
    { name: 'publishedAt', type: 'date' },
    { name: 'meta', type: 'json' },
  );

  test.each([
    ['title', ''],
    ['contact', ''],
    ['site', ''],
    ['status', ''],
    ['author', ''],
    ['cover', ''],
    ['tags', []],
    ['readers', []],
    ['docs', []],
    ['published', false],
    ['views', null],
    ['publishedAt', null],
    ['meta', null],
  ])('%s -> %p', (name, expected) => {
    expect(emptyValueOf(posts.field(name)!)).toEqual(expected);
  });

  test('each call returns a fresh array', () => {
    const a = emptyValueOf(posts.field('tags')!) as string[];
    a.push('x');
    expect(emptyValueOf(posts.field('tags')!)).toEqual([]);
  });
});
