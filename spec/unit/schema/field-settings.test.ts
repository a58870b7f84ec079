import { describe, expect, test } from '@jest/globals';
import { SchemaError } from '../../../lib/errors.js';
import { buildSchemaRegistry, type DeclaredFieldSchema } from '../../../lib/schema/collection-schema.js';
import type { FieldDefinition } from '../../../lib/schema/definitions.js';

/** Builds one collection `c` of `fields` (and a `t` for relations to point at). */
function declare(...fields: object[]) {
  return buildSchemaRegistry([
    { name: 't', fields: [] },
    { name: 'c', fields: fields as FieldDefinition[] },
  ]).get('c')!;
}

/** The checked field `f` of a one-field collection. */
function checked(field: object): DeclaredFieldSchema {
  return declare({ name: 'f', ...field }).field('f') as DeclaredFieldSchema;
}

describe('PocketBase field options are checked when the router is created', () => {
  test.each<[string, object, RegExp]>([
    ['autodate without onCreate or onUpdate', { type: 'autodate' }, /needs onCreate or onUpdate/],
    ['autodate with both off', { type: 'autodate', onCreate: false, onUpdate: false }, /needs onCreate or onUpdate/],
    ['autodate required', { type: 'autodate', onCreate: true, required: true }, /required does not apply/],
    ['autodate onCreate not a boolean', { type: 'autodate', onCreate: 'yes' }, /onCreate must be true or false/],
    ['an autogeneratePattern it cannot generate from', { type: 'text', autogeneratePattern: '(?i)abc' }, /autogeneratePattern cannot generate values: flags and look-around are not supported at position 2/],
    ['an autogeneratePattern that is not a string', { type: 'text', autogeneratePattern: 5 }, /autogeneratePattern must be a string/],
    ['an autogeneratePattern longer than max', { type: 'text', max: 5, autogeneratePattern: '[a-z]{8}' }, /could produce values the field refuses .* such as "[a-z]{8}"/],
    ['an autogeneratePattern the pattern refuses', { type: 'text', pattern: '^[0-9]+$', autogeneratePattern: '[a-z]{3}' }, /could produce values the field refuses/],
    ['an autogeneratePattern that may produce too much', { type: 'text', autogeneratePattern: '(x{100}){100}' }, /more than 5000/],
    ['a text primaryKey', { type: 'text', primaryKey: true }, /primaryKey: the record id is recordbase's own/],
    ['a date min that is not a date', { type: 'date', min: 'tomorrow' }, /min must be a date/],
    ['a date max that is not a string', { type: 'date', max: 20240101 }, /max must be a date/],
    ['a date min after its max', { type: 'date', min: '2025-01-01', max: '2024-12-31T23:59:59Z' }, /min is after max/],
    ['both domain lists', { type: 'email', onlyDomains: ['a.example'], exceptDomains: ['b.example'] }, /set onlyDomains or exceptDomains, not both/],
    ['a domain list that is not an array', { type: 'url', onlyDomains: 'a.example' }, /onlyDomains must be an array of strings/],
    ['a domain with a port', { type: 'url', exceptDomains: ['evil.example:443'] }, /"evil.example:443" is not a domain name/],
    ['a domain with a path', { type: 'email', onlyDomains: ['a.example/x'] }, /is not a domain name/],
    ['a domain with a user part', { type: 'url', onlyDomains: ['good.example@evil.example'] }, /is not a domain name/],
    ['an empty domain', { type: 'url', onlyDomains: [''] }, /"" is not a domain name/],
    ['a minSelect over maxSelect', { type: 'relation', collection: 't', maxSelect: 3, minSelect: 4 }, /minSelect \(4\) is more than maxSelect \(3\)/],
    ['a minSelect on a single relation above 1', { type: 'relation', collection: 't', minSelect: 2 }, /minSelect \(2\) is more than maxSelect \(1\)/],
    ['a negative minSelect', { type: 'relation', collection: 't', maxSelect: 3, minSelect: -1 }, /minSelect must be a non-negative integer/],
    ['a negative editor maxSize', { type: 'editor', maxSize: -1 }, /maxSize must be a positive integer/],
    ['a fractional editor maxSize', { type: 'editor', maxSize: 1.5 }, /maxSize must be a positive integer/],
    ['a convertURLs that is not a boolean', { type: 'editor', convertURLs: 'no' }, /convertURLs must be true or false/],
    ['presentable not a boolean', { type: 'bool', presentable: 'yes' }, /presentable must be true or false/],
    ['help not a string', { type: 'text', help: 42 }, /help must be a string/],
    ['a field id not a string', { type: 'text', id: 7 }, /id must be a string/],
    ['system: true', { type: 'geoPoint', system: true }, /system fields are recordbase's own/],
    ['options on a geoPoint', { type: 'geoPoint', min: 0 }, /unknown key "min" \(known: name, type, required, hidden, presentable, help, id, system\)/],
  ])('%s is a SchemaError naming the field', (_label, field, message) => {
    let error: unknown;
    try {
      checked(field);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(SchemaError);
    expect((error as Error).message).toMatch(/^collection "c", field "f": /);
    expect((error as Error).message).toMatch(message);
  });

  test("PocketBase's spellings of an unset option are accepted and read as unset; the user's object is left as written", () => {
    const declarations = [
      { name: 'title', type: 'text', min: 0, max: 0, pattern: '', autogeneratePattern: '', primaryKey: false, help: '', presentable: false, hidden: false, required: false, system: false, id: 'text1' },
      { name: 'rating', type: 'number', min: null, max: null, onlyInt: false },
      { name: 'meta', type: 'json', maxSize: 0 },
      { name: 'cover', type: 'file', maxSelect: 1, maxSize: 0, mimeTypes: [], thumbs: [], protected: false },
      { name: 'body', type: 'editor', maxSize: 0, convertURLs: false },
      { name: 'opens', type: 'date', min: '', max: '' },
      { name: 'mail', type: 'email', onlyDomains: null, exceptDomains: null },
      { name: 'site', type: 'url', onlyDomains: [], exceptDomains: [] },
      { name: 'kind', type: 'select', values: ['a'], maxSelect: 0 },
      { name: 'rel', type: 'relation', collection: 't', maxSelect: 1, minSelect: 0, cascadeDelete: false },
      { name: 'many', type: 'relation', collection: 't', maxSelect: 999, minSelect: 0 },
    ];
    const copies = structuredClone(declarations);
    const collection = declare(...declarations);
    expect(declarations).toEqual(copies);
    const definition = (name: string) => (collection.field(name) as DeclaredFieldSchema).definition;
    expect(definition('title')).toEqual({ name: 'title', type: 'text', primaryKey: false, help: '', presentable: false, hidden: false, required: false, system: false, id: 'text1' });
    expect(definition('rating')).toEqual({ name: 'rating', type: 'number', onlyInt: false });
    expect(definition('meta')).toEqual({ name: 'meta', type: 'json' });
    expect(definition('cover')).toEqual({ name: 'cover', type: 'file', maxSelect: 1, mimeTypes: [], thumbs: [], protected: false });
    expect(definition('body')).toEqual({ name: 'body', type: 'editor', convertURLs: false });
    expect(definition('opens')).toEqual({ name: 'opens', type: 'date' });
    expect(definition('mail')).toEqual({ name: 'mail', type: 'email' });
    expect(definition('site')).toEqual({ name: 'site', type: 'url' });
    expect(collection.field('kind')).toMatchObject({ multiple: false, storage: 'text' });
    expect(collection.field('rel')).toMatchObject({ multiple: false, relationTo: 't' });
    expect(collection.field('many')).toMatchObject({ multiple: true, storage: 'array' });
  });

  test('settings are kept in one form: date bounds in the record format, domains lower case, ASCII, without a final dot', () => {
    expect(checked({ type: 'date', min: '2024-05-01', max: '2024-06-01T02:00:00+02:00' }).definition).toMatchObject({ min: '2024-05-01 00:00:00.000Z', max: '2024-06-01 00:00:00.000Z' });
    expect(checked({ type: 'email', onlyDomains: ['Example.COM.', 'bücher.example'] }).definition).toMatchObject({ onlyDomains: ['example.com', 'xn--bcher-kva.example'] });
  });

  test('the new types store what their kind says', () => {
    const collection = declare({ name: 'loc', type: 'geoPoint' }, { name: 'at', type: 'autodate', onUpdate: true }, { name: 'html', type: 'editor' });
    expect(collection.field('loc')).toMatchObject({ storage: 'geoPoint', multiple: false });
    expect(collection.field('at')).toMatchObject({ storage: 'date' });
    expect(collection.field('html')).toMatchObject({ storage: 'text' });
  });
});
