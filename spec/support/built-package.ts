import { execFile } from 'node:child_process';
import { existsSync, statSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/**
 * Makes sure dist/ holds a build of the current sources (the executable and the demo run from
 * it, as a user would run them), building when it is missing or older than lib/ or examples/.
 */
export async function ensureBuilt(): Promise<string> {
  const marker = join(ROOT, 'dist', 'lib', 'cli', 'main.js');
  const stale = !existsSync(marker) || statSync(marker).mtimeMs < Math.max(newestMtime(join(ROOT, 'lib')), newestMtime(join(ROOT, 'examples')));
  if (stale) await run('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: ROOT, timeout: 120_000 });
  return ROOT;
}
