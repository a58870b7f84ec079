import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureBuilt } from '../support/built-package.js';
import { runNode, startNodeUntil, stopNode } from '../support/node-process.js';

/**
 * examples/shared-config (issue 45: the CLI config and the host app repeated the same options):
 * one options module that the app imports and the executable reads. The executable migrates the
 * database and types the collections from the `.ts` module as it is; the built app, made from the
 * same module, serves what the executable created, with the module's auth; the executable then
 * backs it up under the module's backups settings.
 */

const runCli = (root: string, args: string[], env: NodeJS.ProcessEnv) => runNode([path.join(root, 'dist/lib/cli/main.js'), ...args], { cwd: root, env });
const LISTENING = /listening on (http:\/\/127\.0\.0\.1:\d+\/backend)/;

test('one options module: the executable migrates, types and backs up what the app built from it serves', async () => {
  const root = await ensureBuilt();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'rb-shared-config-'));
  const env = { RB_DATA_DIR: dataDir, PORT: '0' };
  const config = 'examples/shared-config/recordbase.config.ts';
  try {
    const migrated = await runCli(root, ['migrate', '--config', config], env);
    expect(migrated).toMatchObject({ code: 0, stdout: expect.stringContaining('CREATE TABLE "tasks"') });
    const types = await runCli(root, ['types', '--config', config], env);
    expect(types).toMatchObject({ code: 0, stdout: expect.stringContaining('export interface TasksRecord') });

    const { child, output } = await startNodeUntil([path.join(root, 'dist/examples/shared-config/server.js')], { cwd: root, env, until: LISTENING });
    const base = LISTENING.exec(output())![1]!;
    try {
      const refused = await fetch(`${base}/api/collections/tasks/records`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ title: 'guest' }) });
      expect(refused.status).toBe(403); // a guest fails the module's create rule
      const created = await fetch(`${base}/api/collections/tasks/records`, { method: 'POST', headers: { Authorization: 'shared-admin', 'Content-Type': 'application/json' }, body: JSON.stringify({ title: 'from the app' }) });
      expect(created.status).toBe(200);
      const list = (await (await fetch(`${base}/api/collections/tasks/records`)).json()) as { items: { title: string }[] };
      expect(list.items.map((item) => item.title)).toEqual(['from the app']);
    } finally {
      await stopNode(child);
    }

    const backup = await runCli(root, ['backup', '--config', config, '--name', 'shared.tar.gz'], env);
    expect(backup).toMatchObject({ code: 0, stdout: expect.stringContaining(`backup written: ${path.join(dataDir, 'backups', 'shared.tar.gz')}`) });
    expect(readdirSync(path.join(dataDir, 'backups'))).toEqual(['shared.tar.gz']);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 240_000);
