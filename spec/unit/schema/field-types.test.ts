import { describe, expect, test } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { SchemaError } from '../../../lib/errors.js';
import { buildSchemaRegistry, type FieldSchema } from '../../../lib/schema/collection-schema.js';
import type { FieldDefinition, FieldType } from '../../../lib/schema/definitions.js';
import { FIELD_TYPES, findFieldType } from '../../../lib/schema/field-types.js';
import { STORAGE_KINDS } from '../../../lib/schema/storage-kinds.js';

/** A declaration of `type` with the settings it needs to be valid (select values, relation target). */
function minimalDefinition(type: FieldType, name = 'f'): FieldDefinition {
  if (type === 'select') return { name, type, values: ['a'] };
  if (type === 'relation') return { name, type, collection: 'c' };
  if (type === 'autodate') return { name, type, onCreate: true };
  return { name, type } as FieldDefinition;
}

/** docs/collections.md's field table: type -> its options, empty value and column cells. */
function readDocumentedTypes(): Map<string, { options: string[]; empty: string; column: string }> {
  const doc = readFileSync(new URL('../../../docs/collections.md', import.meta.url), 'utf8');
  const start = doc.indexOf('## Field types');
  const section = doc.slice(start, doc.indexOf('\n#', start + 1));
  const rows = new Map<string, { options: string[]; empty: string; column: string }>();
  for (const line of section.split('\n')) {
    const cells = line.split('|').map((cell) => cell.trim());
    const type = /^`(\w+)`$/.exec(cells[1] ?? '')?.[1];
    if (type === undefined) continue;
    rows.set(type, { options: [...cells[2]!.matchAll(/`(\w+)`/g)].map((m) => m[1]!), empty: cells[4]!, column: cells[5]! });
  }
  return rows;
}

/** docs/collections.md's "PocketBase field types and options" table: PocketBase type -> the row's text. */
function readParityTable(): Map<string, string> {
  const doc = readFileSync(new URL('../../../docs/collections.md', import.meta.url), 'utf8');
  const start = doc.indexOf('### PocketBase field types and options');
  const section = doc.slice(start, doc.indexOf('\n#', start + 1));
  const rows = new Map<string, string>();
  for (const line of section.split('\n')) {
    const cells = line.split('|').map((cell) => cell.trim());
    const type = /^`(\w+)`$/.exec(cells[1] ?? '')?.[1];
    if (type !== undefined) rows.set(type, cells.slice(2).join('|'));
  }
  return rows;
}

/** Every field type PocketBase has (its core/field_*.go). */
const POCKETBASE_TYPES = ['text', 'editor', 'number', 'bool', 'email', 'url', 'date', 'autodate', 'select', 'file', 'relation', 'json', 'geoPoint', 'password'];

describe('the field type registry', () => {
  test("docs/collections.md's PocketBase table has a row for each of PocketBase's types, naming each option recordbase knows", () => {
    const rows = readParityTable();
    expect([...rows.keys()].sort()).toEqual([...POCKETBASE_TYPES].sort());
    for (const spec of FIELD_TYPES) {
      // A relation's `collection` is PocketBase's `collectionId`, which the row names.
      const options = spec.keys.map((key) => (key === 'collection' ? 'collectionId' : key));
      for (const option of options) expect({ type: spec.type, option, named: rows.get(spec.type)!.includes(`\`${option}\``) }).toEqual({ type: spec.type, option, named: true });
    }
  });

  test('each type is registered once, under the name its spec carries', () => {
    const names = FIELD_TYPES.map((spec) => spec.type);
    expect(new Set(names).size).toBe(names.length);
    for (const spec of FIELD_TYPES) expect(findFieldType(spec.type)).toBe(spec);
    expect(findFieldType('geopoint')).toBeUndefined();
    expect(findFieldType('constructor')).toBeUndefined();
    expect(findFieldType(42)).toBeUndefined();
  });

  test('docs/collections.md lists every registered type with its options, empty value and column', () => {
    const documented = readDocumentedTypes();
    expect([...documented.keys()]).toEqual(FIELD_TYPES.map((spec) => spec.type));
    for (const spec of FIELD_TYPES) {
      const row = documented.get(spec.type)!;
      expect({ type: spec.type, options: row.options }).toEqual({ type: spec.type, options: [...spec.keys] });
      const single = STORAGE_KINDS[spec.storage];
      const canBeMultiple = spec.keys.includes('maxSelect');
      const empties = [single.emptyValue(), ...(canBeMultiple ? [STORAGE_KINDS.array.emptyValue()] : [])].map((v) => `\`${JSON.stringify(v)}\``);
      const columns = [single.columnDdl, ...(canBeMultiple ? [STORAGE_KINDS.array.columnDdl] : [])].map((ddl) => `\`${ddl.split(' NOT NULL')[0]}\``);
      expect({ type: spec.type, empty: row.empty, column: row.column }).toEqual({ type: spec.type, empty: empties.join(' / '), column: columns.join(' / ') });
    }
  });

  test.each(FIELD_TYPES.map((spec) => spec.type))('a %s field takes its own keys and refuses any other, naming the known ones', (type) => {
    const spec = findFieldType(type)!;
    const declare = (field: object) => buildSchemaRegistry([{ name: 'c', fields: [field as FieldDefinition] }]);
    expect(() => declare(minimalDefinition(type))).not.toThrow();
    const known = ['name', 'type', 'required', 'hidden', 'presentable', 'help', 'id', 'system', 'rules', ...spec.keys].join(', ');
    expect(() => declare({ ...minimalDefinition(type), colour: 'red' })).toThrow(new SchemaError(`collection "c", field "f": unknown key "colour" (known: ${known})`));
  });

  test('a checked field stores what its type says, and a list type with maxSelect > 1 stores an array', () => {
    const fields = FIELD_TYPES.map((spec) => minimalDefinition(spec.type, `f_${spec.type}`));
    const lists = FIELD_TYPES.filter((spec) => spec.modifiers === 'list').map((spec) => ({ ...minimalDefinition(spec.type, `many_${spec.type}`), maxSelect: 3 }) as FieldDefinition);
    const collection = buildSchemaRegistry([{ name: 'c', fields: [...fields, ...lists] }]).get('c')!;
    for (const spec of FIELD_TYPES) expect(collection.field(`f_${spec.type}`)).toMatchObject({ type: spec.type, storage: spec.storage, multiple: false });
    expect(lists.length).toBe(3);
    for (const list of lists) expect(collection.field(list.name)).toMatchObject({ storage: 'array', multiple: true });
  });

  test('a checked field is discriminated on its type: a file field reads its file settings without a cast', () => {
    const collection = buildSchemaRegistry([{ name: 'c', fields: [{ name: 'doc', type: 'file', protected: true, thumbs: ['10x10'] }] }]).get('c')!;
    const field: FieldSchema = collection.field('doc')!;
    // Compiles only because `type` narrows `definition` (the test files are type-checked).
    const settings = field.type === 'file' ? { protected: field.definition.protected, thumbs: field.definition.thumbs } : undefined;
    expect(settings).toEqual({ protected: true, thumbs: ['10x10'] });
  });
});
