import { describe, expect, test } from '@jest/globals';
import { SchemaError, ValidationError, type FieldError } from '../../../lib/errors.js';
import { readWriteOperations } from '../../../lib/records/field-operations.js';
import { normalizeWrite } from '../../../lib/records/normalize-write.js';
import { compileValidator, type RecordValidator } from '../../../lib/records/validate-record.js';
import { buildSchemaRegistry, type CollectionSchema } from '../../../lib/schema/collection-schema.js';
import type { FieldDefinition } from '../../../lib/schema/definitions.js';

/**
 * The write pipeline as the record service runs it, without a database: the body read into
 * operations per field, normalised over the existing record, then validated.
 */
function check(
  validator: RecordValidator,
  options: { input: Record<string, unknown>; existing?: Record<string, unknown>; source?: 'json' | 'multipart'; uploadedNames?: ReadonlySet<string> },
): Record<string, unknown> {
  const operations = readWriteOperations(validator.collection, { body: options.input, source: options.source ?? 'json' });
  const write = normalizeWrite(operations, options.existing);
  return validator.validate({ data: write.data, existing: options.existing, errors: write.errors, uploadedNames: options.uploadedNames });
}

const ID_A = 'aaaaaaaaaaaaaaa';
const ID_B = 'bbbbbbbbbbbbbbb';
const ID_C = 'ccccccccccccccc';

const registry = buildSchemaRegistry([
  { name: 'users', fields: [{ name: 'name', type: 'text' }] },
  {
    name: 'posts',
    fields: [
      { name: 'title', type: 'text', required: true, min: 3, max: 10 },
      { name: 'body', type: 'text' },
      { name: 'code', type: 'text', pattern: '^[A-Z]{3}$' },
      { name: 'views', type: 'number', min: 0, max: 1000, onlyInt: true },
      { name: 'score', type: 'number' },
      { name: 'published', type: 'bool' },
      { name: 'agreed', type: 'bool', required: true },
      { name: 'publishedAt', type: 'date' },
      { name: 'contact', type: 'email' },
      { name: 'site', type: 'url' },
      { name: 'status', type: 'select', values: ['draft', 'live'] },
      { name: 'tags', type: 'select', values: ['a', 'b', 'c', 'd'], maxSelect: 3 },
      { name: 'meta', type: 'json' },
      { name: 'tiny', type: 'json', maxSize: 20 },
      { name: 'author', type: 'relation', collection: 'users' },
      { name: 'readers', type: 'relation', collection: 'users', maxSelect: 2 },
      { name: 'cover', type: 'file', maxSelect: 1 },
      { name: 'docs', type: 'file', maxSelect: 2 },
    ],
  },
  {
    name: 'strict',
    fields: [
      { name: 't', type: 'text', required: true },
      { name: 'n', type: 'number', required: true },
      { name: 'b', type: 'bool', required: true },
      { name: 'd', type: 'date', required: true },
      { name: 'e', type: 'email', required: true },
      { name: 'u', type: 'url', required: true },
      { name: 's', type: 'select', values: ['x'], required: true },
      { name: 'm', type: 'select', values: ['x', 'y'], maxSelect: 2, required: true },
      { name: 'j', type: 'json', required: true },
      { name: 'r', type: 'relation', collection: 'users', required: true },
      { name: 'f', type: 'file', required: true },
    ],
  },
]);

const posts = registry.get('posts') as CollectionSchema;
const validator = compileValidator(posts);
const strictValidator = compileValidator(registry.get('strict') as CollectionSchema);

/** The smallest body that passes every required field of `posts`. */
const BASE = { title: 'Hello', agreed: true };

function create(input: Record<string, unknown>, source?: 'json' | 'multipart'): Record<string, unknown> {
  return check(validator, { input: { ...BASE, ...input }, source });
}

function update(existing: Record<string, unknown>, input: Record<string, unknown>, source?: 'json' | 'multipart'): Record<string, unknown> {
  return check(validator, { input, existing: { ...BASE, ...existing }, source });
}

/** Runs a validation expected to fail and returns the error's data. */
function errorsOf(run: () => unknown): Record<string, FieldError> {
  try {
    run();
  } catch (err) {
    if (err instanceof ValidationError) return err.data;
    throw err;
  }
  throw new Error('expected a ValidationError');
}

function codeOf(field: string, run: () => unknown): string | undefined {
  return errorsOf(run)[field]?.code;
}

function compile(fields: FieldDefinition[]): RecordValidator {
  const reg = buildSchemaRegistry([{ name: 'c', fields }]);
  return compileValidator(reg.get('c') as CollectionSchema);
}

