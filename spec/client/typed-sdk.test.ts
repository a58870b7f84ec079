import { execFile } from 'node:child_process';
import { mkdtemp, mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { renderTypeScriptTypes } from '../../lib/openapi/render-typescript-types.js';
import { resolveOptions } from '../../lib/options.js';
import { buildSchemaRegistry } from '../../lib/schema/collection-schema.js';
import { blogCollections, trickyCollections } from '../support/demo-collections.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { testEngines } from '../support/test-database.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

/**
 * A program a user would write with the generated types: every call typed through
 * TypedPocketBase, no casts beyond the client's. It prints what it read, so the test checks that
 * what the types promise is what the server sends.
 */
const USAGE = `
import PocketBase from 'pocketbase';
import type { CollectionRecords, PostsCreate, PostsRecord, TypedPocketBase, UsersRecord } from './pocketbase-types.js';

const pb = new PocketBase(process.env.BASE_URL) as TypedPocketBase;
pb.authStore.save('token-alice', null);

const user: UsersRecord = await pb.collection('users').create({ name: 'Ann', role: 'editor' });
const input: PostsCreate = { title: 'Typed', tags: ['a', 'c'], views: 3, author: user.id, editors: [user.id], meta: { k: 1 }, publishedAt: null };
const post = await pb.collection('posts').create(input);
const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');
const covered = await pb.collection('posts').create({ title: 'Covered', cover: new File([png], 'cover.png', { type: 'image/png' }) });
await pb.collection('comments').create({ text: 'nice', post: post.id });
await pb.collection('posts').update(post.id, { 'views+': 2, 'tags-': 'a' });

const one = await pb.collection('posts').getOne(post.id, { expand: 'author,comments_via_post' });
const authorName: string | undefined = one.expand?.author?.name;
const comments: string[] = (one.expand?.comments_via_post ?? []).map((c) => c.text);
const views: number | null = one.views;
const tags: Array<'a' | 'b' | 'c'> = one.tags;
const category: 'news' | 'howto' | '' = one.category;
const collectionName: 'posts' = one.collectionName;

const page = await pb.collection('posts').getList(1, 10, { filter: pb.filter('title = {:t}', { t: 'Typed' }) });
const first: PostsRecord | undefined = page.items[0];
const byId = await pb.collection('pbc_posts01').getOne(covered.id);
const cover: string = byId.cover;
const all: CollectionRecords['posts'][] = await pb.collection('posts').getFullList();

console.log(JSON.stringify({ authorName, comments, views, tags, category, collectionName, total: page.totalItems, first: first?.id === post.id, cover, all: all.length }));
`;

/** Two mistakes the types must catch: a misspelled field read, and one written. */
const WRONG_FIELD = `
import PocketBase from 'pocketbase';
import type { TypedPocketBase } from './pocketbase-types.js';

const pb = new PocketBase('http://127.0.0.1:1') as TypedPocketBase;
export async function misspelled(): Promise<string> {
  const post = await pb.collection('posts').getOne('aaaaaaaaaaaaaaa');
  await pb.collection('posts').create({ titel: 'x' });
  return post.titel;
}
`;

/** Uses the declarations of awkward names: prototype keys as fields, comment ends and quotes in select values. */
const TRICKY_USAGE = `
import type { ABRecord, ABUpdate, A_BRecord, AbRecord, _AbRecord } from './tricky-types.js';

export function read(record: ABRecord, other: A_BRecord, empty: AbRecord, hidden: _AbRecord): string[] {
  // TypeScript reads a missing \`constructor\` in a literal as Object's, so this one must be given.
  const update: ABUpdate = { constructor: 2, 'constructor+': 1, 'self-': [other.ref], odd: '*/' };
  return [record.__proto__, String(record.constructor), record.odd, other.expand?.ref?.odd ?? '', empty.id, hidden.id, String(update.odd)];
}
`;

/** Compiles files in their own folder with tsc --strict; resolves with tsc's output and exit code. */
async function compile(dir: string, options: { file: string; lib: string[]; types: string[]; emit: boolean; typesFile?: string }): Promise<{ code: number; output: string }> {
  const project = join(dir, `tsconfig.${options.file}.json`);
  await writeFile(
    project,
    JSON.stringify({
      compilerOptions: {
        strict: true,
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        lib: options.lib,
        types: options.types,
        skipLibCheck: true,
        noEmit: !options.emit,
        outDir: 'out',
      },
      files: [options.file, options.typesFile ?? 'pocketbase-types.ts'],
    }),
  );
  try {
    const { stdout } = await run(process.execPath, [TSC, '-p', project], { cwd: dir, timeout: 120_000 });
    return { code: 0, output: stdout };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? 1, output: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

describe('the types of `recordbase types` with the pocketbase SDK', () => {
  let dir: string;
  let compiled: { code: number; output: string };

  beforeAll(async () => {
    const { limits, multipartUpdate } = resolveOptions({ collections: [] }, {});
    dir = await mkdtemp(join(tmpdir(), 'rb-types-'));
    await mkdir(dir, { recursive: true });
    await symlink(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
    await writeFile(join(dir, 'package.json'), '{"type":"module"}\n');
    await writeFile(join(dir, 'pocketbase-types.ts'), renderTypeScriptTypes(buildSchemaRegistry(blogCollections()), { limits, multipartUpdate }));
    await writeFile(join(dir, 'usage.ts'), USAGE);
    await writeFile(join(dir, 'wrong-field.ts'), WRONG_FIELD);
    await writeFile(join(dir, 'tricky-types.ts'), renderTypeScriptTypes(buildSchemaRegistry(trickyCollections()), { limits, multipartUpdate }));
    await writeFile(join(dir, 'tricky-usage.ts'), TRICKY_USAGE);
    compiled = await compile(dir, { file: 'usage.ts', lib: ['ES2022'], types: ['node'], emit: true });
  }, 180_000);
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test('compile with tsc --strict against the SDK, and a program using them compiles clean', () => {
    expect(compiled.output).toBe('');
    expect(compiled.code).toBe(0);
  });

  test('awkward collection and field names and select values compile too', async () => {
    expect(await compile(dir, { file: 'tricky-usage.ts', lib: ['ES2022'], types: ['node'], emit: false, typesFile: 'tricky-types.ts' })).toEqual({ code: 0, output: '' });
  }, 120_000);

  test('a misspelled field fails to compile, read or written, and nothing else does (DOM lib, as in a browser app)', async () => {
    const { code, output } = await compile(dir, { file: 'wrong-field.ts', lib: ['ES2022', 'DOM'], types: [], emit: false });
    expect(code).not.toBe(0);
    const errors = output.split('\n').filter((line) => /error TS\d+/.test(line));
    expect(errors).toEqual([
      expect.stringMatching(/wrong-field\.ts\(8,\d+\): error TS2353: Object literal may only specify known properties, and 'titel' does not exist in type 'PostsCreate/),
      expect.stringMatching(/wrong-field\.ts\(9,\d+\): error TS2551: Property 'titel' does not exist on type 'PostsRecord'. Did you mean 'title'\?/),
    ]);
  }, 120_000);

  describe.each(testEngines())('and the program they typed, run against %s', (engine) => {
    let app: TestApp;
    beforeAll(async () => {
      app = await startTestApp(engine, { collections: blogCollections() });
    }, 90_000);
    afterAll(async () => {
      await app?.close();
    });

    test('reads what the types say it reads', async () => {
      expect(compiled.code).toBe(0);
      const { stdout } = await run(process.execPath, [join(dir, 'out', 'usage.js')], { env: { ...process.env, BASE_URL: `${app.baseUrl}/backend` }, timeout: 60_000 });
      expect(JSON.parse(stdout)).toEqual({
        authorName: 'Ann',
        comments: ['nice'],
        views: 5,
        tags: ['c'],
        category: '',
        collectionName: 'posts',
        total: 1,
        first: true,
        cover: expect.stringMatching(/^cover_[a-z0-9]{10}\.png$/),
        all: 2,
      });
    }, 60_000);
  });
});
