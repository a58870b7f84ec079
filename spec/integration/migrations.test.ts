import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { CollectionDefinition, FieldDefinition, Migration } from '../../lib/index.js';
import { META_TABLE, MIGRATIONS_TABLE } from '../../lib/db/shared-names.js';
import { listFilesUnder, makePng } from '../support/file-fixtures.js';
import { columnsOf, startRelease as start } from '../support/release-app.js';
import { openTestDatabase, testEngines, type TestDatabase } from '../support/test-database.js';

/**
 * Migrations (issue 32 items 2 and 3): each helper on a database holding records, relations,
 * files and indexes made by the previous release; a failing migration leaves nothing behind.
 */

const OPEN = { list: '', view: '', create: '', update: '', delete: '' };
const NOTES_ID = 'pbc_notes_v1';

/** The previous release: notes with a body, a number priority, an obsolete field, a file and a relation; a legacy collection. */
function releaseOne(): CollectionDefinition[] {
  return [
    { name: 'people', fields: [{ name: 'name', type: 'text' }], rules: OPEN },
    {
      name: 'notes',
      id: NOTES_ID,
      fields: [
        { name: 'title', type: 'text' },
        { name: 'body', type: 'text' },
        { name: 'priority', type: 'number' },
        { name: 'obsolete', type: 'text' },
        { name: 'tags', type: 'select', values: ['a', 'b'], maxSelect: 2 },
        { name: 'cover', type: 'file', maxSelect: 1 },
        { name: 'author', type: 'relation', collection: 'people', maxSelect: 1 },
      ],
      indexes: [{ fields: ['title'], unique: true }, { fields: ['body'] }],
      rules: OPEN,
    },
    { name: 'legacy', fields: [{ name: 'x', type: 'text' }], rules: OPEN },
  ];
}

/** The next release: notes renamed memos (its id kept), body renamed content, priority text, a new slug, obsolete and legacy gone. */
function releaseTwo(): CollectionDefinition[] {
  return [
    { name: 'people', fields: [{ name: 'name', type: 'text' }], rules: OPEN },
    {
      name: 'memos',
      id: NOTES_ID,
      fields: [
        { name: 'title', type: 'text' },
        { name: 'content', type: 'text' },
        { name: 'priority', type: 'text' },
        { name: 'tags', type: 'select', values: ['a', 'b'], maxSelect: 2 },
        { name: 'cover', type: 'file', maxSelect: 1 },
        { name: 'author', type: 'relation', collection: 'people', maxSelect: 1 },
        { name: 'slug', type: 'text', required: true },
      ],
      indexes: [{ fields: ['title'], unique: true }, { fields: ['content'] }],
      rules: OPEN,
    },
  ];
}

/** The previous release with one field of notes declared anew (another type). */
function withNotesField(field: FieldDefinition): CollectionDefinition[] {
  return releaseOne().map((c) => (c.name === 'notes' && c.type !== 'view' ? { ...c, fields: c.fields!.map((f) => (f.name === field.name ? field : f)) } : c));
}

const toReleaseTwo: Migration = {
  name: '20261201000000_memos',
  async up(m) {
    await m.renameCollection('notes', 'memos');
    await m.renameField('memos', 'body', 'content');
    await m.changeFieldType('memos', 'priority');
    await m.dropField('memos', 'obsolete');
    await m.dropCollection('legacy');
    const memos = m.records('memos');
    for (const memo of await memos.getFullList({ sort: 'title' })) await memos.update(memo.id, { slug: String(memo.title).toLowerCase().replace(/ /g, '-') });
  },
};

async function indexesOf(db: TestDatabase, table: string): Promise<string[]> {
  const rows: { indexname: string }[] = await db.db.select('indexname').from('pg_indexes').whereRaw('schemaname = current_schema()').where({ tablename: table });
  return rows.map((row) => row.indexname).sort();
}