describe('result shape', () => {
  test('a create fills every non-system field with its empty value', () => {
    expect(create({})).toEqual({
      title: 'Hello',
      body: '',
      code: '',
      views: null,
      score: null,
      published: false,
      agreed: true,
      publishedAt: null,
      contact: '',
      site: '',
      status: '',
      tags: [],
      meta: null,
      tiny: null,
      author: '',
      readers: [],
      cover: '',
      docs: [],
    });
  });

  test('an update keeps untouched values and replaces sent ones', () => {
    const out = update({ body: 'old', views: 5, tags: ['a'] }, { body: 'new' });
    expect(out).toMatchObject({ title: 'Hello', body: 'new', views: 5, tags: ['a'] });
  });

  test('system fields, unknown keys and expand are ignored silently', () => {
    const out = create({ id: 'x', created: 'x', updated: 'x', collectionId: 'x', collectionName: 'x', expand: {}, nope: 1 });
    for (const key of ['id', 'created', 'updated', 'collectionId', 'collectionName', 'expand', 'nope']) {
      expect(Object.prototype.hasOwnProperty.call(out, key)).toBe(false);
    }
  });

  test('modifiers of fields without modifiers are ignored', () => {
    expect(create({ 'body+': 'x', '+published': true, 'publishedAt-': 'x' })).toMatchObject({ body: '', published: false, publishedAt: null });
  });

  test('every failing field is reported, one error each, keyed by field name', () => {
    const data = errorsOf(() => check(validator, { input: { title: '', views: -1, contact: 'no', tags: ['z'] } }));
    expect(Object.keys(data).sort()).toEqual(['agreed', 'contact', 'tags', 'title', 'views']);
    expect(data.title).toEqual({ code: 'validation_required', message: 'Cannot be blank.' });
  });

  test('the thrown error is a 422 ValidationError', () => {
    let caught: unknown;
    try {
      check(validator, { input: {} });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ValidationError);
    expect((caught as ValidationError).status).toBe(422);
  });
});

describe('text, email, url, single select coercion', () => {
  test.each([
    ['string', 'abc', 'abc'],
    ['number', 12.5, '12.5'],
    ['true', true, 'true'],
    ['false', false, 'false'],
    ['null', null, ''],
    ['undefined', undefined, ''],
    ['empty list', [], ''],
    ['one-element list', ['x'], 'x'],
    ['list of null', [null], ''],
  ])('body: %s', (_name, raw, expected) => {
    expect(create({ body: raw }).body).toBe(expected);
  });

  test.each([
    ['object', { a: 1 }],
    ['two-element list', ['a', 'b']],
    ['nested list', [['a']]],
  ])('body: %s is validation_invalid_value', (_name, raw) => {
    expect(codeOf('body', () => create({ body: raw }))).toBe('validation_invalid_value');
  });

  test('single select with two values is validation_too_many_values', () => {
    expect(codeOf('status', () => create({ status: ['draft', 'live'] }))).toBe('validation_too_many_values');
  });

  test('strings are kept as sent (no trimming)', () => {
    expect(create({ body: '  spaced  ' }).body).toBe('  spaced  ');
  });
});

describe('text constraints', () => {
  test.each([
    ['ab', 'validation_min_text_constraint', 'Must be at least 3 character(s).'],
    ['abcdefghijk', 'validation_max_text_constraint', 'Must be no more than 10 character(s).'],
    ['', 'validation_required', 'Cannot be blank.'],
  ])('title %p -> %s', (title, code, message) => {
    expect(errorsOf(() => create({ title })).title).toEqual({ code, message });
  });

  test('lengths count characters, not UTF-16 units', () => {
    expect(create({ title: '😀😀😀' }).title).toBe('😀😀😀');
    expect(codeOf('title', () => create({ title: '😀😀😀😀😀😀😀😀😀😀😀' }))).toBe('validation_max_text_constraint');
  });

  test.each([
    ['ABC', true],
    ['', true],
    ['abc', false],
    ['ABCD', false],
  ])('pattern: %p valid=%p', (code, valid) => {
    if (valid) expect(create({ code }).code).toBe(code);
    else expect(errorsOf(() => create({ code })).code).toEqual({ code: 'validation_invalid_format', message: 'Invalid value format.' });
  });

  test('a pattern that is only valid without the unicode flag still compiles and works', () => {
    const v = compile([{ name: 'slug', type: 'text', pattern: '^[a-z\\_]+$' }]);
    expect(check(v, { input: { slug: 'a_b' } }).slug).toBe('a_b');
    expect(codeOf('slug', () => check(v, { input: { slug: 'A' } }))).toBe('validation_invalid_format');
  });
});

