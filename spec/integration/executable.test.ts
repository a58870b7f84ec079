import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ensureBuilt } from '../support/built-package.js';
import { expectValidOpenApi } from '../support/openapi-schemas.js';

const run = promisify(execFile);

/** Starts a node process and resolves with the first URL it prints. */
function startAndReadUrl(args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): Promise<{ child: ChildProcess; url: string; output: () => string }> {
  const child = spawn(process.execPath, args, { cwd: options.cwd, env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  return new Promise((resolve, reject) => {
    // PGlite's start-up is slow on a loaded machine; a child that never printed is stopped, not leaked.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`no URL printed within 50 s:\n${output}`));
    }, 50_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /http:\/\/127\.0\.0\.1:(\d+)(\/backend)?/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve({ child, url: match[0], output: () => output });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => reject(new Error(`exited with ${code}:\n${output}`)));
  });
}

/** Holds a loopback port, as another program would. */
async function occupyPort(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, server };
}

/** Runs a node script to its end; resolves with its exit code and output, whatever the code. */
function runToEnd(args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, args, { cwd: options.cwd, env: { ...process.env, ...options.env }, timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

describe('the recordbase executable and the demo', () => {
  let root: string;
  let dir: string;
  beforeAll(async () => {
    root = await ensureBuilt();
  }, 120_000);
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rb-cli-'));
    await writeFile(
      join(dir, 'recordbase.config.js'),
      `export default { dataDir: ${JSON.stringify(join(dir, 'data'))}, collections: [{ name: 'notes', fields: [{ name: 'text', type: 'text' }], rules: { list: '', view: '', create: '' } }] };\n`,
    );
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test('migrate --dry-run prints the DDL and creates nothing, not even the database folder; migrate applies it; then nothing is left', async () => {
    const cli = join(root, 'dist/lib/cli/main.js');
    const dry = await run(process.execPath, [cli, 'migrate', '--dry-run'], { cwd: dir });
    expect(dry.stdout).toContain('CREATE TABLE "notes" ("id" text PRIMARY KEY');
    expect(dry.stdout).toContain('CREATE INDEX IF NOT EXISTS "idx_notes_created"');
    expect(existsSync(join(dir, 'data'))).toBe(false);
    const again = await run(process.execPath, [cli, 'migrate', '--dry-run'], { cwd: dir });
    expect(again.stdout).toBe(dry.stdout);
    const applied = await run(process.execPath, [cli, 'migrate'], { cwd: dir });
    expect(applied.stdout).toMatch(/applied \d+ statement/);
    expect(applied.stdout.split('\n').filter((l) => l.endsWith(';'))).toEqual(dry.stdout.split('\n').filter((l) => l.endsWith(';')));
    const after = await run(process.execPath, [cli, 'migrate', '--dry-run'], { cwd: dir });
    expect(after.stdout.trim()).toBe('-- the database is up to date');
  }, 90_000);

  test('migrate, openapi, types and clean refuse what the router refuses at creation (a rule on an unknown field, an unknown hook, an option out of range), exit 1 and touch nothing', async () => {
    const cli = join(root, 'dist/lib/cli/main.js');
    const data = JSON.stringify(join(dir, 'data'));
    const configs = {
      'bad-rule.js': `export default { dataDir: ${data}, collections: [{ name: 'notes', fields: [{ name: 'text', type: 'text' }], rules: { list: 'titel = "x"' } }] };\n`,
      'bad-hook.js': `export default { dataDir: ${data}, collections: [{ name: 'notes', fields: [] }], hooks: { nots: { beforeCreate() {} } } };\n`,
      'bad-sweep.js': `export default { dataDir: ${data}, collections: [{ name: 'notes', fields: [] }], fileSweep: { intervalMs: 30 * 24 * 3600 * 1000 } };\n`,
    };
    const expected = {
      'bad-rule.js': 'collection "notes": rule "list" is invalid',
      'bad-hook.js': 'hooks: "nots" is not a declared collection',
      'bad-sweep.js': 'fileSweep.intervalMs must be at most 2147483647 milliseconds',
    };
    for (const [file, text] of Object.entries(configs)) await writeFile(join(dir, file), text);
    for (const [file, message] of Object.entries(expected)) {
      for (const args of [['migrate', '--dry-run'], ['migrate'], ['openapi'], ['types'], ['clean', '--days', '1', '--dry-run']]) {
        const result = await runToEnd([cli, ...args, '--config', file], { cwd: dir });
        expect({ file, args, code: result.code, stdout: result.stdout }).toEqual({ file, args, code: 1, stdout: '' });
        expect(result.stderr).toContain(message);
      }
    }
    expect(existsSync(join(dir, 'data'))).toBe(false);
  }, 120_000);

  test('--help on every command and --version answer on stdout with exit 0', async () => {
    const cli = join(root, 'dist/lib/cli/main.js');
    const version = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;
    const top = await runToEnd([cli, '--help'], { cwd: dir });
    expect(top).toMatchObject({ code: 0, stderr: '' });
    for (const command of ['serve', 'migrate', 'clean', 'openapi', 'types']) {
      expect(top.stdout).toContain(`  ${command} `);
      const help = await runToEnd([cli, command, '--help'], { cwd: dir });
      expect(help).toMatchObject({ code: 0, stderr: '' });
      expect(help.stdout).toContain(`Usage: recordbase ${command}`);
      expect(help.stdout).toContain('--config');
    }
    expect(await runToEnd([cli, 'help', 'clean'], { cwd: dir })).toMatchObject({ code: 0, stdout: expect.stringContaining('--days N') });
    expect(await runToEnd([cli, '--version'], { cwd: dir })).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
    const bad = await runToEnd([cli, 'clean', '--days', 'x'], { cwd: dir });
    expect(bad).toMatchObject({ code: 2, stdout: '', stderr: expect.stringContaining('Usage: recordbase clean') });
  }, 60_000);

  test('openapi and types print the same bytes on every run, for the config\'s collections', async () => {
    const cli = join(root, 'dist/lib/cli/main.js');
    const first = await run(process.execPath, [cli, 'openapi', '--server', 'https://example.com/backend'], { cwd: dir });
    const second = await run(process.execPath, [cli, 'openapi', '--server', 'https://example.com/backend'], { cwd: dir });
    expect(second.stdout).toBe(first.stdout);
    const document = JSON.parse(first.stdout);
    expect(document.servers).toEqual([{ url: 'https://example.com/backend' }]);
    expect(Object.keys(document.paths)).toEqual(['/api/collections/notes/records', '/api/collections/notes/records/{id}', '/api/collections/notes/aggregate', '/api/files/token']);
    await expectValidOpenApi(document);
    const types = await run(process.execPath, [cli, 'types'], { cwd: dir });
    expect((await run(process.execPath, [cli, 'types'], { cwd: dir })).stdout).toBe(types.stdout);
    expect(types.stdout).toContain('export interface NotesRecord {');
    expect(types.stdout).toContain('collection(idOrName: "notes" | "pbc_');
    expect(existsSync(join(dir, 'data'))).toBe(false);
  }, 60_000);

  test('openapi and types with a view collection read its fields from the database, and leave the database as it was', async () => {
    const cli = join(root, 'dist/lib/cli/main.js');
    await writeFile(
      join(dir, 'recordbase.config.js'),
      `export default { dataDir: ${JSON.stringify(join(dir, 'data'))}, collections: [
        { name: 'notes', fields: [{ name: 'text', type: 'text' }], rules: { list: '', view: '', create: '' } },
        { name: 'note_sizes', type: 'view', viewQuery: 'SELECT id, text, length(text) AS size FROM notes', rules: { list: '', view: '' } },
      ] };\n`,
    );
    const document = JSON.parse((await run(process.execPath, [cli, 'openapi'], { cwd: dir })).stdout);
    await expectValidOpenApi(document);
    expect(Object.keys(document.paths['/api/collections/note_sizes/records'])).toEqual(['get']);
    expect(Object.keys(document.paths['/api/collections/note_sizes/records/{id}'])).toEqual(['parameters', 'get']);
    const record = document.components.schemas.NoteSizesRecord;
    expect(record.properties.text).toMatchObject({ type: 'string' });
    expect(record.properties.size).toMatchObject({ type: ['number', 'null'] });
    expect(document.components.schemas.NoteSizesCreate).toBeUndefined();
    const types = (await run(process.execPath, [cli, 'types'], { cwd: dir })).stdout;
    expect(types).toMatch(/export interface NoteSizesRecord \{[^}]*\n {2}size: number \| null;/);
    expect(types).toContain('export type NoteSizesCreate = never;');
    // The tables and the view were made inside a transaction rolled back: the sync still has all of it to do.
    const plan = await run(process.execPath, [cli, 'migrate', '--dry-run'], { cwd: dir });
    expect(plan.stdout).toContain('CREATE TABLE "notes"');
  }, 90_000);

  test('serve, the demo and the gallery fail with the error when the port is taken, and print no address', async () => {
    const taken = await occupyPort();
    try {
      const runs = {
        serve: await runToEnd([join(root, 'dist/lib/cli/main.js'), 'serve', '--port', String(taken.port)], { cwd: dir }),
        demo: await runToEnd([join(root, 'dist/examples/demo/server.js')], { cwd: dir, env: { PORT: String(taken.port), RB_DATA_DIR: join(dir, 'demo') } }),
        gallery: await runToEnd([join(root, 'dist/examples/gallery/server.js')], { cwd: dir, env: { PORT: String(taken.port), RB_DATA_DIR: join(dir, 'gallery') } }),
      };
      for (const [name, result] of Object.entries(runs)) {
        expect({ name, code: result.code }).toEqual({ name, code: 1 });
        expect(result.stderr).toContain(`cannot listen on 127.0.0.1:${taken.port}`);
        expect(result.stderr).toContain('EADDRINUSE');
        expect(result.stdout).not.toMatch(/listening|http:\/\//);
      }
    } finally {
      taken.server.close();
    }
  }, 90_000);

  test('serve --config --port runs a standalone server with the router at /, and prints the address it listens on', async () => {
    const { child, url, output } = await startAndReadUrl([join(root, 'dist/lib/cli/main.js'), 'serve', '--config', 'recordbase.config.js', '--port', '0'], { cwd: dir });
    try {
      expect(url).not.toMatch(/:0$/);
      expect(output()).toContain(`recordbase listening on ${url}/`);
      const created = await fetch(`${url}/api/collections/notes/records`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"text":"hi"}' });
      expect(created.status).toBe(200);
      const list = (await (await fetch(`${url}/api/collections/notes/records`)).json()) as { items: { text: string }[] };
      expect(list.items.map((r: { text: string }) => r.text)).toEqual(['hi']);
      // `/` is the router's page, not Express's "Cannot GET /"
      const page = await fetch(`${url}/`);
      expect(page.status).toBe(200);
      expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
      expect(await page.text()).toContain('href="api/health"');
    } finally {
      await stop(child);
    }
  }, 90_000);

  test('serve drains on SIGTERM before it stops listening: while a request still runs, health answers 503 draining (the load balancer sees it), and the process exits 0 after', async () => {
    await writeFile(
      join(dir, 'drain.config.js'),
      `export default { dataDir: ${JSON.stringify(join(dir, 'data'))}, drainMs: 3000, collections: [{ name: 'notes', fields: [{ name: 'text', type: 'text' }], rules: { list: '', view: '', create: '' } }] };\n`,
    );
    const { child, url } = await startAndReadUrl([join(root, 'dist/lib/cli/main.js'), 'serve', '--config', 'drain.config.js', '--port', '0'], { cwd: dir });
    const { hostname, port } = new URL(url);
    // A create whose body trickles in: running when SIGTERM comes, so the drain waits for it.
    const socket = connect(Number(port), hostname);
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.on('error', () => undefined);
    socket.write('POST /api/collections/notes/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"text":"');
    await new Promise((resolve) => setTimeout(resolve, 200));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const health = await fetch(`${url}/api/health`);
    expect(health.status).toBe(503);
    expect(((await health.json()) as { message: string }).message).toMatch(/shutting down/);
    expect(await exited).toBe(0);
    socket.destroy();
  }, 90_000);

  test('a missing config or an unknown command says what to do and exits non-zero', async () => {
    const cli = join(root, 'dist/lib/cli/main.js');
    await expect(run(process.execPath, [cli, 'serve', '--config', 'nope.js'], { cwd: dir })).rejects.toMatchObject({ code: 1, stderr: expect.stringContaining('config file not found') });
    await expect(run(process.execPath, [cli, 'frobnicate'], { cwd: dir })).rejects.toMatchObject({ code: 2, stderr: expect.stringContaining('Usage') });
  }, 60_000);

  test('the demo (npm start) serves the README flow: a signed-in create (its hooks make the caller the author of posts and comments), a guest list without e-mails, a refused guest create, a page at the printed address', async () => {
    const { child, url, output } = await startAndReadUrl([join(root, 'dist/examples/demo/server.js')], { cwd: dir, env: { PORT: '0', RB_DATA_DIR: join(dir, 'demo') } });
    try {
      await new Promise((r) => setTimeout(r, 300)); // the demo seeds its user right after printing
      expect(output()).toContain('curl');
      const created = await fetch(`${url}/api/collections/posts/records`, {
        method: 'POST',
        headers: { Authorization: 'demo-alice', 'Content-Type': 'application/json' },
        body: JSON.stringify({ title: 'Hello', author: 'demoadmin000000' }),
      });
      expect(created.status).toBe(200);
      // the demo's beforeCreate hook: the author is whoever creates the post, whatever the body said
      const list = (await (await fetch(`${url}/api/collections/posts/records?perPage=10`)).json()) as Record<string, unknown>;
      expect(list).toMatchObject({ page: 1, perPage: 10, totalItems: 1, items: [{ title: 'Hello', author: 'demoalice000000' }] });
      const guest = await fetch(`${url}/api/collections/posts/records`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"title":"x"}' });
      expect(guest.status).toBe(403);
      // comments get their author the same way
      const post = (await created.json()) as { id: string };
      const comment = await fetch(`${url}/api/collections/comments/records`, {
        method: 'POST',
        headers: { Authorization: 'demo-alice', 'Content-Type': 'application/json' },
        body: JSON.stringify({ text: 'First', post: post.id, author: 'demoadmin000000' }),
      });
      expect(await comment.json()).toMatchObject({ text: 'First', author: 'demoalice000000' });
      // users' e-mails are for superusers only
      const guestUsers = (await (await fetch(`${url}/api/collections/users/records`)).json()) as { items: Record<string, unknown>[] };
      expect(guestUsers.items).toEqual([expect.objectContaining({ id: 'demoalice000000', name: 'Alice' })]);
      expect(guestUsers.items[0]).not.toHaveProperty('email');
      const asAdmin = (await (await fetch(`${url}/api/collections/users/records`, { headers: { Authorization: 'demo-admin' } })).json()) as { items: Record<string, unknown>[] };
      expect(asAdmin.items[0]).toMatchObject({ email: 'alice@example.com' });
      // the printed address answers: the router's page, with the dashboard's link
      const page = await fetch(url);
      expect(page.status).toBe(200);
      expect(page.url).toBe(`${url}/`);
      expect(await page.text()).toContain('href="_/"');
    } finally {
      await stop(child);
    }
  }, 90_000);
});
