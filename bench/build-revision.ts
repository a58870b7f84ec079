/**
 * `--against <revision>`: the bench's baseline becomes recordbase itself at another git revision
 * (its own bench-app, built from that revision's sources), so a change's cost is measured against
 * the code before it in the same run, on the same machine and data: "within 2% of today's".
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository this bench was built from (dist/bench/ is two levels below it). */
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * Builds `revision` (anything `git rev-parse` takes) into a folder of its own under the temp
 * directory, once per commit (kept between runs), and returns the path of its built bench-app.
 * The sources come from `git archive`, so uncommitted changes of the working tree are not in
 * it; it shares this checkout's node_modules (a revision whose dependencies differ from the
 * installed ones fails to build here, with TypeScript's message).
 */
export function buildRevision(revision: string): { commit: string; benchApp: string } {
  const commit = execFileSync('git', ['rev-parse', '--verify', `${revision}^{commit}`], { cwd: REPO, encoding: 'utf8' }).trim();
  const root = path.join(tmpdir(), 'recordbase-bench', `revision-${commit.slice(0, 12)}`);
  const benchApp = path.join(root, 'dist', 'bench', 'bench-app.js');
  if (existsSync(benchApp)) return { commit, benchApp };
  rmSync(root, { recursive: true, force: true });
  mkdirSync(root, { recursive: true });
  const archive = execFileSync('git', ['archive', '--format=tar', commit], { cwd: REPO, maxBuffer: 1 << 30 });
  execFileSync('tar', ['-x', '-C', root], { input: archive });
  symlinkSync(path.join(REPO, 'node_modules'), path.join(root, 'node_modules'), 'dir');
  execFileSync(process.execPath, [path.join(REPO, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
  return { commit, benchApp };
}
