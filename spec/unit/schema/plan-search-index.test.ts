import { buildSchemaRegistry } from '../../../lib/schema/collection-schema.js';
import type { CollectionDefinition, SearchIndexDefinition } from '../../../lib/schema/definitions.js';
import { emptyDatabaseState, planMigration, type DatabaseState } from '../../../lib/schema/plan-migration.js';
import { STORAGE_KINDS } from '../../../lib/schema/storage-kinds.js';

/** Issue 47: the schema sync's part of a search index (docs/search.md): a generated tsvector column and its GIN index. */

const posts = (search?: SearchIndexDefinition): CollectionDefinition[] => [
  { name: 'posts', fields: [{ name: 'title', type: 'text' }, { name: 'body', type: 'editor' }], indexes: search ? [search] : [] },
];
const schemaOf = (defs: CollectionDefinition[]) => buildSchemaRegistry(defs).collections;

/** The state after `statements` ran: each added column and created index recorded. */
function applied(state: DatabaseState, defs: CollectionDefinition[]): DatabaseState {
  const plan = planMigration(schemaOf(defs), state);
  const tables = new Map([...state.tables].map(([name, columns]) => [name, new Map(columns)]));
  const columns = tables.get('posts') ?? new Map<string, string>();
  for (const c of schemaOf(defs)) for (const f of c.fields) if (!columns.has(f.column)) columns.set(f.column, f.system && f.name !== 'id' ? 'timestamp with time zone' : STORAGE_KINDS[f.storage].dataType);
  for (const s of plan.statements) {
    const added = /ADD COLUMN IF NOT EXISTS "([^"]+)" tsvector/.exec(s);
    if (added) columns.set(added[1]!, 'tsvector');
  }
  tables.set('posts', columns);
  const indexes = new Set([...state.indexes, ...plan.statements.flatMap((s) => /INDEX IF NOT EXISTS "([^"]+)"/.exec(s)?.slice(1) ?? [])]);
  return { ...state, tables, indexes, applied: new Map([...state.applied, ...plan.applied]), metaTableExists: true, settingsTableExists: true };
}

describe('planMigration: search indexes', () => {
  const english = posts({ search: ['title', 'body'], language: 'english' });
  const [collection] = schemaOf(english);

  test('a new table gets the generated column, weighted per field over a bounded prefix, then its GIN index', () => {
    const plan = planMigration(schemaOf(english), emptyDatabaseState());
    const column = collection!.search!.column;
    expect(column).toMatch(/^_rb_search\$[0-9a-f]{8}$/);
    expect(plan.statements).toContain(
      `ALTER TABLE "posts" ADD COLUMN IF NOT EXISTS "${column}" tsvector GENERATED ALWAYS AS (` +
        `setweight(to_tsvector('english'::regconfig, left(coalesce("title", ''), 32768)), 'A') || ` +
        `setweight(to_tsvector('english'::regconfig, left(coalesce("body", ''), 32768)), 'B')) STORED`,
    );
    expect(plan.statements.at(-1)).toBe(`CREATE INDEX IF NOT EXISTS "${collection!.search!.index}" ON "posts" USING gin ("${column}")`);
  });

  test('synced: nothing more to do, and the column is not reported as left alone', () => {
    const state = applied(emptyDatabaseState(), english);
    const plan = planMigration(schemaOf(english), state);
    expect(plan.statements).toEqual([]);
    expect(plan.undeclared.columns).toEqual([]);
  });

  test('another language or field list: a new column and index beside the old ones, which are named as left alone', () => {
    const state = applied(emptyDatabaseState(), english);
    const simple = posts({ search: ['title'] });
    const plan = planMigration(schemaOf(simple), state);
    const next = schemaOf(simple)[0]!.search!;
    expect(next.column).not.toBe(collection!.search!.column);
    expect(next.language).toBe('simple');
    expect(plan.statements).toEqual([
      `ALTER TABLE "posts" ADD COLUMN IF NOT EXISTS "${next.column}" tsvector GENERATED ALWAYS AS (setweight(to_tsvector('simple'::regconfig, left(coalesce("title", ''), 32768)), 'A')) STORED`,
      `CREATE INDEX IF NOT EXISTS "${next.index}" ON "posts" USING gin ("${next.column}")`,
    ]);
    expect(plan.undeclared.columns).toEqual([{ collection: 'posts', column: collection!.search!.column }]);
  });

  test('older code without the index on a database with it: no DDL, the column left alone', () => {
    const state = applied(emptyDatabaseState(), english);
    const plan = planMigration(schemaOf(posts()), state);
    expect(plan.statements).toEqual([]);
    expect(plan.undeclared.columns).toEqual([{ collection: 'posts', column: collection!.search!.column }]);
  });

  test('the same declaration always makes the same names (a restart plans nothing)', () => {
    expect(schemaOf(english)[0]!.search).toEqual(collection!.search);
  });
});
