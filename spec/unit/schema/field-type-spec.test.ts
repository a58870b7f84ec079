import { describe } from '@jest/globals';
import { testRefusedSettings } from './fields/declare-field.js';

describe('the keys every field type takes', () => {
  testRefusedSettings([
    ['presentable not a boolean', { type: 'bool', presentable: 'yes' }, /presentable must be true or false/],
    ['help not a string', { type: 'text', help: 42 }, /help must be a string/],
    ['a field id not a string', { type: 'text', id: 7 }, /id must be a string/],
    ['system: true', { type: 'geoPoint', system: true }, /system fields are recordbase's own/],
  ]);
});