describe('email and url', () => {
  test.each([
    ['a@b.co', null],
    ['first.last+tag@sub.example.org', null],
    ['', null],
    ['plain', 'validation_invalid_email'],
    ['a@', 'validation_invalid_email'],
    ['a b@c.de', 'validation_invalid_email'],
  ])('email %p', (contact, code) => {
    if (code === null) expect(create({ contact }).contact).toBe(contact);
    else expect(errorsOf(() => create({ contact })).contact).toEqual({ code, message: 'Must be a valid email address.' });
  });

  test.each([
    ['https://example.com', null],
    ['http://localhost:8080/a?b=c#d', null],
    ['HTTPS://EXAMPLE.COM/x', null],
    ['', null],
    ['example.com', 'validation_invalid_url'],
    ['ftp://example.com', 'validation_invalid_url'],
    ['javascript:alert(1)', 'validation_invalid_url'],
    ['http:example.com', 'validation_invalid_url'],
    ['http://', 'validation_invalid_url'],
    [' https://example.com', 'validation_invalid_url'],
    ['https://exa mple.com', 'validation_invalid_url'],
    ['/relative/path', 'validation_invalid_url'],
  ])('url %p', (site, code) => {
    if (code === null) expect(create({ site }).site).toBe(site);
    else expect(errorsOf(() => create({ site })).site).toEqual({ code, message: 'Must be a valid url.' });
  });
});

describe('number', () => {
  test.each([
    ['integer', 7, 7],
    ['float', 2.5, 2.5],
    ['negative', -3, -3],
    ['numeric string', '12', 12],
    ['padded string', ' 4.25 ', 4.25],
    ['exponent string', '1e3', 1000],
    ['leading dot', '.5', 0.5],
    ['empty string', '', null],
    ['null', null, null],
    ['one-element list', ['3'], 3],
    ['empty list', [], null],
    ['negative zero', -0, 0],
  ])('score: %s', (_name, raw, expected) => {
    expect(create({ score: raw }).score).toBe(expected);
  });

  test.each([
    ['NaN', Number.NaN],
    ['Infinity', Number.POSITIVE_INFINITY],
    ['"Infinity"', 'Infinity'],
    ['hex string', '0x10'],
    ['word', 'abc'],
    ['trailing junk', '12abc'],
    ['boolean', true],
    ['object', { n: 1 }],
    ['overflowing string', '1e999'],
    ['two-element list', [1, 2]],
  ])('score: %s is validation_invalid_number', (_name, raw) => {
    expect(errorsOf(() => create({ score: raw })).score).toEqual({ code: 'validation_invalid_number', message: 'Must be a valid number.' });
  });

  test.each([
    [-1, 'validation_min_number', 'Must be no less than 0.'],
    [1001, 'validation_max_number', 'Must be no more than 1000.'],
    [1.5, 'validation_not_integer', 'Must be an integer.'],
    ['2.5', 'validation_not_integer', 'Must be an integer.'],
  ])('views %p -> %s', (views, code, message) => {
    expect(errorsOf(() => create({ views })).views).toEqual({ code, message });
  });

  test('bounds are inclusive and 0 is a value, not empty', () => {
    expect(create({ views: 0 }).views).toBe(0);
    expect(create({ views: 1000 }).views).toBe(1000);
  });

  test('huge integers are integers (no parseInt shortcut)', () => {
    const v = compile([{ name: 'n', type: 'number', onlyInt: true }]);
    expect(check(v, { input: { n: 1e21 } }).n).toBe(1e21);
  });
});

describe('bool', () => {
  test.each([
    [true, true],
    [false, false],
    ['true', true],
    ['false', false],
    ['TRUE', true],
    ['1', true],
    ['0', false],
    ['', false],
    [1, true],
    [0, false],
    [null, false],
    [['true'], true],
  ])('%p -> %p', (raw, expected) => {
    expect(create({ published: raw }).published).toBe(expected);
  });

  test.each([['yes'], [2], [{}], [['true', 'false']]])('%p is validation_invalid_value', (raw) => {
    expect(codeOf('published', () => create({ published: raw }))).toBe('validation_invalid_value');
  });
});

