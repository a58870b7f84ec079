import { describe, expect, test } from '@jest/globals';
import { declareField, testRefusedSettings } from './declare-field.js';

describe('the autodate field type', () => {
  testRefusedSettings([
    ['autodate without onCreate or onUpdate', { type: 'autodate' }, /needs onCreate or onUpdate/],
    ['autodate with both off', { type: 'autodate', onCreate: false, onUpdate: false }, /needs onCreate or onUpdate/],
    ['autodate required', { type: 'autodate', onCreate: true, required: true }, /required does not apply/],
    ['autodate onCreate not a boolean', { type: 'autodate', onCreate: 'yes' }, /onCreate must be true or false/],
  ]);

  test('an autodate field stores a date', () => {
    expect(declareField({ type: 'autodate', onUpdate: true })).toMatchObject({ storage: 'date' });
  });
});
