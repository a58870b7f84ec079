import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { jest } from '@jest/globals';
import type { Knex } from 'knex';
import { migrateDown, migrateUp, type MigrateInput } from '../../lib/cli/migrate-command.js';
import { META_TABLE, MIGRATIONS_TABLE } from '../../lib/db/shared-names.js';
import type { CollectionDefinition, Migration } from '../../lib/index.js';
import { resolveOptions } from '../../lib/options.js';
import { compileCollections } from '../../lib/records/compile-collections.js';
import { columnsOf, startRelease as start } from '../support/release-app.js';
import { createMemoryLogger, TEST_FILE_TOKEN_SECRET } from '../support/test-app.js';
import { openTestDatabase, testEngines, type TestDatabase } from '../support/test-database.js';
import { OPEN_RULES } from '../support/open-rules.js';

/**
 * Rolling back a migration (issue 45, point 1, and two papercuts): a `down` written with the
 * helpers that name their target, run with the newer release's config by `recordbase migrate
 * down`, lets the previous release start and serve its records, and a later `up` works again;
 * a `down` that would not is refused, nothing reverted; the older release started on the newer
 * schema says it is older; `migrate --dry-run` previews the sync after the pending migrations.
 */

/** The previous release: a body, a priority held as text, an obsolete field. */
const OLD: CollectionDefinition[] = [
  {
    name: 'posts',
    fields: [
      { name: 'title', type: 'text' },
      { name: 'body', type: 'text' },
      { name: 'priority', type: 'text' },
      { name: 'obsolete', type: 'text' },
    ],
    rules: OPEN_RULES,
  },
];

/** The next release: body renamed content, priority a number, obsolete dropped, a new slug. */
const NEW: CollectionDefinition[] = [
  {
    name: 'posts',
    fields: [
      { name: 'title', type: 'text' },
      { name: 'content', type: 'text' },
      { name: 'priority', type: 'number' },
      { name: 'slug', type: 'text' },
    ],
    rules: OPEN_RULES,
  },
];

const NAME = '20261207000000_posts';
const TO_NUMBER = `CASE WHEN "priority" ~ '^[0-9]+$' THEN "priority"::double precision ELSE 0 END`;

/** The docs' migration (docs/collections.md, Rolling back a migration) with the `down` given. */
function migration(down: Migration['down']): Migration {
  return {
    name: NAME,
    async up(m) {
      await m.renameField('posts', 'body', 'content');
      await m.changeFieldType('posts', 'priority', { using: TO_NUMBER });
      await m.dropField('posts', 'obsolete');
    },
    down,
  };
}

/** A `down` of helpers that name their target: each helper's inverse. */
const mirroredDown: Migration['down'] = async (m) => {
  await m.addField('posts', { name: 'obsolete', type: 'text' });
  await m.changeFieldType('posts', 'priority', { to: 'text' });
  await m.renameField('posts', 'content', 'body');
};

/**
 * What `recordbase migrate` is given for a config of `collections` and `migrations` on the test's
 * database: the command closes its database when done, which must not close the test's Knex.
 */
function commandInput(db: TestDatabase, dataDir: string, options: { collections: CollectionDefinition[]; migrations: Migration[] }): MigrateInput {
  const database = new Proxy(db.db, { get: (target, key) => (key === 'destroy' ? async () => undefined : Reflect.get(target, key)) }) as Knex;
  const resolved = resolveOptions({ ...options, database, dataDir, logger: createMemoryLogger(), fileTokenSecret: TEST_FILE_TOKEN_SECRET });
  return { config: { options: resolved, compiled: compileCollections(resolved.collections) }, configFile: 'recordbase.config.ts' };
}

/** What `work` prints with console.log, line by line. */
async function printed(work: () => Promise<void>): Promise<string[]> {
  const lines: string[] = [];
  const spy = jest.spyOn(console, 'log').mockImplementation((...args: unknown[]) => void lines.push(args.join(' ')));
  try {
    await work();
  } finally {
    spy.mockRestore();
  }
  return lines.join('\n').split('\n');
}

async function recordedFields(db: TestDatabase): Promise<{ name: string; type: string }[]> {
  const row: { fields: { name: string; type: string; multiple: boolean }[] } = await db.db.first('fields').from(META_TABLE).where({ name: 'posts' });
  return row.fields.map((f) => ({ name: f.name, type: f.type })).sort((a, b) => a.name.localeCompare(b.name));
}

