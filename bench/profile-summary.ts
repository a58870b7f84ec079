/**
 * `node dist/bench/profile-summary.js <file.cpuprofile> [top]`: where a V8 CPU profile (written
 * under BENCH_PROFILE_DIR) spent its time, as text: self time per function (name, file, line),
 * and per source file, largest first, in ms and as a share of the non-idle time.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const [file, topArg] = process.argv.slice(2);
if (!file) {
  console.error('usage: node dist/bench/profile-summary.js <file.cpuprofile> [top]');
  process.exit(2);
}
const top = Number(topArg ?? 25);
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const selfUs = new Map<number, number>();
profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));

const shortUrl = (url: string) => {
  if (url === '') return '(native)';
  const clean = url.replace(/^file:\/\//, '');
  const modules = clean.lastIndexOf('node_modules/');
  if (modules >= 0) return clean.slice(modules + 'node_modules/'.length);
  const dist = clean.indexOf('/dist/');
  return dist >= 0 ? clean.slice(dist + 1) : path.basename(clean);
};

const perFunction = new Map<string, number>();
const perFile = new Map<string, number>();
let total = 0;
let idle = 0;
for (const [id, us] of selfUs) {
  const frame = byId.get(id)!.callFrame;
  if (frame.functionName === '(idle)') {
    idle += us;
    continue;
  }
  total += us;
  const name = `${frame.functionName || '(anonymous)'}  ${shortUrl(frame.url)}${frame.url ? `:${frame.lineNumber + 1}` : ''}`;
  perFunction.set(name, (perFunction.get(name) ?? 0) + us);
  const fileKey = frame.url ? shortUrl(frame.url) : frame.functionName;
  perFile.set(fileKey, (perFile.get(fileKey) ?? 0) + us);
}

const ms = (us: number) => (us / 1000).toFixed(0).padStart(7);
const share = (us: number) => `${((us / total) * 100).toFixed(1).padStart(5)}%`;
console.log(`${path.basename(file)}: ${(total / 1e6).toFixed(1)} s busy, ${(idle / 1e6).toFixed(1)} s idle`);
console.log(`\nself time by function (top ${top}):`);
for (const [name, us] of [...perFunction].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${ms(us)} ms ${share(us)}  ${name}`);
console.log(`\nself time by file (top ${top}):`);
for (const [name, us] of [...perFile].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${ms(us)} ms ${share(us)}  ${name}`);
