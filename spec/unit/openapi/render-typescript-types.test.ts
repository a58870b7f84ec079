import { describe, expect, test } from '@jest/globals';
import { buildOpenApiDocument, type OpenApiOptions } from '../../../lib/openapi/build-openapi-document.js';
import { renderTypeScriptTypes } from '../../../lib/openapi/render-typescript-types.js';
import { resolveOptions } from '../../../lib/options.js';
import { buildSchemaRegistry } from '../../../lib/schema/collection-schema.js';
import { blogCollections } from '../../support/demo-collections.js';

/** The schema version the header of rendered types names. */
function versionOf(types: string): string | undefined {
  return /\(schema version ([0-9a-f]+)\)/.exec(types)?.[1];
}

describe('the TypeScript types', () => {
  const registry = buildSchemaRegistry(blogCollections());

  test.each<[string, Partial<Pick<OpenApiOptions, 'multipartUpdate'>> & { maxPerPage?: number }]>([
    ['a default router', {}],
    ["a router with multipartUpdate: 'merge'", { multipartUpdate: 'merge' }],
    ['a router with another maxPerPage', { maxPerPage: 50 }],
  ])('name the schema version of the document built with the same options: %s', (_label, change) => {
    const resolved = resolveOptions({ collections: blogCollections(), multipartUpdate: change.multipartUpdate, limits: { maxPerPage: change.maxPerPage } }, {});
    const options = { limits: resolved.limits, multipartUpdate: resolved.multipartUpdate };
    const version = (buildOpenApiDocument(registry, options).info as { version: string }).version;
    expect(versionOf(renderTypeScriptTypes(registry, options))).toBe(version);
  });

  test('type a geoPoint as { lon: number; lat: number }, an editor as a string, leave autodate out of the bodies, and carry help as a comment', () => {
    const { limits, multipartUpdate } = resolveOptions({ collections: [] }, {});
    const places = buildSchemaRegistry([
      {
        name: 'places',
        fields: [
          { name: 'loc', type: 'geoPoint', help: 'Where it is.' },
          { name: 'seen', type: 'autodate', onCreate: true },
          { name: 'changed', type: 'autodate', onUpdate: true },
          { name: 'notes', type: 'editor', maxSize: 100, required: true },
        ],
      },
    ]);
    const types = renderTypeScriptTypes(places, { limits, multipartUpdate });
    expect(types).toContain('  /** Where it is. A point; {"lon": 0, "lat": 0} when empty. */\n  loc: { lon: number; lat: number };');
    expect(types).toContain('  loc?: { lon: number; lat: number } | null;');
    expect(types).toMatch(/seen: string \| null;/);
    expect(types).toContain('  /** YYYY-MM-DD hh:mm:ss.mmmZ (UTC), set by the server on every update (null until the first). */\n  changed: string | null;');
    expect(types).toContain('  notes: string;\n');
    expect(types).toContain('  /** HTML, kept as sent; at most 100 bytes (UTF-8). */\n  notes: string;');
    expect(types).toContain('  /** HTML, kept as sent; at most 100 bytes (UTF-8). */\n  notes?: string;');
    const bodies = types.slice(types.indexOf('export interface PlacesCreate'));
    expect(bodies.slice(0, bodies.indexOf('export interface CollectionRecords'))).not.toMatch(/seen|changed/);
  });

  test('make a field with a view rule optional in the record, and say who may set a field with a write rule (issue 46)', () => {
    const { limits, multipartUpdate } = resolveOptions({ collections: [] }, {});
    const people = buildSchemaRegistry([
      {
        name: 'people',
        fields: [
          { name: 'email', type: 'email', required: true, rules: { view: 'id = @request.auth.id' } },
          { name: 'role', type: 'text', rules: { update: null } },
        ],
      },
    ]);
    const types = renderTypeScriptTypes(people, { limits, multipartUpdate });
    const record = types.slice(types.indexOf('export interface PeopleRecord'), types.indexOf('export interface PeopleCreate'));
    expect(record).toContain("Absent where the field's view rule refuses the caller (superusers always see it), as a hidden field is. */\n  email?: string;");
    expect(record).toContain('  role: string;');
    // A create still requires what the field requires.
    expect(types).toContain('  email: string;\n  role?: string;\n}');
    expect(types).toContain('Set by superusers only: sending it otherwise answers 403. */\n  role?: string;');
  });

  test('give each collection an aggregate group and answer type, and a searched collection search in its list options (issue 47)', () => {
    const { limits, multipartUpdate } = resolveOptions({ collections: [] }, {});
    const registry = buildSchemaRegistry([
      { name: 'notes', fields: [{ name: 'title', type: 'text' }, { name: 'amount', type: 'number' }, { name: 'secret', type: 'number', hidden: true }], indexes: [{ search: ['title'] }] },
      { name: 'plain', fields: [{ name: 'title', type: 'text' }] },
    ]);
    const types = renderTypeScriptTypes(registry, { limits, multipartUpdate });
    const group = types.slice(types.indexOf('export interface NotesAggregateGroup'), types.indexOf('export type NotesAggregate ='));
    expect(group).toContain('  title?: string;');
    expect(group).toContain('  count?: number;');
    expect(group).toContain('  sum_amount?: number | null;');
    expect(group).toContain('  max_title?: string | null;');
    expect(group).not.toContain('secret');
    expect(types).toContain('export type NotesAggregate = ListResult<NotesAggregateGroup>;');
    expect(types).toContain('export type PlainAggregate = ListResult<PlainAggregateGroup>;');
    expect(types).toContain('export interface SearchListOptions extends RecordListOptions {');
    expect(types).toContain('  getList<T = R>(page?: number, perPage?: number, options?: L): Promise<ListResult<T>>;');
    expect(types).toContain('  collection(idOrName: "notes" | "pbc_2906207370"): TypedRecordService<NotesRecord, NotesCreate, NotesUpdate, SearchListOptions>;'.replace('pbc_2906207370', registry.get('notes')!.id));
    expect(types).toContain(`  collection(idOrName: "plain" | "${registry.get('plain')!.id}"): TypedRecordService<PlainRecord, PlainCreate, PlainUpdate>;`);
  });
});