async function appliedMigrations(db: TestDatabase): Promise<string[]> {
  return ((await db.db.select('name').from(MIGRATIONS_TABLE)) as { name: string }[]).map((row) => row.name);
}

describe.each(testEngines())('rolling back migrations on %s', (engine) => {
  let db: TestDatabase;
  let dataDir: string;

  beforeEach(async () => {
    db = await openTestDatabase(engine);
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'rb-rollback-'));
  });
  afterEach(async () => {
    await db.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** The previous release serving two posts. */
  async function seedOld(): Promise<void> {
    const old = await start(db, dataDir, { collections: OLD });
    try {
      await old.router.ready;
      await old.http.post('/backend/api/collections/posts/records').send({ title: 'a', body: 'hello', priority: '3', obsolete: 'x' }).expect(200);
      await old.http.post('/backend/api/collections/posts/records').send({ title: 'b', body: 'world', priority: '', obsolete: '' }).expect(200);
    } finally {
      await old.close();
    }
  }

  /** Starts the newer release with `down`'s migration and checks it serves the converted posts (the two seeded ones). */
  async function upgrade(down: Migration['down']): Promise<void> {
    const next = await start(db, dataDir, { collections: NEW, migrations: [migration(down)] });
    try {
      await next.router.ready;
      const list = await next.http.get('/backend/api/collections/posts/records').query({ sort: 'title', filter: "title != 'c'" }).expect(200);
      expect(list.body.items.map((r: Record<string, unknown>) => [r.title, r.content, r.priority, r.obsolete])).toEqual([
        ['a', 'hello', 3, undefined],
        ['b', 'world', 0, undefined],
      ]);
    } finally {
      await next.close();
    }
  }

  /** Starts the previous release (no migrations), which must serve the posts as `rows` (after the round trip: obsolete's values gone, priority through a number). */
  async function expectOldServes(rows: string[][] = [['a', 'hello', '3', ''], ['b', 'world', '0', '']]): Promise<void> {
    const old = await start(db, dataDir, { collections: OLD });
    try {
      await old.router.ready;
      const list = await old.http.get('/backend/api/collections/posts/records?sort=title').expect(200);
      expect(list.body.items.map((r: Record<string, unknown>) => [r.title, r.body, r.priority, r.obsolete])).toEqual(rows);
      await old.http.post('/backend/api/collections/posts/records').send({ title: 'c', body: 'new', priority: 'high', obsolete: 'y' }).expect(200);
    } finally {
      await old.close();
    }
  }

  test('renameField, changeFieldType and dropField undone by renameField, changeFieldType({ to }) and addField, run with the newer config: the previous release starts and serves its records, and the up works again', async () => {
    await seedOld();
    await upgrade(mirroredDown);
    const reverted = await printed(() => migrateDown(commandInput(db, dataDir, { collections: NEW, migrations: [migration(mirroredDown)] })));
    expect(reverted).toEqual([`reverted migration ${NAME}`]);
    expect(await columnsOf(db, 'posts')).toMatchObject({ body: 'text', priority: 'text', obsolete: 'text', slug: 'text' });
    expect(await recordedFields(db)).toEqual([
      { name: 'body', type: 'text' },
      { name: 'obsolete', type: 'text' },
      { name: 'priority', type: 'text' },
      { name: 'slug', type: 'text' },
      { name: 'title', type: 'text' },
    ]);
    expect(await appliedMigrations(db)).toEqual([]);
    await expectOldServes();
    // The up again, on what the rollback left (the old release's new post included).
    const next = await start(db, dataDir, { collections: NEW, migrations: [migration(mirroredDown)] });
    try {
      await next.router.ready;
      const list = await next.http.get('/backend/api/collections/posts/records?sort=title').expect(200);
      expect(list.body.items.map((r: Record<string, unknown>) => [r.title, r.content, r.priority])).toEqual([
        ['a', 'hello', 3],
        ['b', 'world', 0],
        ['c', 'new', 0],
      ]);
    } finally {
      await next.close();
    }
  }, 120_000);

  test("a down whose m.sql changes the column's type is refused until it records the type with changeFieldType({ to }), which then converts nothing; nothing of a refused down is reverted", async () => {
    await seedOld();
    const sqlOnly: Migration['down'] = async (m) => {
      await m.addField('posts', { name: 'obsolete', type: 'text' });
      await m.sql(`ALTER TABLE "posts" ALTER COLUMN "priority" TYPE text USING COALESCE("priority"::text, ''), ALTER COLUMN "priority" SET DEFAULT '', ALTER COLUMN "priority" SET NOT NULL`);
      await m.renameField('posts', 'content', 'body');
    };
    await upgrade(sqlOnly);
    const refused = migrateDown(commandInput(db, dataDir, { collections: NEW, migrations: [migration(sqlOnly)] }));
    await expect(refused).rejects.toThrow(`migration "${NAME}" (down) failed and was rolled back, nothing of it applied: the down leaves a schema the release before "${NAME}" cannot start on`);
    await expect(refused).rejects.toThrow(
      `collection "posts", field "priority": recorded as number (a double precision column), but its column is text; after SQL that changes a column's type, record the field's type with m.changeFieldType("posts", "priority", { to: '<type>' })`,
    );
    // Nothing reverted: the column, the rename, the dropped field, the migration's row.
    expect(await columnsOf(db, 'posts')).toMatchObject({ content: 'text', priority: 'double precision' });
    expect(await columnsOf(db, 'posts')).not.toHaveProperty('obsolete');
    expect(await appliedMigrations(db)).toEqual([NAME]);

    const recorded: Migration['down'] = async (m) => {
      await sqlOnly!(m);
      await m.changeFieldType('posts', 'priority', { to: 'text' });
    };
    expect(await printed(() => migrateDown(commandInput(db, dataDir, { collections: NEW, migrations: [migration(recorded)] })))).toEqual([`reverted migration ${NAME}`]);
    await expectOldServes();
    await upgrade(recorded);
    expect(await columnsOf(db, 'posts')).toMatchObject({ content: 'text', priority: 'double precision' });
    expect(await appliedMigrations(db)).toEqual([NAME]);
  }, 120_000);

  test("the issue's down (changeFieldType without to) fails saying to name the type, and a down that leaves the type changed is refused naming the field and the fix; the previous release's start then says it is older than the database", async () => {
    await seedOld();
    const withoutTo: Migration['down'] = async (m) => {
      await m.addField('posts', { name: 'obsolete', type: 'text' });
      await m.changeFieldType('posts', 'priority', { using: `"priority"::text` });
      await m.renameField('posts', 'content', 'body');
    };
    await upgrade(withoutTo);
    await expect(migrateDown(commandInput(db, dataDir, { collections: NEW, migrations: [migration(withoutTo)] }))).rejects.toThrow(
      `changeFieldType("posts", "priority"): in a down, name the type to convert back to ({ to: 'number' }`,
    );
    const forgetsType: Migration['down'] = async (m) => {
      await m.addField('posts', { name: 'obsolete', type: 'text' });
      await m.renameField('posts', 'content', 'body');
    };
    await expect(migrateDown(commandInput(db, dataDir, { collections: NEW, migrations: [migration(forgetsType)] }))).rejects.toThrow(
      `collection "posts", field "priority": the release before has it as text, but it is number; convert it back in the down: m.changeFieldType("posts", "priority", { to: 'text' })`,
    );
    expect(await appliedMigrations(db)).toEqual([NAME]);
    expect(await columnsOf(db, 'posts')).toMatchObject({ content: 'text', priority: 'double precision' });

    // The previous release started on the newer schema: refused, saying this code is older and what to do;
    // with migrations of its own (none of them the newer one), a warning names the migration it lacks.
    const old = await start(db, dataDir, { collections: OLD, migrations: [] });
    try {
      await expect(old.router.ready).rejects.toThrow(
        `collection "posts", field "priority": this code declares it text, as the database held it before migration "${NAME}" changed it: this code is older than the database. Deploy the newer release's code, or revert "${NAME}" first with \`recordbase migrate down\``,
      );
      expect(old.logger.lines).toContain(
        `migrations: the database has applied "${NAME}", which this code does not have: this code is older than the database (or their files were removed). Deploy the newer release, or revert them first with \`recordbase migrate down\`, run with the newer release's migrations (docs/collections.md, Rolling back a migration)`,
      );
    } finally {
      await old.close();
    }
  }, 120_000);

  test('renameCollection undone by renameCollection, run with the newer config: the previous release serves its records under the old name', async () => {
    await seedOld();
    const id = ((await db.db.first('id').from(META_TABLE).where({ name: 'posts' })) as { id: string }).id;
    const renamed: CollectionDefinition[] = [{ ...OLD[0]!, name: 'articles', id }];
    const rename: Migration = { name: '001_articles', up: (m) => m.renameCollection('posts', 'articles'), down: (m) => m.renameCollection('articles', 'posts') };
    const next = await start(db, dataDir, { collections: renamed, migrations: [rename] });
    try {
      await next.router.ready;
      expect((await next.http.get('/backend/api/collections/articles/records').expect(200)).body.totalItems).toBe(2);
    } finally {
      await next.close();
    }
    expect(await printed(() => migrateDown(commandInput(db, dataDir, { collections: renamed, migrations: [rename] })))).toEqual(['reverted migration 001_articles']);
    await expectOldServes([['a', 'hello', '3', 'x'], ['b', 'world', '', '']]);
  }, 120_000);

  test('attack: helpers refuse what they are given wrong, naming it, and the migration fails whole', async () => {
    await seedOld();
    const cases: [Migration['up'], string][] = [
      [(m) => m.changeFieldType('posts', 'priority', { to: 'nonsense' as never }), 'changeFieldType("posts", "priority"): collection "posts", field "priority": unknown type "nonsense"'],
      [(m) => m.changeFieldType('posts', 'priority', { to: null as never }), `changeFieldType("posts", "priority"): a field type is a type's name ('number') or a definition`],
      [(m) => m.changeFieldType('posts', 'priority', { to: { name: 'other', type: 'text' } as never }), 'the definition names the field "other"; leave its name out'],
      [(m) => m.changeFieldType('posts', 'priority', { to: { type: 'select' } as never }), 'changeFieldType("posts", "priority"): collection "posts", field "priority"'],
      [(m) => m.addField('posts', { name: 'id', type: 'text' }), '"id" is a system field'],
      [(m) => m.addField('posts', { name: 'a"; DROP TABLE posts; --', type: 'text' }), 'is not a valid field name'],
      [(m) => m.addField('posts', { name: 'body', type: 'text' }), 'collection "posts" already has a column "body"'],
      [(m) => m.addField('posts', null as never), 'addField("posts", undefined): the field must be a definition'],
      [(m) => m.addField('nowhere', { name: 'x', type: 'text' }), 'there is no collection "nowhere" in the database'],
    ];
    for (const [up, message] of cases) {
      const router = await start(db, dataDir, { collections: OLD, migrations: [{ name: 'bad', up }] });
      try {
        await expect(router.router.ready).rejects.toThrow(message);
      } finally {
        await router.close();
      }
    }
    expect(Object.keys(await columnsOf(db, 'posts')).sort()).toEqual(['body', 'created', 'id', 'obsolete', 'priority', 'title', 'updated']);
    expect(await recordedFields(db)).toEqual([
      { name: 'body', type: 'text' },
      { name: 'obsolete', type: 'text' },
      { name: 'priority', type: 'text' },
      { name: 'title', type: 'text' },
    ]);
  }, 120_000);

  test('migrate --dry-run with a pending migration runs it in a transaction it rolls back and prints the sync after it; a pending migration that fails fails the dry run', async () => {
    await seedOld();
    const before = await columnsOf(db, 'posts');
    const lines = await printed(() => migrateUp(commandInput(db, dataDir, { collections: NEW, migrations: [migration(mirroredDown)] }), true));
    expect(lines[0]).toBe(`-- pending migrations: ${NAME} (run in a transaction rolled back: the plan below is the sync after them)`);
    // Before, the plan against the unmigrated database was refused (priority text -> number).
    expect(lines).toContain(`ALTER TABLE "posts" ADD COLUMN "slug" text NOT NULL DEFAULT '';`);
    expect(lines.join('\n')).not.toMatch(/cannot be (planned|applied)/);
    // Nothing changed: the columns, the bookkeeping, no migrations table.
    expect(await columnsOf(db, 'posts')).toEqual(before);
    expect(await recordedFields(db)).toEqual([
      { name: 'body', type: 'text' },
      { name: 'obsolete', type: 'text' },
      { name: 'priority', type: 'text' },
      { name: 'title', type: 'text' },
    ]);
    const exists: { rows: { found: boolean }[] } = await db.db.raw(`SELECT to_regclass(format('%I.%I', current_schema(), ?::text)) IS NOT NULL AS "found"`, [MIGRATIONS_TABLE]);
    expect(exists.rows[0]!.found).toBe(false);

    const failing: Migration = { name: '001_fails', up: async (m) => void (await m.sql('SELECT 1 / 0')) };
    await expect(printed(() => migrateUp(commandInput(db, dataDir, { collections: NEW, migrations: [failing] }), true))).rejects.toThrow(/migration "001_fails" failed and was rolled back, nothing of it applied: .*division by zero/);
    expect(await columnsOf(db, 'posts')).toEqual(before);
  }, 120_000);
});
