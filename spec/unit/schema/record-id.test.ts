import { describe, expect, test } from '@jest/globals';
import { SchemaError } from '../../../lib/errors.js';
import { buildSchemaRegistry } from '../../../lib/schema/collection-schema.js';
import {
  checkIdField,
  DEFAULT_RECORD_ID_FORMAT,
  generateRecordId,
  isReadableId,
  isRecordId,
  isSafeRecordId,
  MAX_RECORD_ID_LENGTH,
  OPTIONAL_RECORD_ID_PATTERN,
  OPTIONAL_SAFE_RECORD_ID_PATTERN,
  RECORD_ID_PATTERN,
  SAFE_RECORD_ID_PATTERN,
  type IdFieldDefinition,
} from '../../../lib/schema/record-id.js';

const CLERK = 'user_2NNEqL2nrIRdJ194ndJqAHwEfxC';
const FIREBASE = 'q3Xc9LmN0pR7sT2uV5wY8zA1bC4d';
const SUPABASE = '3f1c2a4e-9b7d-4c8e-a1f0-5d6e7b8c9a01';

/** Ids that would escape a folder, break a URL, a key or a topic, or name a device: none may ever be an id. */
const UNSAFE = [
  '',
  '.',
  '..',
  '../etc',
  '..%2fetc',
  'a/b',
  'a%2fb',
  '%2e%2e',
  'a\\b',
  'a\u0000b',
  'a b',
  'a\tb',
  'a\nb',
  'a.b',
  'auth0|5f7c8ec7c33c6c004bbafe82',
  'google-oauth2:1234',
  'a?b',
  'a#b',
  'a*b',
  'a$b',
  "a'b",
  'a"b',
  'a`b',
  'a<b>',
  'caf\u00e9',
  '\uff41bc', // fullwidth a
  'a\u202eb', // right-to-left override
  'CON',
  'con',
  'Nul',
  'COM1',
  'lpt9',
  'x'.repeat(MAX_RECORD_ID_LENGTH + 1),
];

