import { describe, expect, test } from '@jest/globals';
import { declareAsWritten, declareField, testRefusedSettings } from './declare-field.js';

describe('the editor field type', () => {
  testRefusedSettings([
    ['a negative editor maxSize', { type: 'editor', maxSize: -1 }, /maxSize must be a positive integer/],
    ['a fractional editor maxSize', { type: 'editor', maxSize: 1.5 }, /maxSize must be a positive integer/],
    ['a convertURLs that is not a boolean', { type: 'editor', convertURLs: 'no' }, /convertURLs must be true or false/],
  ]);

  test("PocketBase's spellings of an unset option are accepted and read as unset; the user's object is left as written", () => {
    expect(declareAsWritten({ name: 'body', type: 'editor', maxSize: 0, convertURLs: false }).definition).toEqual({ name: 'body', type: 'editor', convertURLs: false });
  });

  test('an editor field stores text', () => {
    expect(declareField({ type: 'editor' })).toMatchObject({ storage: 'text' });
  });
});
