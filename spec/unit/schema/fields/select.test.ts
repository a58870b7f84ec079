import { describe, expect, test } from '@jest/globals';
import { declareAsWritten } from './declare-field.js';

describe('the select field type', () => {
  test("PocketBase's spellings of an unset option are accepted and read as unset; the user's object is left as written", () => {
    expect(declareAsWritten({ name: 'kind', type: 'select', values: ['a'], maxSelect: 0 })).toMatchObject({ multiple: false, storage: 'text' });
  });
});
