import { describe, expect, test } from '@jest/globals';
import { declareAsWritten, testRefusedSettings } from './declare-field.js';

describe('the json field type', () => {
  testRefusedSettings([['a fractional json maxSize', { type: 'json', maxSize: 1.5 }, /maxSize must be a non-negative integer/]]);

  test("PocketBase's spellings of an unset option are accepted and read as unset; the user's object is left as written", () => {
    expect(declareAsWritten({ name: 'meta', type: 'json', maxSize: 0 }).definition).toEqual({ name: 'meta', type: 'json' });
  });
});
