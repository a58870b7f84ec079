import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ensureBuilt } from '../support/built-package.js';

const run = promisify(execFile);

/** Starts a node process and resolves with the first URL it prints. */
function startAndReadUrl(args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): Promise<{ child: ChildProcess; url: string; output: () => string }> {
  const child = spawn(process.execPath, args, { cwd: options.cwd, env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no URL printed within 30 s:\n${output}`)), 30_000);
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

  test('migrate --dry-run prints the DDL and changes nothing; migrate applies it; then nothing is left', async () => {
    const cli = join(root, 'dist/lib/cli/main.js');
    const dry = await run(process.execPath, [cli, 'migrate', '--dry-run'], { cwd: dir });
    expect(dry.stdout).toContain('CREATE TABLE "notes" ("id" text PRIMARY KEY');
    expect(dry.stdout).toContain('CREATE INDEX IF NOT EXISTS "idx_notes_created"');
    const again = await run(process.execPath, [cli, 'migrate', '--dry-run'], { cwd: dir });
    expect(again.stdout).toContain('CREATE TABLE "notes"');
    const applied = await run(process.execPath, [cli, 'migrate'], { cwd: dir });
    expect(applied.stdout).toMatch(/applied \d+ statement/);
    const after = await run(process.execPath, [cli, 'migrate', '--dry-run'], { cwd: dir });
    expect(after.stdout.trim()).toBe('-- the database is up to date');
  }, 60_000);

  test('serve --config --port runs a standalone server with the router at /', async () => {
    const { child, url } = await startAndReadUrl([join(root, 'dist/lib/cli/main.js'), 'serve', '--config', 'recordbase.config.js', '--port', '0'], { cwd: dir });
    try {
      const created = await fetch(`${url}/api/collections/notes/records`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"text":"hi"}' });
      expect(created.status).toBe(200);
      const list = (await (await fetch(`${url}/api/collections/notes/records`)).json()) as { items: { text: string }[] };
      expect(list.items.map((r: { text: string }) => r.text)).toEqual(['hi']);
    } finally {
      await stop(child);
    }
  }, 60_000);

  test('a missing config or an unknown command says what to do and exits non-zero', async () => {
    const cli = join(root, 'dist/lib/cli/main.js');
    await expect(run(process.execPath, [cli, 'serve', '--config', 'nope.js'], { cwd: dir })).rejects.toMatchObject({ code: 1, stderr: expect.stringContaining('config file not found') });
    await expect(run(process.execPath, [cli, 'frobnicate'], { cwd: dir })).rejects.toMatchObject({ code: 2, stderr: expect.stringContaining('Usage') });
  }, 60_000);

  test('the demo (npm start) serves the README flow: a signed-in create, a guest list, a refused guest create', async () => {
    const { child, url, output } = await startAndReadUrl([join(root, 'dist/examples/demo/server.js')], { cwd: dir, env: { PORT: '0', RB_DATA_DIR: join(dir, 'demo') } });
    try {
      await new Promise((r) => setTimeout(r, 300)); // the demo seeds its user right after printing
      expect(output()).toContain('curl');
      const created = await fetch(`${url}/api/collections/posts/records`, {
        method: 'POST',
        headers: { Authorization: 'demo-alice', 'Content-Type': 'application/json' },
        body: JSON.stringify({ title: 'Hello', author: 'demoalice000000' }),
      });
      expect(created.status).toBe(200);
      const list = (await (await fetch(`${url}/api/collections/posts/records?perPage=10`)).json()) as Record<string, unknown>;
      expect(list).toMatchObject({ page: 1, perPage: 10, totalItems: 1, items: [{ title: 'Hello', author: 'demoalice000000' }] });
      const guest = await fetch(`${url}/api/collections/posts/records`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"title":"x"}' });
      expect(guest.status).toBe(403);
    } finally {
      await stop(child);
    }
  }, 60_000);
});
