import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBuilt } from '../support/built-package.js';

/**
 * `recordbase migrate` and its subcommands through the built executable (issue 32 item 4), on a
 * TypeScript config and TypeScript migrations loaded without a compile step, on the embedded database.
 */

function runCli(cli: string, args: string[], cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [cli, ...args], { cwd, timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** Starts `recordbase serve` and resolves once it prints its address. */
function serve(cli: string, cwd: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, [cli, 'serve', '--port', '0'], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`serve printed no address within 50 s:\n${output}`));
    }, 50_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (/listening on http/.test(output)) {
        clearTimeout(timer);
        resolve(child);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => reject(new Error(`serve exited with ${code}:\n${output}`)));
  });
}

const CONFIG_TS = `import type { RecordsRouterOptions } from 'recordbase';

const options: RecordsRouterOptions = {
  dataDir: './data',
  migrations: './migrations',
  collections: [{ name: 'notes', fields: [{ name: 'title', type: 'text' }], rules: { list: '', view: '' } }],
};
export default options;
`;

const SEED_TS = `import type { MigrationContext } from 'recordbase';

const titles: readonly string[] = ['one', 'two'];
export default {
  async up(m: MigrationContext): Promise<void> {
    for (const title of titles) await m.records('notes').create({ title });
  },
  async down(m: MigrationContext): Promise<void> {
    await m.sql('DELETE FROM "notes"');
  },
};
`;