describe('date', () => {
  test.each([
    ['2024-05-01 10:00:00.000Z', '2024-05-01 10:00:00.000Z'],
    ['2024-05-01 10:00:00.123Z', '2024-05-01 10:00:00.123Z'],
    ['2024-05-01T10:00:00Z', '2024-05-01 10:00:00.000Z'],
    ['2024-05-01t10:00:00z', '2024-05-01 10:00:00.000Z'],
    ['2024-05-01T10:00:00.5+02:00', '2024-05-01 08:00:00.500Z'],
    ['2024-05-01T10:00:00.123456789-05:30', '2024-05-01 15:30:00.123Z'],
    ['2024-05-01T23:30:00-0100', '2024-05-02 00:30:00.000Z'],
    ['2024-05-01T10:00+01', '2024-05-01 09:00:00.000Z'],
    ['2024-05-01 10:00:00', '2024-05-01 10:00:00.000Z'],
    ['2024-05-01', '2024-05-01 00:00:00.000Z'],
    ['2024-02-29', '2024-02-29 00:00:00.000Z'],
    ['0050-01-01', '0050-01-01 00:00:00.000Z'],
    [' 2024-05-01 ', '2024-05-01 00:00:00.000Z'],
  ])('%p -> %p', (raw, expected) => {
    expect(create({ publishedAt: raw }).publishedAt).toBe(expected);
  });

  test('a Date object is accepted', () => {
    expect(create({ publishedAt: new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 6)) }).publishedAt).toBe('2024-01-02 03:04:05.006Z');
  });

  test.each([[''], [null], [[]]])('%p clears the date', (raw) => {
    expect(update({ publishedAt: '2024-05-01 00:00:00.000Z' }, { publishedAt: raw }).publishedAt).toBeNull();
  });

  test.each([
    ['2024-02-30'],
    ['2023-02-29'],
    ['2024-13-01'],
    ['2024-05-01T24:00:00Z'],
    ['2024-05-01T10:60:00Z'],
    ['2024-05-01T10:00:60Z'],
    ['2024-05-01T10:00:00+24:00'],
    [['2024-05-01', '2024-05-02']],
    ['2024-5-1'],
    ['01/05/2024'],
    ['yesterday'],
    ['0000-01-01T00:00:00+01:00'],
    ['9999-12-31T23:00:00-02:00'],
    [1714557600000],
    [new Date(Number.NaN)],
    [{}],
  ])('%p is validation_invalid_date', (raw) => {
    expect(errorsOf(() => create({ publishedAt: raw })).publishedAt).toEqual({ code: 'validation_invalid_date', message: 'Must be a valid date.' });
  });
});

describe('multi-valued select and relation', () => {
  test.each([
    ['single string', 'a', ['a']],
    ['list', ['a', 'b'], ['a', 'b']],
    ['duplicates keep the first occurrence', ['b', 'a', 'b'], ['b', 'a']],
    ['empty string', '', []],
    ['null', null, []],
    ['empty list', [], []],
    ['empty strings in a list are dropped', ['a', '', null], ['a']],
  ])('tags: %s', (_name, raw, expected) => {
    expect(create({ tags: raw }).tags).toEqual(expected);
  });

  test.each([
    [['z'], 'validation_invalid_value', 'Invalid value "z".'],
    [['a', 'b', 'c', 'd'], 'validation_too_many_values', 'Select no more than 3.'],
    [{ a: 1 }, 'validation_invalid_value', 'Must be a list of text values.'],
    [[['a']], 'validation_invalid_value', 'Must be a list of text values.'],
  ])('tags %p -> %s', (tags, code, message) => {
    expect(errorsOf(() => create({ tags })).tags).toEqual({ code, message });
  });

  test('single select values are checked too', () => {
    expect(create({ status: 'live' }).status).toBe('live');
    expect(codeOf('status', () => create({ status: 'gone' }))).toBe('validation_invalid_value');
  });

  test.each([
    ['author', ID_A, null],
    // Validation refuses an id no collection could hold (lib/schema/record-id.ts); the record service asks the target for the rest.
    ['author', '../short', 'validation_missing_rel_records'],
    ['author', 'AAAAAAAAAAAAAA.', 'validation_missing_rel_records'],
    ['author', 'auth0|AAAAAAAAA', 'validation_missing_rel_records'],
    ['readers', [ID_A, ID_B], null],
    ['readers', [ID_A, 'bad id'], 'validation_missing_rel_records'],
    ['readers', [ID_A, ID_B, ID_C], 'validation_too_many_values'],
  ])('%s %p -> %p', (field, value, code) => {
    if (code === null) expect(create({ [field]: value })[field]).toEqual(value);
    else expect(codeOf(field, () => create({ [field]: value }))).toBe(code);
  });
});

