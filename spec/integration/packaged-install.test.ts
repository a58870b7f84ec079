import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * The package as a user gets it: the files a fresh checkout has (tracked, or new and not
 * ignored: no dist/) copied to a temporary folder and packed there with `npm pack`, whose
 * `prepack` builds; the tarball installed into fresh apps (ESM, CommonJS, TypeScript under
 * `tsc --strict` with `skipLibCheck: false` and the SDK typed by `recordbase types`, as
 * docs/openapi.md sets it up), each of which mounts the router, creates a record and lists it
 * over real HTTP. The apps share one folder and one `npm install` (the peers come from the
 * registry, served from npm's cache when it has them).
 */

/** What every app does once it has createRecordsRouter: listen, create, list, print, close. */
const APP_BODY = `
  const app = express();
  const records = createRecordsRouter({
    collections: [{ name: 'notes', fields: [{ name: 'text', type: 'text', required: true }], rules: { list: '', view: '', create: '' } }],
    dataDir: process.env.RB_DATA_DIR,
    fileSweep: false,
    thumbnailWorkers: 1,
  });
  app.use('/backend', records);
  await records.ready;
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const base = 'http://127.0.0.1:' + server.address().port + '/backend/api/collections/notes/records';
  const created = await fetch(base, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ text: process.env.APP_KIND }) });
  const list = await fetch(base);
  console.log(JSON.stringify({ created: created.status, list: await list.json() }));
  server.close();
  await records.close();
`;

const ESM_APP = `import express from 'express';
import { createRecordsRouter } from 'recordbase';
${APP_BODY}`;

const CJS_APP = `const express = require('express');
const { createRecordsRouter } = require('recordbase');
(async () => {
${APP_BODY}
})().catch((err) => { console.error(err); process.exit(1); });
`;

const TS_APP = `import express from 'express';
import type { AddressInfo } from 'node:net';
import PocketBase from 'pocketbase';
import { createAppServer, createRecordsRouter, type CollectionDefinition, type RecordsRouter } from 'recordbase';
import type { TypedPocketBase } from './pocketbase-types.js';

const collections: CollectionDefinition[] = [{ name: 'notes', fields: [{ name: 'text', type: 'text', required: true }], rules: { list: '', view: '', create: '' } }];
const app = express();
const records: RecordsRouter = createRecordsRouter({ collections, dataDir: process.env.RB_DATA_DIR, fileSweep: false, thumbnailWorkers: 1 });
app.use('/backend', records);
await records.ready;
// The server as the README makes it: createAppServer's published types must take an express() app.
const server = createAppServer(app).listen(0, '127.0.0.1');
await new Promise((resolve) => server.once('listening', resolve));
const pb = new PocketBase('http://127.0.0.1:' + (server.address() as AddressInfo).port + '/backend') as TypedPocketBase;
const created = await fetch(pb.baseURL + '/api/collections/notes/records', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ text: process.env.APP_KIND }) });
const list = await pb.collection('notes').getList(1, 10);
const text: string = list.items[0]!.text; // typed by the generated NotesRecord
console.log(JSON.stringify({ created: created.status, list: { totalItems: list.totalItems, items: [{ text }] } }));
server.close();
await records.close();
`;

/** The collections of the generated types (`recordbase types` reads the same config as `serve`). */
const CONFIG = `export default { collections: [{ name: 'notes', fields: [{ name: 'text', type: 'text', required: true }], rules: { list: '', view: '', create: '' } }] };\n`;

/** docs/openapi.md's setup for a Node project: NodeNext, the DOM library for the SDK's own declarations. */
const TSCONFIG = {
  compilerOptions: {
    strict: true,
    skipLibCheck: false,
    target: 'ES2022',
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    lib: ['ES2022', 'DOM'],
    types: ['node'],
    outDir: 'out',
  },
  files: ['ts-app.ts'],
};

/** Runs a command and returns its output; a failure carries the command and everything it printed. */
async function runReadably(file: string, args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv; timeout: number }): Promise<string> {
  try {
    const { stdout } = await run(file, args, { cwd: options.cwd, env: { ...process.env, ...options.env }, timeout: options.timeout, maxBuffer: 16 * 1024 * 1024 });
    return stdout;
  } catch (err) {
    const e = err as { message: string; stdout?: string; stderr?: string };
    throw new Error(`${[file, ...args].join(' ')} failed: ${e.message}\n--- stdout\n${e.stdout ?? ''}\n--- stderr\n${e.stderr ?? ''}`);
  }
}