describe('recordbase migrate (status, create, down) with a TypeScript config', () => {
  let cli: string;
  let dir: string;
  beforeAll(async () => {
    cli = join(await ensureBuilt(), 'dist/lib/cli/main.js');
  }, 120_000);
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rb-migrate-'));
    await writeFile(join(dir, 'recordbase.config.ts'), CONFIG_TS);
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test('create writes a .ts template; dry run lists it and changes nothing; migrate applies; status; down one by one; types from the .ts config', async () => {
    const types = await runCli(cli, ['types'], dir);
    expect(types).toMatchObject({ code: 0, stderr: '' });
    expect(types.stdout).toContain('export interface NotesRecord');

    const created = await runCli(cli, ['migrate', 'create', 'add_things'], dir);
    expect(created).toMatchObject({ code: 0, stderr: '' });
    const files = readdirSync(join(dir, 'migrations'));
    expect(files).toHaveLength(1);
    expect(files[0]).toMatch(/^\d{14}_add_things\.ts$/);
    expect(created.stdout).toContain(join('migrations', files[0]!));
    const template = files[0]!.replace(/\.ts$/, '');
    await writeFile(join(dir, 'migrations', '001_seed.ts'), SEED_TS);

    const dry = await runCli(cli, ['migrate', '--dry-run'], dir);
    expect(dry).toMatchObject({ code: 0, stderr: '' });
    expect(dry.stdout).toContain(`-- pending migrations: 001_seed, ${template}`);
    expect(dry.stdout).toContain('CREATE TABLE "notes"');
    expect(existsSync(join(dir, 'data'))).toBe(false);

    const pending = await runCli(cli, ['migrate', 'status'], dir);
    expect(pending.stdout.trim().split('\n').map((line) => line.split(/\s+/)[0] + ' ' + line.trim().split(/\s+/).at(-1))).toEqual(['pending 001_seed', `pending ${template}`]);
    expect(existsSync(join(dir, 'data'))).toBe(false);

    const applied = await runCli(cli, ['migrate'], dir);
    expect(applied).toMatchObject({ code: 0 });
    expect(applied.stdout).toContain('-- applied migration 001_seed');
    expect(applied.stdout).toContain(`-- applied migration ${template}`);
    // The seed's records() created the table before the sync: the sync has nothing left but realtime's part.
    const status = await runCli(cli, ['migrate', 'status'], dir);
    expect(status.stdout).toMatch(/^applied {2}\d{4}-\d{2}-\d{2}T[\d:.]+Z {2}001_seed$/m);
    expect(status.stdout).toMatch(new RegExp(`^applied .* ${template}$`, 'm'));
    expect((await runCli(cli, ['migrate'], dir)).stdout).not.toContain('applied migration');

    expect((await runCli(cli, ['migrate', 'down'], dir)).stdout.trim()).toBe(`reverted migration ${template}`);
    expect((await runCli(cli, ['migrate', 'down'], dir)).stdout.trim()).toBe('reverted migration 001_seed');
    const none = await runCli(cli, ['migrate', 'down'], dir);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('no migration has been applied to this database');
    expect((await runCli(cli, ['migrate', 'status'], dir)).stdout).toMatch(/^pending .*001_seed$/m);
  }, 180_000);

  test('down without a down, a migration that does not parse, bad subcommands: clear errors, nothing applied', async () => {
    await mkdir(join(dir, 'migrations'));
    await writeFile(join(dir, 'migrations', '001_up_only.ts'), `export default { async up(m: any) { await m.sql('CREATE TABLE "made" ("x" int)'); } };\n`);
    expect((await runCli(cli, ['migrate'], dir)).code).toBe(0);
    const noDown = await runCli(cli, ['migrate', 'down'], dir);
    expect(noDown).toMatchObject({ code: 1, stdout: '' });
    expect(noDown.stderr).toContain('migration "001_up_only" has no down; write one, or undo it in a new migration');

    await writeFile(join(dir, 'migrations', '002_broken.ts'), `export default { up( };\n`);
    const broken = await runCli(cli, ['migrate'], dir);
    expect(broken.code).toBe(1);
    expect(broken.stderr).toContain(`migration "002_broken" (${join(dir, 'migrations', '002_broken.ts')}) could not be loaded`);
    expect((await runCli(cli, ['migrate', 'status'], dir)).code).toBe(1);

    for (const [args, message] of [
      [['migrate', 'sideways'], 'unknown subcommand "migrate sideways"'],
      [['migrate', 'create'], 'migrate create needs one name'],
      [['migrate', 'status', '--dry-run'], '--dry-run goes with migrate alone'],
      [['migrate', 'create', '../escape'], 'a migration name is lower-case words'],
    ] as const) {
      const result = await runCli(cli, [...args], dir);
      expect({ args, code: result.code }).toEqual({ args, code: args[1] === 'create' && args.length === 3 ? 1 : 2 });
      expect(result.stderr).toContain(message);
    }
    expect(readdirSync(join(dir, 'migrations')).sort()).toEqual(['001_up_only.ts', '002_broken.ts']);
  }, 180_000);

  test('down refuses, exit 1 and nothing reverted, when the release before could not start on its result; a down that names the type reverts (issue 45)', async () => {
    const config = (type: string) => CONFIG_TS.replace("fields: [{ name: 'title', type: 'text' }]", `fields: [{ name: 'title', type: 'text' }, { name: 'n', type: '${type}' }]`);
    await writeFile(join(dir, 'recordbase.config.ts'), config('text'));
    await mkdir(join(dir, 'migrations'));
    expect((await runCli(cli, ['migrate'], dir)).code).toBe(0);
    await writeFile(join(dir, 'recordbase.config.ts'), config('number'));
    const migration = (down: string) => `import type { MigrationContext } from 'recordbase';\nexport default {\n  async up(m: MigrationContext) { await m.changeFieldType('notes', 'n'); },\n  async down(m: MigrationContext) { ${down} },\n};\n`;
    await writeFile(join(dir, 'migrations', '001_n.ts'), migration(''));
    expect((await runCli(cli, ['migrate'], dir)).stdout).toContain('-- applied migration 001_n');

    const refused = await runCli(cli, ['migrate', 'down'], dir);
    expect(refused).toMatchObject({ code: 1, stdout: '' });
    expect(refused.stderr).toContain('migration "001_n" (down) failed and was rolled back, nothing of it applied: the down leaves a schema the release before "001_n" cannot start on');
    expect(refused.stderr).toContain(`collection "notes", field "n": the release before has it as text, but it is number; convert it back in the down: m.changeFieldType("notes", "n", { to: 'text' })`);
    // Whole results, so a failure shows the command's stderr and exit code too.
    expect(await runCli(cli, ['migrate', 'status'], dir)).toMatchObject({ code: 0, stdout: expect.stringMatching(/^applied .*001_n$/m) });

    await writeFile(join(dir, 'migrations', '001_n.ts'), migration(`await m.changeFieldType('notes', 'n', { to: 'text' });`));
    expect(await runCli(cli, ['migrate', 'down'], dir)).toMatchObject({ code: 0, stdout: 'reverted migration 001_n\n' });
    expect(await runCli(cli, ['migrate', 'status'], dir)).toMatchObject({ code: 0, stdout: expect.stringMatching(/^pending .*001_n$/m) });
  }, 180_000);

  test('while an app holds the embedded database, migrate says so once, naming the holding process, and changes nothing', async () => {
    await mkdir(join(dir, 'migrations'));
    await writeFile(join(dir, 'migrations', '001_seed.ts'), SEED_TS);
    const app = await serve(cli, dir);
    try {
      for (const args of [['migrate', '--dry-run'], ['migrate'], ['migrate', 'status'], ['migrate', 'down']]) {
        const result = await runCli(cli, args, dir);
        expect({ args, code: result.code, stdout: result.stdout }).toEqual({ args, code: 1, stdout: '' });
        expect(result.stderr.match(/is in use by/g)).toHaveLength(1);
        expect(result.stderr).toContain(`process ${app.pid} on host`);
      }
    } finally {
      const exited = new Promise((resolve) => app.once('exit', resolve));
      app.kill('SIGTERM');
      await exited;
    }
    const status = await runCli(cli, ['migrate', 'status'], dir);
    expect(status.stdout).toMatch(/^applied .*001_seed$/m);
    expect(readFileSync(join(dir, 'migrations', '001_seed.ts'), 'utf8')).toBe(SEED_TS);
  }, 180_000);
});
