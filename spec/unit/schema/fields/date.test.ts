import { describe, expect, test } from '@jest/globals';
import { declareAsWritten, declareField, testRefusedSettings } from './declare-field.js';

describe('the date field type', () => {
  testRefusedSettings([
    ['a date min that is not a date', { type: 'date', min: 'tomorrow' }, /min must be a date/],
    ['a date max that is not a string', { type: 'date', max: 20240101 }, /max must be a date/],
    ['a date min after its max', { type: 'date', min: '2025-01-01', max: '2024-12-31T23:59:59Z' }, /min is after max/],
  ]);

  test("PocketBase's spellings of an unset option are accepted and read as unset; the user's object is left as written", () => {
    expect(declareAsWritten({ name: 'opens', type: 'date', min: '', max: '' }).definition).toEqual({ name: 'opens', type: 'date' });
  });

  test('date bounds are kept in one form: the record format', () => {
    expect(declareField({ type: 'date', min: '2024-05-01', max: '2024-06-01T02:00:00+02:00' }).definition).toMatchObject({ min: '2024-05-01 00:00:00.000Z', max: '2024-06-01 00:00:00.000Z' });
  });
});