describe('the record id', () => {
  test('generated default ids pass the check and both patterns; the optional pattern also takes ""', () => {
    for (let i = 0; i < 200; i++) {
      const id = generateRecordId();
      expect(isRecordId(id)).toBe(true);
      expect(isSafeRecordId(id)).toBe(true);
      expect(new RegExp(RECORD_ID_PATTERN).test(id)).toBe(true);
      expect(new RegExp(OPTIONAL_RECORD_ID_PATTERN).test(id)).toBe(true);
      expect(DEFAULT_RECORD_ID_FORMAT.check(id)).toBeNull();
    }
    expect(new RegExp(OPTIONAL_RECORD_ID_PATTERN).test('')).toBe(true);
    for (const bad of ['', 'ABCDEFGHIJKLMNO', 'abc', 'abcdefghijklmno1', 'abcdefghijklmn-', 42, null]) {
      expect(isRecordId(bad)).toBe(false);
      expect(DEFAULT_RECORD_ID_FORMAT.check(bad)).not.toBeNull();
    }
    expect(new RegExp(RECORD_ID_PATTERN).test('')).toBe(false);
  });

  test('the default format generates 15 characters of a-z0-9 and refuses a provider subject', () => {
    const id = DEFAULT_RECORD_ID_FORMAT.generate();
    expect(id).toMatch(/^[a-z0-9]{15}$/);
    expect(DEFAULT_RECORD_ID_FORMAT.check(CLERK)).toEqual({ code: 'validation_invalid_format', message: 'Must be 15 characters of a-z and 0-9.' });
    expect(DEFAULT_RECORD_ID_FORMAT.lowercaseOnly).toBe(true);
  });

  test.each(UNSAFE.map((id) => [JSON.stringify(id).slice(0, 40), id]))('never safe, whatever a collection declares: %s', (_name, id) => {
    expect(isSafeRecordId(id)).toBe(false);
    expect(new RegExp(SAFE_RECORD_ID_PATTERN).test(id) && !/^(con|prn|aux|nul|com[1-9]|lpt[1-9])$/i.test(id)).toBe(false);
    expect(isReadableId({ type: 'base' }, id)).toBe(false);
    // A pattern that takes anything does not make it an id.
    const anything = checkIdField('t', { name: 'id', type: 'text', pattern: '^[\\s\\S]*$' });
    expect(anything.check(id)).toMatchObject({ code: 'validation_invalid_format' });
  });

  test('provider subjects and uuids are safe; non-strings are not', () => {
    for (const id of [CLERK, FIREBASE, SUPABASE, 'x'.repeat(MAX_RECORD_ID_LENGTH), 'con1', 'A', '_-']) {
      expect(isSafeRecordId(id)).toBe(true);
      expect(new RegExp(SAFE_RECORD_ID_PATTERN).test(id)).toBe(true);
      expect(new RegExp(OPTIONAL_SAFE_RECORD_ID_PATTERN).test(id)).toBe(true);
    }
    expect(new RegExp(OPTIONAL_SAFE_RECORD_ID_PATTERN).test('')).toBe(true);
    for (const value of [42, null, undefined, ['a'], { id: 'a' }]) expect(isSafeRecordId(value)).toBe(false);
  });

  test('a declared id field: its pattern, bounds and generator', () => {
    const clerk = checkIdField('t', { name: 'id', type: 'text', pattern: '^user_[A-Za-z0-9]{27}$', autogeneratePattern: 'user_[A-Za-z0-9]{27}' });
    expect(clerk.check(CLERK)).toBeNull();
    expect(clerk.check('user_short')).toEqual({ code: 'validation_invalid_format', message: 'Must match ^user_[A-Za-z0-9]{27}$.' });
    expect(clerk.lowercaseOnly).toBe(false);
    for (let i = 0; i < 50; i++) expect(clerk.check(clerk.generate())).toBeNull();
    const bounded = checkIdField('t', { name: 'id', type: 'text', pattern: '^[a-z]+$', min: 3, max: 5 });
    expect(bounded.check('ab')).toMatchObject({ code: 'validation_min_text_constraint' });
    expect(bounded.check('abcdef')).toMatchObject({ code: 'validation_max_text_constraint' });
    expect(bounded.check('abcd')).toBeNull();
    // No autogeneratePattern: a create must send the id.
    expect(bounded.generate()).toBeUndefined();
    // Unset bounds: 1 to the longest id.
    const open = checkIdField('t', { name: 'id', type: 'text', pattern: '^.+$' });
    expect(open.min).toBe(1);
    expect(open.max).toBe(MAX_RECORD_ID_LENGTH);
  });

  test('PocketBase\'s export of its default id field is the default format', () => {
    const exported = { autogeneratePattern: '[a-z0-9]{15}', hidden: false, id: 'text3208210256', max: 15, min: 15, name: 'id', pattern: '^[a-z0-9]+$', presentable: false, primaryKey: true, required: true, system: true, type: 'text' } as IdFieldDefinition;
    const format = checkIdField('t', exported);
    expect(format.check(generateRecordId())).toBeNull();
    expect(format.check(CLERK)).toMatchObject({ code: 'validation_invalid_format' });
    expect(format.lowercaseOnly).toBe(true);
  });

  test.each([
    [{ pattern: '^a+$', nope: 1 }, /unknown key "nope"/],
    [{}, /needs "pattern"/],
    [{ pattern: '' }, /needs "pattern"/],
    [{ pattern: '([' }, /not a valid regular expression/],
    [{ pattern: '^.+$', max: MAX_RECORD_ID_LENGTH + 1 }, /more than 100/],
    [{ pattern: '^.+$', min: 10, max: 5 }, /less than min/],
    [{ pattern: '^.+$', min: -1 }, /min must be a whole number/],
    [{ pattern: '^.+$', max: 1.5 }, /max must be a whole number/],
    [{ pattern: '^.+$', hidden: true }, /hidden can only be false/],
    [{ pattern: '^.+$', required: false }, /required can only be true/],
    [{ pattern: '^.+$', primaryKey: false }, /primaryKey can only be true/],
    [{ pattern: '^.+$', autogeneratePattern: '[a-z]{3}\\.\\.' }, /could produce ids the settings refuse/],
    [{ pattern: '^.+$', autogeneratePattern: '[a-z/]{20}' }, /could produce ids the settings refuse/],
    [{ pattern: '^[a-z]+$', autogeneratePattern: '[0-9]{5}' }, /could produce ids the settings refuse/],
    [{ pattern: '^.+$', autogeneratePattern: '[a-z]{200}' }, /could produce ids the settings refuse/],
    [{ pattern: '^.+$', autogeneratePattern: '(' }, /autogeneratePattern cannot generate values/],
    [{ pattern: '^.+$', autogeneratePattern: 7 }, /autogeneratePattern must be a string/],
    [{ pattern: '^.+$', type: 'number' }, /of type "text"/],
  ])('a declared id field %j is refused', (settings, message) => {
    expect(() => checkIdField('collection "users", field "id"', { name: 'id', type: 'text', ...settings } as unknown as IdFieldDefinition)).toThrow(message);
  });

  test('a collection declares its id field among its fields; once only; the others keep the default', () => {
    const registry = buildSchemaRegistry([
      { name: 'users', fields: [{ name: 'id', type: 'text', pattern: '^user_[A-Za-z0-9]{27}$' }, { name: 'name', type: 'text' }] },
      { name: 'posts', fields: [{ name: 'owner', type: 'relation', collection: 'users' }] },
    ]);
    const users = registry.get('users')!;
    expect(users.recordId.check(CLERK)).toBeNull();
    expect(users.fields.map((f) => f.name)).toEqual(['id', 'created', 'updated', 'name']);
    expect(users.field('id')?.system).toBe(true);
    expect(registry.get('posts')!.recordId).toBe(DEFAULT_RECORD_ID_FORMAT);
    expect(() => buildSchemaRegistry([{ name: 'users', fields: [{ name: 'id', type: 'text', pattern: '^a+$' }, { name: 'id', type: 'text', pattern: '^b+$' }] }])).toThrow(
      new SchemaError('collection "users": the id field is declared twice'),
    );
    expect(() => buildSchemaRegistry([{ name: 'users', fields: [{ name: 'id', type: 'text', pattern: '^.+$', max: 500 }] }])).toThrow(/collection "users", field "id": max \(500\)/);
  });
});
