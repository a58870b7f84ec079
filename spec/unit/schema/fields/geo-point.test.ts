import { describe, expect, test } from '@jest/globals';
import { declareField, testRefusedSettings } from './declare-field.js';

describe('the geoPoint field type', () => {
  testRefusedSettings([['options on a geoPoint', { type: 'geoPoint', min: 0 }, /unknown key "min" \(known: name, type, required, hidden, presentable, help, id, system, rules\)/]]);

  test('a geoPoint field stores a geoPoint, one value', () => {
    expect(declareField({ type: 'geoPoint' })).toMatchObject({ storage: 'geoPoint', multiple: false });
  });
});
