import { describe, expect, test } from '@jest/globals';
import { acceptsOperation, parseModifierKey } from '../../../lib/schema/field-modifiers.js';
import { declareField } from './fields/declare-field.js';

describe('parseModifierKey', () => {
  test.each([
    ['tags+', { name: 'tags', kind: 'append' }],
    ['+tags', { name: 'tags', kind: 'prepend' }],
    ['tags-', { name: 'tags', kind: 'remove' }],
    ['code:autogenerate', { name: 'code', kind: 'autogenerate' }],
    // Names no field can have: ignored as unknown keys by the callers.
    [':autogenerate', { name: ':autogenerate', kind: 'set' }],
    ['code:autogenerate+', { name: 'code:autogenerate', kind: 'append' }],
    ['code:Autogenerate', { name: 'code:Autogenerate', kind: 'set' }],
    ['title', { name: 'title', kind: 'set' }],
  ])('%j', (key, expected) => {
    expect(parseModifierKey(key)).toEqual(expected);
  });
});

describe('acceptsOperation for :autogenerate', () => {
  test('a text field takes it, with or without an autogeneratePattern; other types do not', () => {
    expect(acceptsOperation(declareField({ type: 'text', autogeneratePattern: '[a-z]{3}' }), 'autogenerate')).toBe(true);
    expect(acceptsOperation(declareField({ type: 'text' }), 'autogenerate')).toBe(true);
    for (const field of [{ type: 'number' }, { type: 'editor' }, { type: 'email' }, { type: 'select', values: ['a'] }, { type: 'json' }]) {
      expect(acceptsOperation(declareField(field), 'autogenerate')).toBe(false);
    }
  });
});
