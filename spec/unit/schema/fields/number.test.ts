import { describe, expect, test } from '@jest/globals';
import { declareAsWritten, testRefusedSettings } from './declare-field.js';

describe('the number field type', () => {
  testRefusedSettings([['a number min that is not a number', { type: 'number', min: 'x' }, /min must be a finite number/]]);

  test("PocketBase's spellings of an unset option are accepted and read as unset; the user's object is left as written", () => {
    expect(declareAsWritten({ name: 'rating', type: 'number', min: null, max: null, onlyInt: false }).definition).toEqual({ name: 'rating', type: 'number', onlyInt: false });
  });
});