describe('json', () => {
  test.each([
    ['object', { a: [1, { b: null }] }],
    ['array', [1, 2]],
    ['string', 'text'],
    ['number', 3],
    ['false', false],
    ['null', null],
  ])('json source takes %s as is', (_name, raw) => {
    expect(create({ meta: raw }).meta).toEqual(raw);
  });

  test('multipart source parses strings', () => {
    expect(create({ meta: '{"a":[1,2]}' }, 'multipart').meta).toEqual({ a: [1, 2] });
    expect(create({ meta: '"x"' }, 'multipart').meta).toBe('x');
    expect(create({ meta: '' }, 'multipart').meta).toBeNull();
    expect(create({ meta: { already: 'parsed' } }, 'multipart').meta).toEqual({ already: 'parsed' });
  });

  test('multipart source refuses invalid JSON text', () => {
    expect(errorsOf(() => create({ meta: '{nope' }, 'multipart')).meta).toEqual({ code: 'validation_invalid_json', message: 'Must be valid JSON.' });
  });

  test('json source keeps a string that looks like JSON as a string', () => {
    expect(create({ meta: '{"a":1}' }).meta).toBe('{"a":1}');
  });

  test('size over maxSize is validation_json_size_limit', () => {
    expect(create({ tiny: { a: 'x'.repeat(10) } }).tiny).toEqual({ a: 'xxxxxxxxxx' });
    expect(codeOf('tiny', () => create({ tiny: { a: 'x'.repeat(20) } }))).toBe('validation_json_size_limit');
  });

  test('default maxSize is 1 MiB', () => {
    expect(codeOf('meta', () => create({ meta: 'x'.repeat(1024 * 1024) }))).toBe('validation_json_size_limit');
  });

  test('values that cannot be serialised are validation_invalid_json', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(codeOf('meta', () => create({ meta: cyclic }))).toBe('validation_invalid_json');
    expect(codeOf('meta', () => create({ meta: 10n }))).toBe('validation_invalid_json');
  });
});

describe('required on create and update', () => {
  test('every empty value is refused on create', () => {
    const data = errorsOf(() => check(strictValidator, { input: {} }));
    expect(Object.keys(data).sort()).toEqual(['b', 'd', 'e', 'f', 'j', 'm', 'n', 'r', 's', 't', 'u']);
    for (const error of Object.values(data)) expect(error.code).toBe('validation_required');
  });

  test('a required bool must be true', () => {
    expect(codeOf('agreed', () => create({ agreed: false }))).toBe('validation_required');
    expect(codeOf('agreed', () => create({ agreed: 'false' }))).toBe('validation_required');
  });

  test.each([[''], [[]], [{}]])('a required json field refuses %p', (j) => {
    expect(codeOf('j', () => check(strictValidator, { input: { j } }))).toBe('validation_required');
  });

  test('a required number accepts 0', () => {
    expect(codeOf('n', () => check(strictValidator, { input: { n: 0 } }))).toBeUndefined();
  });

  test('an update that leaves required fields untouched passes', () => {
    expect(update({}, { body: 'x' }).title).toBe('Hello');
  });

  test('an update cannot clear a required field', () => {
    expect(codeOf('title', () => update({}, { title: null }))).toBe('validation_required');
    expect(codeOf('title', () => update({}, { title: '' }))).toBe('validation_required');
  });

  test('an update over a record missing a required value reports it', () => {
    expect(codeOf('title', () => check(validator, { input: { body: 'x' }, existing: { agreed: true } }))).toBe('validation_required');
  });

  test('removing the last value of a required multi-valued field is refused', () => {
    const existing = { t: 'x', n: 1, b: true, d: '2024-01-01 00:00:00.000Z', e: 'a@b.co', u: 'https://x.io', s: 'x', m: ['x'], j: 1, r: ID_A, f: 'a.png' };
    expect(check(strictValidator, { input: {}, existing })).toEqual(existing);
    expect(codeOf('m', () => check(strictValidator, { input: { 'm-': 'x' }, existing }))).toBe('validation_required');
  });
});

