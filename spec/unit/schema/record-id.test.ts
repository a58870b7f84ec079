import { describe, expect, test } from '@jest/globals';
import { generateRecordId, isRecordId, OPTIONAL_RECORD_ID_PATTERN, RECORD_ID_PATTERN } from '../../../lib/schema/record-id.js';

describe('the record id', () => {
  test('generated ids pass the check and both patterns; the optional pattern also takes ""', () => {
    for (let i = 0; i < 200; i++) {
      const id = generateRecordId();
      expect(isRecordId(id)).toBe(true);
      expect(new RegExp(RECORD_ID_PATTERN).test(id)).toBe(true);
      expect(new RegExp(OPTIONAL_RECORD_ID_PATTERN).test(id)).toBe(true);
    }
    expect(new RegExp(OPTIONAL_RECORD_ID_PATTERN).test('')).toBe(true);
    for (const bad of ['', 'ABCDEFGHIJKLMNO', 'abc', 'abcdefghijklmno1', 'abcdefghijklmn-', 42, null]) {
      expect(isRecordId(bad)).toBe(false);
    }
    expect(new RegExp(RECORD_ID_PATTERN).test('')).toBe(false);
  });
});
