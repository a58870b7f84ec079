import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { CollectionDefinition, Migration } from '../../lib/index.js';
import { columnsOf, startRelease as start } from '../support/release-app.js';
import { openTestDatabase, testEngines, type TestDatabase } from '../support/test-database.js';

/**
 * Issue 47: a search index through the migration helpers (docs/search.md, "In the database"): a
 * renamed collection keeps its one search column and GIN index (renamed with the table, not built
 * twice); a renamed searched field makes a new search column beside the old one, which the sync
 * names as left alone until a migration drops it.
 */

const OPEN = { list: '', view: '', create: '', update: '', delete: '' };
const ID = 'pbc_search_posts';

const release = (name: string, body: string): CollectionDefinition[] => [
  { name, id: ID, fields: [{ name: 'title', type: 'text' }, { name: body, type: 'editor' }], rules: OPEN, indexes: [{ search: ['title', body], language: 'english' }] },
];

async function searchObjects(db: TestDatabase, table: string): Promise<{ columns: string[]; indexes: string[] }> {
  const columns = Object.keys(await columnsOf(db, table)).filter((c) => c.startsWith('_rb_search$')).sort();
  const rows: { indexname: string }[] = await db.db.select('indexname').from('pg_indexes').whereRaw('schemaname = current_schema()').where({ tablename: table });
  return { columns, indexes: rows.map((r) => r.indexname).filter((n) => n.startsWith('_rb_search_')).sort() };
}

describe.each(testEngines())('search indexes through migrations (%s)', (engine) => {
  let db: TestDatabase;
  let dataDir: string;

  beforeEach(async () => {
    db = await openTestDatabase(engine);
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'rb-search-migrations-'));
  });
  afterEach(async () => {
    await db.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  });

  async function seed(): Promise<void> {
    const one = await start(db, dataDir, { collections: release('posts', 'body') });
    try {
      await one.router.ready;
      await one.http.post('/backend/api/collections/posts/records').send({ title: 'Fast cars', body: '<p>They run.</p>' }).expect(200);
    } finally {
      await one.close();
    }
  }

  test('renameCollection: one search column and one GIN index, renamed with the table; the search still works', async () => {
    await seed();
    const before = await searchObjects(db, 'posts');
    const rename: Migration = { name: '001_articles', up: (m) => m.renameCollection('posts', 'articles') };
    const two = await start(db, dataDir, { collections: release('articles', 'body'), migrations: [rename] });
    try {
      await two.router.ready;
      const after = await searchObjects(db, 'articles');
      expect(after.columns).toEqual(before.columns);
      expect(after.indexes).toEqual([before.indexes[0]!.replace('_rb_search_posts_', '_rb_search_articles_')]);
      const res = await two.http.get('/backend/api/collections/articles/records').query({ search: 'car', sort: '-@rank' }).expect(200);
      expect(res.body.items.map((r: { title: string }) => r.title)).toEqual(['Fast cars']);
    } finally {
      await two.close();
    }
  });

  test('renameField of a searched field: a new search column beside the old one, named as left alone; the search works on the new one', async () => {
    await seed();
    const before = await searchObjects(db, 'posts');
    const rename: Migration = { name: '001_content', up: (m) => m.renameField('posts', 'body', 'content') };
    const two = await start(db, dataDir, { collections: release('posts', 'content'), migrations: [rename] });
    try {
      await two.router.ready;
      const after = await searchObjects(db, 'posts');
      expect(after.columns).toHaveLength(2);
      expect(after.columns).toEqual(expect.arrayContaining(before.columns));
      expect(after.indexes).toHaveLength(2);
      expect(two.logger.lines.join('\n')).toContain(`column "posts"."${before.columns[0]}"`);
      const res = await two.http.get('/backend/api/collections/posts/records').query({ search: 'run', fields: 'content:highlight' }).expect(200);
      expect(res.body.items).toEqual([{ content: 'They <mark>run</mark>.' }]);
    } finally {
      await two.close();
    }
  });
});