describe('modifiers', () => {
  test.each([
    ['append on create', {}, { 'tags+': 'a' }, ['a']],
    ['append a list', { tags: ['a'] }, { 'tags+': ['b', 'c'] }, ['a', 'b', 'c']],
    ['prepend', { tags: ['a'] }, { '+tags': 'b' }, ['b', 'a']],
    ['remove', { tags: ['a', 'b', 'c'] }, { 'tags-': ['a', 'c'] }, ['b']],
    ['remove a single string', { tags: ['a', 'b'] }, { 'tags-': 'a' }, ['b']],
    ['remove a missing value', { tags: ['a'] }, { 'tags-': 'z' }, ['a']],
    ['append de-duplicates keeping the first', { tags: ['a', 'b'] }, { 'tags+': ['a', 'c'] }, ['a', 'b', 'c']],
    ['prepend de-duplicates keeping the first', { tags: ['a', 'b'] }, { '+tags': 'b' }, ['b', 'a']],
    ['plain key first, then modifiers', { tags: ['d'] }, { 'tags-': 'a', tags: ['a', 'b'], 'tags+': 'c' }, ['b', 'c']],
    ['all three', { tags: ['b'] }, { 'tags+': 'c', '+tags': 'a', 'tags-': 'b' }, ['a', 'c']],
  ])('tags: %s', (_name, existing, input, expected) => {
    expect(update(existing, input).tags).toEqual(expected);
  });

  test('appending past maxSelect is validation_too_many_values', () => {
    expect(codeOf('tags', () => update({ tags: ['a', 'b', 'c'] }, { 'tags+': 'd' }))).toBe('validation_too_many_values');
  });

  test('appended values are validated', () => {
    expect(codeOf('tags', () => update({ tags: ['a'] }, { 'tags+': 'zz' }))).toBe('validation_invalid_value');
    expect(codeOf('readers', () => update({}, { 'readers+': 'bad/' }))).toBe('validation_missing_rel_records');
  });

  test('modifiers work on relations', () => {
    expect(update({ readers: [ID_A] }, { 'readers+': ID_B }).readers).toEqual([ID_A, ID_B]);
    expect(update({ readers: [ID_A, ID_B] }, { 'readers-': ID_A }).readers).toEqual([ID_B]);
  });

  test.each([
    ['add on create', {}, { 'views+': 1 }, 1],
    ['add', { views: 5 }, { 'views+': 2 }, 7],
    ['add a numeric string', { views: 5 }, { 'views+': '3' }, 8],
    ['subtract', { views: 5 }, { 'views-': 2 }, 3],
    ['plain then add', { views: 5 }, { views: 10, 'views+': 1 }, 11],
    ['add and subtract', { views: 5 }, { 'views+': 4, 'views-': 1 }, 8],
  ])('views: %s', (_name, existing, input, expected) => {
    expect(update(existing, input).views).toBe(expected);
  });

  test('number modifier results are validated', () => {
    expect(codeOf('views', () => update({ views: 0 }, { 'views-': 1 }))).toBe('validation_min_number');
    expect(codeOf('views', () => update({ views: 0 }, { 'views+': 0.5 }))).toBe('validation_not_integer');
  });

  test.each([[''], [null], ['abc'], [[1, 2]]])('number modifier operand %p is validation_invalid_number', (operand) => {
    expect(codeOf('views', () => update({ views: 1 }, { 'views+': operand }))).toBe('validation_invalid_number');
  });

  test('number overflow is validation_invalid_number', () => {
    expect(codeOf('score', () => update({ score: 1e308 }, { 'score+': 1e308 }))).toBe('validation_invalid_number');
  });

  test('+views is not a number modifier and is ignored', () => {
    expect(update({ views: 5 }, { '+views': 1 }).views).toBe(5);
  });

  test('single select: append sets an empty field, remove clears a matching value', () => {
    expect(create({ 'status+': 'live' }).status).toBe('live');
    expect(update({ status: 'live' }, { 'status-': 'live' }).status).toBe('');
    expect(update({ status: 'live' }, { 'status-': 'draft' }).status).toBe('live');
    expect(codeOf('status', () => update({ status: 'live' }, { 'status+': 'draft' }))).toBe('validation_too_many_values');
  });

  test('modifiers from a multipart body coerce like plain values', () => {
    expect(update({ views: 1, tags: ['a'] }, { 'views+': '2', 'tags+': ['b', 'c'] }, 'multipart')).toMatchObject({ views: 3, tags: ['a', 'b', 'c'] });
  });
});

describe('multipart source', () => {
  test('string parts are coerced to field types', () => {
    const out = create(
      { title: 'Hi there', views: '12', score: '', published: 'true', publishedAt: '2024-05-01', tags: ['a', 'b'], status: 'live', readers: ID_A, meta: '[1]' },
      'multipart',
    );
    expect(out).toMatchObject({
      title: 'Hi there',
      views: 12,
      score: null,
      published: true,
      publishedAt: '2024-05-01 00:00:00.000Z',
      tags: ['a', 'b'],
      status: 'live',
      readers: [ID_A],
      meta: [1],
    });
  });

  test('an empty part clears a multi-valued field', () => {
    expect(update({ tags: ['a'] }, { tags: '' }, 'multipart').tags).toEqual([]);
  });

  test('a single-valued field sent as a repeated part with one value takes it', () => {
    expect(create({ status: ['live'] }, 'multipart').status).toBe('live');
  });
});

