import { planDatabaseSync, syncDatabaseSchema } from '../../lib/db/schema/sync-database-schema.js';
import { SchemaError } from '../../lib/errors.js';
import { buildSchemaRegistry } from '../../lib/schema/collection-schema.js';
import type { CollectionDefinition } from '../../lib/index.js';
import { blogCollections } from '../support/demo-collections.js';
import { openTestDatabase, testEngines, type TestDatabase } from '../support/test-database.js';

const collections = (defs: CollectionDefinition[]) => buildSchemaRegistry(defs).collections;

describe.each(testEngines())('schema sync on %s', (engine) => {
  let database: TestDatabase;
  beforeEach(async () => {
    database = await openTestDatabase(engine);
  });
  afterEach(async () => {
    await database?.destroy();
  });

  async function columnsOf(table: string): Promise<Record<string, { type: string; nullable: string; default: string | null }>> {
    const rows: { column_name: string; data_type: string; is_nullable: string; column_default: string | null }[] = await database.db
      .select('column_name', 'data_type', 'is_nullable', 'column_default')
      .from('information_schema.columns')
      .whereRaw('table_schema = current_schema()')
      .andWhere('table_name', table);
    return Object.fromEntries(rows.map((r) => [r.column_name, { type: r.data_type, nullable: r.is_nullable, default: r.column_default }]));
  }

  async function indexesOf(table: string): Promise<Record<string, string>> {
    const rows: { indexname: string; indexdef: string }[] = await database.db
      .select('indexname', 'indexdef')
      .from('pg_indexes')
      .whereRaw('schemaname = current_schema()')
      .andWhere('tablename', table);
    return Object.fromEntries(rows.map((r) => [r.indexname, r.indexdef]));
  }

  test('creates tables with one column per field, typed by storage', async () => {
    await syncDatabaseSchema(database.db, collections(blogCollections()));
    const posts = await columnsOf('posts');
    expect(Object.keys(posts).sort()).toEqual(
      ['id', 'created', 'updated', 'title', 'body', 'slug', 'views', 'score', 'published', 'publishedAt', 'contact', 'site', 'category', 'tags', 'meta', 'author', 'editors', 'cover', 'secret'].sort(),
    );
    expect(posts.id.type).toBe('text');
    expect(posts.created).toMatchObject({ type: 'timestamp with time zone', nullable: 'NO' });
    expect(posts.title).toMatchObject({ type: 'text', nullable: 'NO' });
    expect(posts.views).toMatchObject({ type: 'double precision', nullable: 'YES' });
    expect(posts.published).toMatchObject({ type: 'boolean', nullable: 'NO' });
    expect(posts.publishedAt).toMatchObject({ type: 'timestamp with time zone', nullable: 'YES' });
    expect(posts.tags).toMatchObject({ type: 'jsonb', nullable: 'NO' });
    expect(posts.meta).toMatchObject({ type: 'jsonb', nullable: 'YES' });
    expect(posts.author).toMatchObject({ type: 'text', nullable: 'NO' });
  });

  test('indexes created, relation columns and multi-valued fields without asking, plus declared ones', async () => {
    await syncDatabaseSchema(database.db, collections(blogCollections()));
    const indexes = await indexesOf('posts');
    expect(indexes.idx_posts_created).toContain('(created, id)');
    expect(indexes.idx_posts_author).toContain('(author)');
    expect(indexes.idx_posts_editors_gin).toContain('USING gin (editors)');
    expect(indexes.idx_posts_tags_gin).toContain('USING gin (tags)');
    expect(indexes.idx_posts_views).toContain('(views)');
    expect(indexes.idx_posts_slug_uniq).toMatch(/CREATE UNIQUE INDEX .* \(slug\) WHERE \(slug <> ''::text\)/);
  });

  test('a second sync plans nothing', async () => {
    const defs = collections(blogCollections());
    await syncDatabaseSchema(database.db, defs);
    const plan = await planDatabaseSync(database.db, defs);
    expect(plan.statements).toEqual([]);
    expect(plan.applied.size).toBe(0);
  });

  test('a new field becomes a new column; existing rows get its empty value', async () => {
    const v1: CollectionDefinition[] = [{ name: 'notes', fields: [{ name: 'text', type: 'text' }] }];
    await syncDatabaseSchema(database.db, collections(v1));
    await database.db('notes').insert({ id: 'aaaaaaaaaaaaaaa', text: 'old' });
    const v2: CollectionDefinition[] = [{ name: 'notes', fields: [{ name: 'text', type: 'text' }, { name: 'done', type: 'bool' }, { name: 'labels', type: 'select', values: ['x'], maxSelect: 3 }] }];
    const plan = await syncDatabaseSchema(database.db, collections(v2));
    expect(plan.statements).toContain('ALTER TABLE "notes" ADD COLUMN "done" boolean NOT NULL DEFAULT false');
    const row = await database.db('notes').first();
    expect(row).toMatchObject({ text: 'old', done: false, labels: [] });
  });

  test.each([
    ['a type change between column types', { name: 'n', type: 'number' }, 'field "text": type change'],
    ['a type change within one column type', { name: 'text', type: 'email' }, 'field "text": type change from text to email'],
    ['single to multiple', { name: 'text', type: 'select', values: ['a'], maxSelect: 2 }, 'field "text": type change'],
  ] as const)('refuses %s, naming collection and field, and changes nothing', async (_label, changed, message) => {
    await syncDatabaseSchema(database.db, collections([{ name: 'notes', fields: [{ name: 'text', type: 'text' }] }]));
    const fields = changed.name === 'text' ? [changed] : [{ name: 'text', type: 'number' } as const];
    const attempt = syncDatabaseSchema(database.db, collections([{ name: 'notes', fields: fields as CollectionDefinition['fields'] }]));
    await expect(attempt).rejects.toThrow(SchemaError);
    await expect(attempt).rejects.toThrow(`collection "notes", ${message}`);
    expect((await columnsOf('notes')).text.type).toBe('text');
  });

  test('a field no longer declared keeps its column, left alone and named in one info line', async () => {
    await syncDatabaseSchema(database.db, collections([{ name: 'notes', fields: [{ name: 'text', type: 'text' }, { name: 'keep', type: 'text' }] }]));
    const lines: string[] = [];
    const plan = await syncDatabaseSchema(database.db, collections([{ name: 'notes', fields: [{ name: 'text', type: 'text' }] }]), { logger: { info: (line) => lines.push(line) } });
    expect(plan.statements).toEqual([]);
    expect(lines).toEqual([expect.stringContaining('left alone') as string]);
    expect(lines[0]).toContain('column "notes"."keep"');
    expect(await columnsOf('notes')).toHaveProperty('keep');
  });

  test('names every refused change at once, across fields and collections, and changes nothing', async () => {
    const v1: CollectionDefinition[] = [
      { name: 'notes', fields: [{ name: 'a', type: 'text' }, { name: 'b', type: 'number' }, { name: 'c', type: 'bool' }, { name: 'd', type: 'text' }] },
      { name: 'tasks', fields: [{ name: 'done', type: 'bool' }] },
    ];
    await syncDatabaseSchema(database.db, collections(v1));
    const v2: CollectionDefinition[] = [
      { name: 'notes', fields: [{ name: 'a', type: 'number' }, { name: 'b', type: 'text' }, { name: 'd', type: 'email' }, { name: 'e', type: 'text' }] },
      { name: 'tasks', fields: [{ name: 'done', type: 'select', values: ['y'], maxSelect: 2 }] },
    ];
    const error = await syncDatabaseSchema(database.db, collections(v2)).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(SchemaError);
    const lines = (error as Error).message.split('\n');
    expect(lines).toEqual([
      '4 schema changes cannot be applied safely:',
      '- collection "notes", field "a": type change from text to number cannot be applied safely; change it in a migration (docs/collections.md, Changing your schema)',
      '- collection "notes", field "b": type change from number to text cannot be applied safely; change it in a migration (docs/collections.md, Changing your schema)',
      '- collection "notes", field "d": type change from text to email cannot be applied safely; change it in a migration (docs/collections.md, Changing your schema)',
      '- collection "tasks", field "done": type change from bool to select (multiple) cannot be applied safely; change it in a migration (docs/collections.md, Changing your schema)',
    ]);
    expect(await columnsOf('notes')).not.toHaveProperty('e');
    expect((await columnsOf('notes')).a.type).toBe('text');
  });

  test('refuses a changed collection id', async () => {
    await syncDatabaseSchema(database.db, collections([{ name: 'notes', id: 'first_id', fields: [] }]));
    await expect(syncDatabaseSchema(database.db, collections([{ name: 'notes', id: 'second_id', fields: [] }]))).rejects.toThrow('its id changed');
  });

  test('concurrent syncs of the same schema both succeed (advisory lock)', async () => {
    const defs = collections(blogCollections());
    await Promise.all([syncDatabaseSchema(database.db, defs), syncDatabaseSchema(database.db, defs)]);
    expect(Object.keys(await columnsOf('posts'))).toContain('title');
  });
});