async function tableExists(db: TestDatabase, table: string): Promise<boolean> {
  const result: { rows: { found: boolean }[] } = await db.db.raw(`SELECT to_regclass(format('%I.%I', current_schema(), ?::text)) IS NOT NULL AS "found"`, [table]);
  return result.rows[0]!.found;
}

describe.each(testEngines())('migrations on %s', (engine) => {
  let db: TestDatabase;
  let dataDir: string;

  beforeEach(async () => {
    db = await openTestDatabase(engine);
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'rb-migrations-'));
  });
  afterEach(async () => {
    await db.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** The previous release's data: a person, two notes (one with a cover). Answers what the checks compare with. */
  async function seedReleaseOne(): Promise<{ person: string; withCover: string; cover: string; png: Buffer }> {
    const one = await start(db, dataDir, { collections: releaseOne() });
    try {
      await one.router.ready;
      const person = (await one.http.post('/backend/api/collections/people/records').send({ name: 'Ada' }).expect(200)).body.id as string;
      const png = makePng(4, 3);
      const created = await one.http
        .post('/backend/api/collections/notes/records')
        .field('title', 'First Note')
        .field('body', 'hello')
        .field('priority', '3')
        .field('obsolete', 'x')
        .field('tags', 'a')
        .field('tags', 'b')
        .field('author', person)
        .attach('cover', png, 'cover.png')
        .expect(200);
      await one.http.post('/backend/api/collections/notes/records').send({ title: 'Second Note', body: 'world', priority: 1.5 }).expect(200);
      await one.http.post('/backend/api/collections/legacy/records').send({ x: 'old' }).expect(200);
      return { person, withCover: created.body.id as string, cover: created.body.cover as string, png };
    } finally {
      await one.close();
    }
  }

  test('every helper on a database with records, relations, files and indexes: the next release starts and serves them', async () => {
    const seeded = await seedReleaseOne();
    const two = await start(db, dataDir, { collections: releaseTwo(), migrations: [toReleaseTwo] });
    try {
      await two.router.ready;
      expect(two.logger.lines).toContain(`migrations: applied "${toReleaseTwo.name}"`);
      const list = await two.http.get('/backend/api/collections/memos/records?sort=title&expand=author').expect(200);
      expect(list.body.items.map((r: Record<string, unknown>) => [r.title, r.content, r.priority, r.slug, r.tags])).toEqual([
        ['First Note', 'hello', '3', 'first-note', ['a', 'b']],
        ['Second Note', 'world', '1.5', 'second-note', []],
      ]);
      expect(list.body.items[0].expand.author.name).toBe('Ada');
      expect(list.body.items[0]).not.toHaveProperty('obsolete');
      // The file keeps its key (the collection id) and is served under the new name.
      const file = await two.http.get(`/backend/api/files/memos/${seeded.withCover}/${seeded.cover}`).buffer(true).expect(200);
      expect(Buffer.compare(file.body as Buffer, seeded.png)).toBe(0);
      // Indexes followed the renames (no copy under the old names), the dropped ones are gone.
      expect(await indexesOf(db, 'memos')).toEqual(['idx_memos_content', 'idx_memos_created', 'idx_memos_title_uniq', 'idx_memos_author', 'idx_memos_tags_gin', 'memos_pkey'].sort());
      expect(await tableExists(db, 'notes')).toBe(false);
      expect(await tableExists(db, 'legacy')).toBe(false);
      expect(await columnsOf(db, 'memos')).toMatchObject({ content: 'text', priority: 'text', slug: 'text' });
      expect(await columnsOf(db, 'memos')).not.toHaveProperty('obsolete');
      // The unique index still refuses a duplicate title under its new name.
      const duplicate = await two.http.post('/backend/api/collections/memos/records').send({ title: 'First Note', slug: 's' }).expect(422);
      expect(duplicate.body.data.title.code).toBe('validation_not_unique');
      // Realtime's capture triggers went with the table.
      const triggers: { rows: { tgname: string }[] } = await db.db.raw(`SELECT tgname FROM pg_trigger WHERE tgrelid = to_regclass(format('%I.%I', current_schema(), 'memos')) AND NOT tgisinternal ORDER BY tgname`);
      expect(triggers.rows.map((r) => r.tgname)).toHaveLength(3);
      const meta: { name: string; id: string }[] = await db.db.select('name', 'id').from(META_TABLE).orderBy('name');
      expect(meta).toEqual([{ name: 'memos', id: NOTES_ID }, { name: 'people', id: expect.any(String) }]);
      const applied: { name: string }[] = await db.db.select('name').from(MIGRATIONS_TABLE);
      expect(applied).toEqual([{ name: toReleaseTwo.name }]);
    } finally {
      await two.close();
    }
    // A restart applies nothing again (the update would fail: slug is set, but the run itself must not happen).
    let ran = 0;
    const again = await start(db, dataDir, { collections: releaseTwo(), migrations: [{ ...toReleaseTwo, up: async () => void ran++ }] });
    try {
      await again.router.ready;
      expect(ran).toBe(0);
    } finally {
      await again.close();
    }
  }, 60_000);

  test('a renamed collection whose new declaration has another id is refused, naming the id to declare, and nothing changes', async () => {
    await seedReleaseOne();
    const recorded: { id: string } = await db.db.first('id').from(META_TABLE).where({ name: 'notes' });
    const collections = releaseTwo().map((c) => (c.name === 'memos' ? { ...c, id: undefined } : c));
    const two = await start(db, dataDir, { collections, migrations: [toReleaseTwo] });
    try {
      await expect(two.router.ready).rejects.toThrow(`migration "${toReleaseTwo.name}" failed and was rolled back, nothing of it applied: renameCollection("notes", "memos"): the collection keeps its id "${recorded.id}"`);
      await expect(two.router.ready).rejects.toThrow(`declare id: "${recorded.id}" on it`);
    } finally {
      await two.close();
    }
    expect(await tableExists(db, 'notes')).toBe(true);
    expect(await tableExists(db, 'memos')).toBe(false);
  }, 60_000);

  test('a failing migration rolls back: its renames, its records and their files, and its row; ready rejects naming it', async () => {
    const { withCover } = await seedReleaseOne();
    const filesBefore = listFilesUnder(path.join(dataDir, 'storage'));
    const failing: Migration = {
      name: '001_fails',
      async up(m) {
        await m.renameField('notes', 'body', 'text');
        await m.records('notes').create({ title: 'made in the migration', cover: { name: 'x.png', data: makePng(2, 2) } });
        await m.records('notes').update(withCover, { cover: null });
        await m.sql('SELECT 1 / 0');
      },
    };
    const later: Migration = { name: '002_never', up: async (m) => void (await m.sql('CREATE TABLE "never_made" ("x" int)')) };
    const router = await start(db, dataDir, { collections: releaseOne(), migrations: [later, failing] });
    try {
      await expect(router.router.ready).rejects.toThrow(/migration "001_fails" failed and was rolled back, nothing of it applied: .*division by zero/);
      const answer = await router.http.get('/backend/api/collections/notes/records').expect(503);
      expect(answer.body.message).toContain('001_fails');
    } finally {
      await router.close();
    }
    expect(await columnsOf(db, 'notes')).toHaveProperty('body');
    expect(await columnsOf(db, 'notes')).not.toHaveProperty('text');
    expect(Number((await db.db('notes').count({ n: '*' }).first())!.n)).toBe(2);
    expect(await tableExists(db, 'never_made')).toBe(false);
    // Its row was never written (the table made in its transaction went with it).
    expect(await tableExists(db, MIGRATIONS_TABLE)).toBe(false);
    // The file written for the rolled-back create is removed; the cover the update would have dropped stays.
    expect(listFilesUnder(path.join(dataDir, 'storage'))).toEqual(filesBefore);
  }, 60_000);

  test('m.sql answers the rows of its statement (of the last one in a text of several) as node-postgres reads them: jsonb parsed, timestamptz a Date; `\\?` is a question mark; a binding count that does not match is refused before anything is sent', async () => {
    const answers: Record<string, unknown>[][] = [];
    let refusal: unknown;
    const sqlMigration: Migration = {
      name: '001_sql',
      async up(m) {
        answers.push(await m.sql(`SELECT ?::int AS "n", ?::jsonb AS "j", ?::timestamptz AS "t", '2024-05-06 07:08:09.123456+00'::timestamptz AS "fine", '{"a": 1}'::jsonb \\? 'a' AS "has", ?::text[] AS "list"`, [7, JSON.stringify({ a: [1, 'x'] }), '2024-01-02T03:04:05.678Z', ['p', 'q']]));
        answers.push(await m.sql('CREATE TABLE "made" ("x" int, "at" timestamptz NOT NULL DEFAULT now()); INSERT INTO "made" ("x") VALUES (2), (1); SELECT "x" FROM "made" ORDER BY "x"'));
        answers.push(await m.sql('UPDATE "made" SET "x" = "x" + ? WHERE "x" = ?', [10, 1]));
        answers.push(await m.sql('SELECT "x", "at" FROM "made" WHERE "x" > ?', [5]));
        refusal = await m.sql('SELECT ? AS "a"', [1, 2]).catch((error: unknown) => error);
        answers.push(await m.sql('DROP TABLE "made"'));
      },
    };
    const router = await start(db, dataDir, { collections: releaseOne(), migrations: [sqlMigration] });
    try {
      await router.router.ready;
    } finally {
      await router.close();
    }
    expect(answers[0]).toEqual([{ n: 7, j: { a: [1, 'x'] }, t: new Date('2024-01-02T03:04:05.678Z'), fine: new Date('2024-05-06T07:08:09.123Z'), has: true, list: ['p', 'q'] }]);
    expect(answers[1]).toEqual([{ x: 1 }, { x: 2 }]);
    expect(answers[2]).toEqual([]);
    expect(answers[3]).toHaveLength(1);
    expect(answers[3]![0]!.x).toBe(11);
    expect(Object.prototype.toString.call(answers[3]![0]!.at)).toBe('[object Date]');
    expect(answers[4]).toEqual([]);
    expect(refusal).toBeInstanceOf(Error);
    expect((refusal as Error).message).toContain('Expected 2 bindings, saw 1');
    expect(await tableExists(db, 'made')).toBe(false);
  }, 60_000);

  test('a records() write that fails validation fails the migration with the field error', async () => {
    await seedReleaseOne();
    const invalid: Migration = { name: 'bad_write', up: async (m) => void (await m.records('notes').create({ tags: ['nope'] })) };
    const router = await start(db, dataDir, { collections: releaseOne(), migrations: [invalid] });
    try {
      await expect(router.router.ready).rejects.toThrow(/migration "bad_write" failed .*"tags":\{"code":"validation_invalid_value"/);
    } finally {
      await router.close();
    }
  }, 60_000);

  test('changeFieldType converts by default only when every value fits, and takes a using expression', async () => {
    await seedReleaseOne();
    await db.db('notes').update({ body: '12' }).where({ title: 'First Note' });
    const asNumber = withNotesField({ name: 'body', type: 'number' });
    const refused = await start(db, dataDir, { collections: asNumber, migrations: [{ name: 'a', up: (m) => m.changeFieldType('notes', 'body') }] });
    try {
      await expect(refused.router.ready).rejects.toThrow(/changeFieldType\("notes", "body"\): 1 record\(s\) hold values that do not convert from text to number without loss \(record "[a-z0-9]{15}" among them\); pass \{ using \}/);
    } finally {
      await refused.close();
    }
    expect((await columnsOf(db, 'notes')).body).toBe('text');
    const using = await start(db, dataDir, { collections: asNumber, migrations: [{ name: 'a', up: (m) => m.changeFieldType('notes', 'body', { using: `CASE WHEN "body" ~ '^[0-9]+$' THEN "body"::double precision ELSE length("body") END` }) }] });
    try {
      await using.router.ready;
      const list = await using.http.get('/backend/api/collections/notes/records?sort=title').expect(200);
      expect(list.body.items.map((r: { body: unknown }) => r.body)).toEqual([12, 5]);
      // The column is a number column now: a filter compares numbers.
      expect((await using.http.get('/backend/api/collections/notes/records?filter=body>10').expect(200)).body.totalItems).toBe(1);
    } finally {
      await using.close();
    }
  }, 60_000);

  test("attack: changeFieldType never leaves a value the new type refuses: text to url with a guest's javascript: fails naming the field, a record and the count (issue 41, finding 8)", async () => {
    await seedReleaseOne();
    const seeded = await start(db, dataDir, { collections: releaseOne() });
    let guestNote = '';
    try {
      await seeded.router.ready;
      guestNote = (await seeded.http.post('/backend/api/collections/notes/records').send({ title: 'Guest Note', body: 'javascript:alert(document.cookie)' }).expect(200)).body.id as string;
    } finally {
      await seeded.close();
    }
    await db.db('notes').update({ body: 'https://example.com/ok' }).where({ title: 'First Note' });
    const asUrl = withNotesField({ name: 'body', type: 'url' });
    const refused = await start(db, dataDir, { collections: asUrl, migrations: [{ name: 'to_url', up: (m) => m.changeFieldType('notes', 'body') }] });
    try {
      await expect(refused.router.ready).rejects.toThrow(
        new RegExp(`changeFieldType\\("notes", "body"\\): 2 record\\(s\\) hold values a field of type url refuses \\(record "[a-z0-9]{15}" among them: Must be a valid url\\.\\)`),
      );
    } finally {
      await refused.close();
    }
    // Nothing changed: the values, and recordbase's record of the field's type.
    expect((await db.db('notes').select('body').where({ id: guestNote }))[0].body).toBe('javascript:alert(document.cookie)');
    const recorded = (await db.db(META_TABLE).select('fields').where({ name: 'notes' }))[0].fields as { name: string; type: string }[];
    expect(recorded.find((f) => f.name === 'body')!.type).toBe('text');

    const reports: unknown[] = [];
    const cleared = await start(db, dataDir, { collections: asUrl, migrations: [{ name: 'to_url', up: async (m) => void reports.push(await m.changeFieldType('notes', 'body', { invalid: 'clear' })) }] });
    try {
      await cleared.router.ready;
      expect(reports).toEqual([{ cleared: 2 }]);
      expect(cleared.logger.lines.some((line) => /changeFieldType\("notes", "body"\) cleared 2 value\(s\) a field of type url refuses/.test(line))).toBe(true);
      const list = await cleared.http.get('/backend/api/collections/notes/records?sort=title').expect(200);
      expect(list.body.items.map((r: { title: string; body: string }) => [r.title, r.body])).toEqual([
        ['First Note', 'https://example.com/ok'],
        ['Guest Note', ''],
        ['Second Note', ''],
      ]);
    } finally {
      await cleared.close();
    }
  }, 120_000);

  test('changeFieldType checks every kind whose validation is stricter than its column: email, select, relation ids (issue 41, finding 8)', async () => {
    await seedReleaseOne();
    await db.db('notes').update({ obsolete: 'not an email', body: 'c' }).where({ title: 'First Note' });
    await db.db('notes').update({ obsolete: 'ada@example.com', body: 'a' }).where({ title: 'Second Note' });
    const declared: Record<string, FieldDefinition> = {
      obsolete: { name: 'obsolete', type: 'email' },
      body: { name: 'body', type: 'select', values: ['a', 'b'], maxSelect: 2 },
      title: { name: 'title', type: 'relation', collection: 'people' },
    };
    const stricter = releaseOne().map((c) => (c.name === 'notes' && c.type !== 'view' ? { ...c, fields: c.fields!.map((f) => declared[f.name] ?? f) } : c));
    const messages: string[] = [];
    const probe = await start(db, dataDir, {
      collections: stricter,
      migrations: [
        {
          name: 'stricter',
          async up(m) {
            for (const field of Object.keys(declared)) await m.changeFieldType('notes', field).catch((error: Error) => messages.push(error.message));
          },
        },
      ],
    });
    try {
      // The migration caught each refusal and committed; the sync then finds the declared types unapplied.
      await expect(probe.router.ready).rejects.toThrow(/type change from text to email cannot be applied safely/);
    } finally {
      await probe.close();
    }
    // A caught refusal undid its own conversion (body's column had become jsonb for the select's list).
    expect(await columnsOf(db, 'notes')).toMatchObject({ obsolete: 'text', body: 'text', title: 'text' });
    expect(await db.db('notes').select('body').orderBy('title')).toEqual([{ body: 'c' }, { body: 'a' }]);
    expect(messages).toEqual([
      expect.stringMatching(/^changeFieldType\("notes", "obsolete"\): 1 record\(s\) hold values a field of type email refuses \(record "[a-z0-9]{15}" among them: Must be a valid email address\.\)/),
      expect.stringMatching(/^changeFieldType\("notes", "body"\): 1 record\(s\) hold values a field of type select refuses \(record "[a-z0-9]{15}" among them: Invalid value "c"\.\)/),
      expect.stringMatching(/^changeFieldType\("notes", "title"\): 2 record\(s\) hold values a field of type relation refuses/),
    ]);
  }, 120_000);

  test('on a database recordbase never synced, the reshaping helpers do nothing and the sync makes the collections', async () => {
    const router = await start(db, dataDir, { collections: releaseTwo(), migrations: [toReleaseTwo] });
    try {
      await router.router.ready;
      expect(router.logger.lines.some((line) => line.includes('renameCollection("notes", "memos") has nothing to do'))).toBe(true);
      await router.http.post('/backend/api/collections/memos/records').send({ title: 't', slug: 's' }).expect(200);
      expect(await db.db.select('name').from(MIGRATIONS_TABLE)).toEqual([{ name: toReleaseTwo.name }]);
    } finally {
      await router.close();
    }
  }, 60_000);

  test('a helper naming what the database does not hold is an error, not a silent success', async () => {
    await seedReleaseOne();
    const cases: [Migration['up'], string][] = [
      [(m) => m.renameCollection('nots', 'memos'), 'renameCollection("nots", "memos"): there is no collection "nots" in the database'],
      [(m) => m.renameField('notes', 'bdy', 'content'), 'collection "notes" has no field "bdy" in the database'],
      [(m) => m.renameField('notes', 'body', 'title'), 'collection "notes" already has a column "title"'],
      [(m) => m.dropField('notes', 'body'), 'the field is still declared'],
      [(m) => m.dropCollection('notes'), 'the collection is still declared'],
      [(m) => m.renameField('notes', 'created', 'made'), '"created" is a system field'],
      [(m) => m.renameCollection('notes', 'bad name'), '"bad name" is not a valid collection name'],
      [(m) => m.changeFieldType('notes', 'priority'), 'recordbase has no conversion'],
    ];
    const pointPriority = withNotesField({ name: 'priority', type: 'geoPoint' });
    for (const [up, message] of cases) {
      const collections = message.includes('no conversion') ? pointPriority : releaseOne();
      const router = await start(db, dataDir, { collections, migrations: [{ name: 'm', up }] });
      try {
        await expect(router.router.ready).rejects.toThrow(message);
      } finally {
        await router.close();
      }
    }
    expect(Object.keys(await columnsOf(db, 'notes')).sort()).toEqual(['author', 'body', 'cover', 'created', 'id', 'obsolete', 'priority', 'tags', 'title', 'updated']);
  }, 120_000);
});
