import { describe, expect, test } from '@jest/globals';
import { declareAsWritten, testRefusedSettings } from './declare-field.js';

describe('the relation field type', () => {
  testRefusedSettings([
    ['a minSelect over maxSelect', { type: 'relation', collection: 't', maxSelect: 3, minSelect: 4 }, /minSelect \(4\) is more than maxSelect \(3\)/],
    ['a minSelect on a single relation above 1', { type: 'relation', collection: 't', minSelect: 2 }, /minSelect \(2\) is more than maxSelect \(1\)/],
    ['a negative minSelect', { type: 'relation', collection: 't', maxSelect: 3, minSelect: -1 }, /minSelect must be a non-negative integer/],
  ]);

  test("PocketBase's spellings of an unset option are accepted and read as unset; the user's object is left as written", () => {
    expect(declareAsWritten({ name: 'rel', type: 'relation', collection: 't', maxSelect: 1, minSelect: 0, cascadeDelete: false })).toMatchObject({ multiple: false, relationTo: 't' });
    expect(declareAsWritten({ name: 'many', type: 'relation', collection: 't', maxSelect: 999, minSelect: 0 })).toMatchObject({ multiple: true, storage: 'array' });
  });
});