describe('file fields', () => {
  const existing = { cover: 'a_1234567890.png', docs: ['d1.pdf', 'd2.pdf'] };

  test('untouched file fields keep their names', () => {
    expect(update(existing, { body: 'x' })).toMatchObject(existing);
  });

  test.each([
    ['reorder', { docs: ['d2.pdf', 'd1.pdf'] }, ['d2.pdf', 'd1.pdf']],
    ['keep one', { docs: ['d2.pdf'] }, ['d2.pdf']],
    ['clear with null', { docs: null }, []],
    ['clear with empty string', { docs: '' }, []],
    ['clear with empty list', { docs: [] }, []],
    ['remove modifier', { 'docs-': 'd1.pdf' }, ['d2.pdf']],
    ['append an existing name is a no-op', { 'docs+': 'd1.pdf' }, ['d1.pdf', 'd2.pdf']],
  ])('docs: %s', (_name, input, expected) => {
    expect(update(existing, input).docs).toEqual(expected);
  });

  test.each([
    ['clear with null', { cover: null }, ''],
    ['clear with empty string', { cover: '' }, ''],
    ['resend the same name', { cover: 'a_1234567890.png' }, 'a_1234567890.png'],
    ['remove modifier', { 'cover-': 'a_1234567890.png' }, ''],
  ])('cover: %s', (_name, input, expected) => {
    expect(update(existing, input).cover).toBe(expected);
  });

  test.each([
    ['a new name on update', { docs: ['d1.pdf', 'new.pdf'] }, 'docs'],
    ['appending a new name', { 'docs+': 'new.pdf' }, 'docs'],
    ['a new single name', { cover: 'other.png' }, 'cover'],
    ['a path', { cover: '../../etc/passwd' }, 'cover'],
  ])('%s is validation_invalid_value', (_name, input, field) => {
    expect(codeOf(field, () => update(existing, input))).toBe('validation_invalid_value');
  });

  test('any name on create is validation_invalid_value', () => {
    expect(codeOf('cover', () => create({ cover: 'x.png' }))).toBe('validation_invalid_value');
    expect(codeOf('docs', () => create({ docs: ['x.png'] }))).toBe('validation_invalid_value');
  });

  test('too many files on a single file field is validation_too_many_files', () => {
    expect(codeOf('cover', () => update(existing, { cover: ['a_1234567890.png', 'b.png'] }))).toBe('validation_too_many_files');
  });

  test('an existing list over maxSelect is validation_too_many_files once touched or not', () => {
    const over = { docs: ['d1.pdf', 'd2.pdf', 'd3.pdf'] };
    expect(codeOf('docs', () => update(over, { docs: ['d1.pdf', 'd2.pdf', 'd3.pdf'] }))).toBe('validation_too_many_files');
    expect(update(over, { 'docs-': 'd3.pdf' }).docs).toEqual(['d1.pdf', 'd2.pdf']);
  });
});

describe('existing values', () => {
  test('a Date from the driver is normalised to the record format', () => {
    const out = check(validator, { input: {}, existing: { ...BASE, publishedAt: new Date(Date.UTC(2024, 4, 1)) } });
    expect(out.publishedAt).toBe('2024-05-01 00:00:00.000Z');
  });

  test('the input and existing objects are not mutated', () => {
    const existing = { ...BASE, tags: ['a'] };
    const input = { 'tags+': 'b' };
    check(validator, { input, existing });
    expect(existing.tags).toEqual(['a']);
    expect(input).toEqual({ 'tags+': 'b' });
  });
});

describe('the normalised write: what @request.body shows and what is validated', () => {
  const read = (body: Record<string, unknown>, source: 'json' | 'multipart' = 'json') => readWriteOperations(posts, { body, source });

  test('values are coerced as validation does, unknown and system keys dropped', () => {
    const write = normalizeWrite(read({ views: '3', nope: 1, published: ' TRUE ', body: 5, created: 'x' }, 'multipart'));
    expect(write.data).toEqual({ views: 3, published: true, body: '5' });
    expect(write.errors).toEqual({});
  });

  test('modifiers are folded into their field as the value it will hold', () => {
    const existing = { ...BASE, tags: ['a'], views: 10 };
    expect(normalizeWrite(read({ 'tags+': 'b', '+tags': 'c', 'views-': '4' }), existing).data).toEqual({ tags: ['c', 'a', 'b'], views: 6 });
    expect(normalizeWrite(read({ 'status+': 'live' })).data).toEqual({ status: 'live' });
  });

  test('a single value sent as a list is unwrapped as validation does', () => {
    expect(normalizeWrite(read({ status: ['live'], published: [true] })).data).toEqual({ status: 'live', published: true });
  });

  test('a value that cannot be read is present as null, with its error', () => {
    const write = normalizeWrite(read({ views: 'abc' }));
    expect(write.data).toEqual({ views: null });
    expect(write.errors.views?.code).toBe('validation_invalid_number');
  });

  test('a sent id is there; modifiers a field does not take are not', () => {
    expect(normalizeWrite(read({ id: 'abcabcabcabcabc', 'title+': 'x', '+views': 1 })).data).toEqual({ id: 'abcabcabcabcabc' });
  });

  test('a replace-mode update clears every field it does not send, hidden ones only when asked', () => {
    const reg = buildSchemaRegistry([{ name: 'c', fields: [{ name: 'a', type: 'text' }, { name: 'n', type: 'number' }, { name: 's', type: 'text', hidden: true }] }]);
    const c = reg.get('c')!;
    const existing = { a: 'x', n: 2, s: 'secret' };
    const replace = (includeHidden: boolean) => normalizeWrite(readWriteOperations(c, { body: { a: 'y' }, source: 'multipart', clearUnsent: { includeHidden } }), existing).data;
    expect(replace(false)).toEqual({ a: 'y', n: null });
    expect(replace(true)).toEqual({ a: 'y', n: null, s: '' });
  });
});