describe('the packed package installed into fresh apps', () => {
  let dir: string;
  let checkout: string;
  let packed: string[];
  /** What `npm pack` said in the checkout before its dev dependencies were there. */
  let packWithoutInstall: { failed: boolean; stderr: string; tarballs: string[] };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rb-packed-'));
    checkout = join(dir, 'checkout');
    const listed = await runReadably('git', ['ls-files', '-co', '--exclude-standard', '-z'], { cwd: ROOT, timeout: 30_000 });
    for (const file of listed.split('\0').filter(Boolean)) {
      await mkdir(join(checkout, file, '..'), { recursive: true });
      await cp(join(ROOT, file), join(checkout, file)).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err; // listed by git but deleted in the working tree
      });
    }
    // A fresh clone has no node_modules: prepack says to run npm install instead of `tsc: not found`.
    const failedPack = await run('npm', ['pack', '--pack-destination', dir], { cwd: checkout, timeout: 120_000 }).then(
      ({ stderr }) => ({ failed: false, stderr }),
      (err: { stderr?: string }) => ({ failed: true, stderr: err.stderr ?? '' }),
    );
    packWithoutInstall = { ...failedPack, tarballs: (await readdir(dir)).filter((name) => name.endsWith('.tgz')) };
    // What `npm ci` would install, without installing it again: prepack's build needs tsc and esbuild.
    await symlink(join(ROOT, 'node_modules'), join(checkout, 'node_modules'), 'dir');
    await runReadably('npm', ['pack', '--pack-destination', dir, '--silent'], { cwd: checkout, timeout: 240_000 });
    const tarball = (await readdir(dir)).find((name) => name.endsWith('.tgz'));
    if (!tarball) throw new Error(`npm pack wrote no tarball into ${dir}`);
    packed = (await runReadably('tar', ['-tzf', tarball], { cwd: dir, timeout: 30_000 })).trim().split('\n');
    await writeFile(join(dir, 'package.json'), JSON.stringify({ name: 'rb-packed-app', private: true, type: 'module' }));
    await runReadably(
      'npm',
      ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', `./${tarball}`, 'express@^5', 'knex@^3', '@types/node@^20', 'pocketbase@^0.28'],
      { cwd: dir, timeout: 240_000 },
    );
    await writeFile(join(dir, 'esm-app.mjs'), ESM_APP);
    await writeFile(join(dir, 'cjs-app.cjs'), CJS_APP);
    await writeFile(join(dir, 'ts-app.ts'), TS_APP);
    await writeFile(join(dir, 'recordbase.config.js'), CONFIG);
    await writeFile(join(dir, 'tsconfig.json'), JSON.stringify(TSCONFIG));
  }, 600_000);

  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** Runs one app with its own dataDir and checks it created and listed its note over HTTP. */
  async function runApp(kind: string, script: string): Promise<void> {
    const stdout = await runReadably(process.execPath, [script], { cwd: dir, env: { RB_DATA_DIR: join(dir, `data-${kind}`), APP_KIND: kind }, timeout: 120_000 });
    const lines = stdout.trim().split('\n');
    const result = JSON.parse(lines[lines.length - 1]) as { created: number; list: { totalItems: number; items: { text: string }[] } };
    expect({ kind, created: result.created, total: result.list.totalItems, texts: result.list.items.map((i) => i.text) }).toEqual({ kind, created: 200, total: 1, texts: [kind] });
  }

  test('an ES module app imports it, creates and lists over HTTP', async () => {
    await runApp('esm', 'esm-app.mjs');
  }, 120_000);

  test('a CommonJS app requires it (Node 20.19+ loads the ES module), creates and lists over HTTP', async () => {
    await runApp('cjs', 'cjs-app.cjs');
  }, 120_000);

  test('a clean checkout packs its build (prepack), the dashboard and the docs, and no source maps pointing at sources it leaves out', () => {
    expect(packed).toEqual(expect.arrayContaining(['package/dist/lib/index.js', 'package/dist/lib/index.d.ts', 'package/dist/lib/cli/main.js', 'package/dist/dashboard/index.html', 'package/README.md']));
    expect(packed.filter((name) => name.endsWith('.map'))).toEqual([]);
    expect(packed.filter((name) => !/^package\/(dist\/lib\/|dist\/dashboard\/|docs\/|README\.md$|CHANGELOG\.md$|LICENSE$|package\.json$)/.test(name))).toEqual([]);
  });

  test('npm pack in a fresh clone, before npm install, stops saying to run npm install first, and writes no tarball', async () => {
    expect(packWithoutInstall.failed).toBe(true);
    expect(packWithoutInstall.stderr).toContain('run npm install first');
    expect(packWithoutInstall.stderr).not.toMatch(/tsc: not found/);
    expect(packWithoutInstall.tarballs).toEqual([]);
  });

  test('what a user does not need is left out (issue 45): the docs\' screenshots, the 120 kB declaration of jimp\'s types that no published declaration imports', () => {
    expect(packed.filter((name) => name.startsWith('package/docs/images/'))).toEqual([]);
    expect(packed).not.toContain('package/dist/lib/files/thumbnail-jimp.d.ts');
    expect(packed).toContain('package/dist/lib/files/thumbnail-jimp.js');
    expect(packed).toEqual(expect.arrayContaining(['package/docs/dashboard.md', 'package/docs/examples/demo-types.ts']));
  });

  test('a TypeScript app with the SDK typed by `recordbase types` compiles with tsc --strict and skipLibCheck: false, then runs', async () => {
    const types = await runReadably(join(dir, 'node_modules', '.bin', 'recordbase'), ['types'], { cwd: dir, timeout: 60_000 });
    await writeFile(join(dir, 'pocketbase-types.ts'), types);
    const output = await runReadably(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], { cwd: dir, timeout: 120_000 });
    expect(output).toBe('');
    await runApp('ts', join('out', 'ts-app.js'));
  }, 180_000);

  test('the recordbase executable is installed and runs', async () => {
    const version = await runReadably(join(dir, 'node_modules', '.bin', 'recordbase'), ['--version'], { cwd: dir, timeout: 30_000 });
    expect(version.trim()).toMatch(/^\d+\.\d+\.\d+/);
  }, 60_000);
});
