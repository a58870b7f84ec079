import { describe, expect, test } from '@jest/globals';
import { autogenerateText } from '../../../../lib/schema/fields/text.js';
import { declareAsWritten, declareField, testRefusedSettings } from './declare-field.js';

describe('the text field type', () => {
  testRefusedSettings([
    ['an autogeneratePattern it cannot generate from', { type: 'text', autogeneratePattern: '(?i)abc' }, /autogeneratePattern cannot generate values: flags and look-around are not supported at position 2/],
    ['an autogeneratePattern that is not a string', { type: 'text', autogeneratePattern: 5 }, /autogeneratePattern must be a string/],
    ['an autogeneratePattern longer than max', { type: 'text', max: 5, autogeneratePattern: '[a-z]{8}' }, /could produce values the field refuses .* such as "[a-z]{8}"/],
    ['an autogeneratePattern the pattern refuses', { type: 'text', pattern: '^[0-9]+$', autogeneratePattern: '[a-z]{3}' }, /could produce values the field refuses/],
    ['an autogeneratePattern that may produce too much', { type: 'text', autogeneratePattern: '(x{100}){100}' }, /more than 5000/],
    ['a text primaryKey', { type: 'text', primaryKey: true }, /primaryKey is only for the field named id/],
    ['a negative text max', { type: 'text', max: -1 }, /max must be a non-negative integer/],
  ]);

  test("PocketBase's spellings of an unset option are accepted and read as unset; the user's object is left as written", () => {
    const title = { name: 'title', type: 'text', min: 0, max: 0, pattern: '', autogeneratePattern: '', primaryKey: false, help: '', presentable: false, hidden: false, required: false, system: false, id: 'text1' };
    expect(declareAsWritten(title).definition).toEqual({ name: 'title', type: 'text', primaryKey: false, help: '', presentable: false, hidden: false, required: false, system: false, id: 'text1' });
  });

  test('the :autogenerate modifier: the prefix and a generated value; the prefix alone without a pattern (PocketBase: "" is unset too)', () => {
    expect(autogenerateText(declareField({ type: 'text', autogeneratePattern: '[0-9]{4}' }), 'inv-')).toMatch(/^inv-[0-9]{4}$/);
    expect(autogenerateText(declareField({ type: 'text', autogeneratePattern: '[0-9]{4}' }), '')).toMatch(/^[0-9]{4}$/);
    expect(autogenerateText(declareField({ type: 'text' }), 'inv-')).toBe('inv-');
    expect(autogenerateText(declareField({ type: 'text', autogeneratePattern: '' }), 'inv-')).toBe('inv-');
  });
});