describe('hostile input', () => {
  test('prototype keys in the input neither pollute nor crash', () => {
    const input = JSON.parse('{"__proto__": {"polluted": true}, "constructor": {"prototype": {"polluted": true}}, "title": "Hello", "agreed": true}') as Record<string, unknown>;
    const out = check(validator, { input });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.prototype.hasOwnProperty.call(out, '__proto__')).toBe(false);
    expect(Object.prototype.hasOwnProperty.call(out, 'constructor')).toBe(false);
  });

  test('prototype keys in json values stay data', () => {
    const out = create({ meta: '{"__proto__": {"polluted": true}}' }, 'multipart');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.prototype.hasOwnProperty.call(out.meta, '__proto__')).toBe(true);
  });

  test('prototype keys in existing are ignored', () => {
    const existing = JSON.parse('{"__proto__": {"body": "evil"}, "title": "Hello", "agreed": true}') as Record<string, unknown>;
    expect(check(validator, { input: {}, existing }).body).toBe('');
  });

  test('an inherited property of the input is not read', () => {
    const input = Object.create({ title: 'Inherited' }) as Record<string, unknown>;
    input.agreed = true;
    expect(codeOf('title', () => check(validator, { input }))).toBe('validation_required');
  });

  test('fields named like prototype properties work as plain fields', () => {
    const v = compile([
      { name: '__proto__', type: 'text', max: 3 },
      { name: 'constructor', type: 'number' },
      { name: 'toString', type: 'select', values: ['a'], maxSelect: 2 },
    ]);
    const input = JSON.parse('{"__proto__": "abc", "constructor": "2", "toString+": "a"}') as Record<string, unknown>;
    const out = check(v, { input });
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(out, '__proto__')?.value).toBe('abc');
    expect(out.constructor).toBe(2);
    expect(out.toString).toEqual(['a']);
    const data = errorsOf(() => check(v, { input: JSON.parse('{"__proto__": "abcd"}') as Record<string, unknown> }));
    expect(Object.getOwnPropertyDescriptor(data, '__proto__')?.value).toMatchObject({ code: 'validation_max_text_constraint' });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  test('nested objects are refused where a scalar is expected', () => {
    const deep: Record<string, unknown> = {};
    let cursor = deep;
    for (let i = 0; i < 1000; i++) cursor = (cursor.x = {}) as Record<string, unknown>;
    const data = errorsOf(() => create({ body: deep, views: deep, published: deep, publishedAt: deep, tags: deep, status: [deep], author: deep }));
    expect(Object.keys(data).sort()).toEqual(['author', 'body', 'published', 'publishedAt', 'status', 'tags', 'views']);
  });

  test('huge strings are handled quickly and quoted briefly', () => {
    const huge = 'a'.repeat(5_000_000);
    const started = Date.now();
    const data = errorsOf(() =>
      create({ title: huge, contact: huge + '@', site: 'https://' + huge + ' ', score: '1'.repeat(1_000_000) + 'x', publishedAt: huge, status: huge, author: huge, code: huge }),
    );
    expect(Date.now() - started).toBeLessThan(5000);
    expect(data.title.code).toBe('validation_max_text_constraint');
    expect(data.contact.code).toBe('validation_invalid_email');
    expect(data.site.code).toBe('validation_invalid_url');
    expect(data.score.code).toBe('validation_invalid_number');
    expect(data.publishedAt.code).toBe('validation_invalid_date');
    expect(data.status.code).toBe('validation_invalid_value');
    expect(data.status.message.length).toBeLessThan(100);
    expect(data.author.code).toBe('validation_missing_rel_records');
    expect(data.code.code).toBe('validation_invalid_format');
  });

  test('a huge list is refused by maxSelect', () => {
    const list = Array.from({ length: 100_000 }, (_, i) => `v${i}`);
    expect(codeOf('readers', () => create({ readers: list }))).toBe('validation_too_many_values');
  });
});

describe('compileValidator', () => {
  test('one validator serves many calls without state leaking between them', () => {
    expect(codeOf('title', () => create({ title: 'x' }))).toBe('validation_min_text_constraint');
    expect(create({ title: 'fine' }).title).toBe('fine');
  });
});
