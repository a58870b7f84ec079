import { describe, expect, test } from '@jest/globals';
import { declareAsWritten } from './declare-field.js';

describe('the file field type', () => {
  test("PocketBase's spellings of an unset option are accepted and read as unset; the user's object is left as written", () => {
    const cover = { name: 'cover', type: 'file', maxSelect: 1, maxSize: 0, mimeTypes: [], thumbs: [], protected: false };
    expect(declareAsWritten(cover).definition).toEqual({ name: 'cover', type: 'file', maxSelect: 1, mimeTypes: [], thumbs: [], protected: false });
  });
});
