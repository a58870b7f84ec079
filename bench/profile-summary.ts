/**
 * Summarises a V8 CPU profile (`BENCH_PROFILE_DIR`, `--cpu-prof`): self time grouped by where the
 * code lives (a package, one of recordbase's files, Node's internals, garbage collection), and
 * the functions that cost the most, optionally per request.
 *
 *   node dist/bench/profile-summary.js file.cpuprofile [--requests N] [--top 30] [--from S --to S]
 *
 * `--requests N` divides every time by N (CPU ms per request: pass the requests the server
 * answered while profiled). `--from`/`--to` keep only the samples between those seconds after
 * the profile started (one cell of a run). Idle time (`(idle)`) is left out of the totals.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Where a frame's code lives: `knex`, `pg`, `express`, `lib/query/compile-filter.js`, `node:internal`, `(gc)`... */
export function groupOf(frame: CallFrame): string {
  const url = frame.url;
  if (!url) return frame.functionName.startsWith('(') ? frame.functionName : '(native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (pkg) return pkg[1]!;
  const own = /\/dist\/((?:lib|bench)\/.*)$/.exec(url);
  if (own) return own[1]!;
  if (url.startsWith('node:')) return 'node:' + (url.startsWith('node:internal') ? 'internal' : url.slice(5));
  return url;
}

export interface ProfileSummary {
  /** Profiled CPU time, idle excluded, in ms. */
  totalMs: number;
  groups: Map<string, number>;
  functions: Map<string, number>;
  /** Time by what the request was doing: the innermost frame of the stack that falls in one of STAGES. */
  stages: Map<string, number>;
}

/**
 * The stages of a request, tried from the innermost frame of a sample outwards: the first frame
 * that matches names the stage (so pg's parsing under Knex's runner counts as row decoding, and
 * Knex's runner under a record-store call counts as Knex). Frames that match none (Node's
 * internals, natives) leave the sample to the frame that called them.
 */
const STAGES: [string, (group: string, fn: string) => boolean][] = [
  ['JSON and the response (res.json, etag, http)', (g, f) => (g === 'express' && /^(json|send|stringify)$/.test(f)) || g === 'etag' || g === 'node:_http_outgoing' || f === 'writev'],
  ['row decoding (pg, dates, readRow)', (g, f) => g === 'pg' || g === 'pg-protocol' || g === 'pg-types' || g === 'postgres-date' || g === 'lib/schema/record-date.js' || f === 'readRow' || f === 'readValue'],
  ['statement bounds (lib/db/statements/statement-bounds)', (g) => g === 'lib/db/statements/statement-bounds.js' || g === 'lib/db/statements/database-context.js' || g === 'node:async_hooks'],
  ['Knex: pool (tarn)', (g) => g === 'tarn'],
  ['Knex: query builder and compiler', (g) => g === 'knex' || g === 'lodash'],
  ['filter, sort, rules: parse and compile', (g) => g.startsWith('lib/query/') && g !== 'lib/query/apply-fields.js' && g !== 'lib/query/parse-fields.js' && g !== 'lib/query/parse-expand.js' || g === 'lib/records/access-rules.js' || g === 'lib/records/record-order.js'],
  ['fields/expand parse, presenting (serialize, expand, applyFields)', (g) => /^lib\/(records\/(present-records|serialize-record|expand-records)|query\/(apply-fields|parse-fields|parse-expand))\.js$/.test(g)],
  ['record store and service (SQL assembly, create/validate)', (g) => g.startsWith('lib/db/') || g.startsWith('lib/records/') || g.startsWith('lib/schema/') || g.startsWith('lib/files/')],
  ['auth, request parsing (resolveCaller, list params, body)', (g) => g.startsWith('lib/http/') || g.startsWith('lib/auth/') || g === 'body-parser' || g === 'raw-body' || g === 'node:querystring' || g === 'qs'],
  ['routing (express, router, lib/router)', (g) => g === 'express' || g === 'router' || g === 'lib/router.js' || g === 'path-to-regexp' || g === 'parseurl' || g === 'finalhandler'],
  ['the host app / baseline handlers', (g) => g.startsWith('bench/')],
  ['HTTP in (node:http, net)', (g) => g === 'node:_http_server' || g === 'node:_http_incoming' || g === 'node:_http_common' || g === 'node:net'],
];

export function summarize(profile: CpuProfile, window?: { fromS?: number; toS?: number }): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
  const stageCache = new Map<number, string>();
  const stageOf = (id: number): string => {
    const cached = stageCache.get(id);
    if (cached !== undefined) return cached;
    let stage = 'other (GC, microtasks, Node internals)';
    for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
      const frame = byId.get(at)!.callFrame;
      const hit = STAGES.find(([, test]) => test(groupOf(frame), frame.functionName));
      if (hit) {
        stage = hit[0];
        break;
      }
    }
    stageCache.set(id, stage);
    return stage;
  };
  const stages = new Map<string, number>();
  const groups = new Map<string, number>();
  const functions = new Map<string, number>();
  let totalMs = 0;
  let t = profile.startTime;
  const from = window?.fromS === undefined ? -Infinity : profile.startTime + window.fromS * 1e6;
  const to = window?.toS === undefined ? Infinity : profile.startTime + window.toS * 1e6;
  for (let i = 0; i < profile.samples.length; i++) {
    const delta = profile.timeDeltas[i] ?? 0;
    t += delta;
    if (t < from || t > to) continue;
    const node = byId.get(profile.samples[i]!);
    if (!node || node.callFrame.functionName === '(idle)') continue;
    const ms = delta / 1000;
    totalMs += ms;
    const group = groupOf(node.callFrame);
    groups.set(group, (groups.get(group) ?? 0) + ms);
    const fn = `${node.callFrame.functionName || '(anonymous)'} ${group}:${node.callFrame.lineNumber + 1}`;
    functions.set(fn, (functions.get(fn) ?? 0) + ms);
    const stage = stageOf(node.id);
    stages.set(stage, (stages.get(stage) ?? 0) + ms);
  }
  return { totalMs, groups, functions, stages };
}

function main(): void {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { requests: { type: 'string' }, top: { type: 'string' }, from: { type: 'string' }, to: { type: 'string' } },
  });
  const top = Number(values.top ?? 30);
  for (const file of positionals) {
    const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
    const summary = summarize(profile, { fromS: values.from === undefined ? undefined : Number(values.from), toS: values.to === undefined ? undefined : Number(values.to) });
    const requests = Number(values.requests ?? 0);
    const unit = requests > 0 ? 'ms/req' : 'ms';
    const scale = (ms: number) => (requests > 0 ? ms / requests : ms);
    console.log(`\n${file}: ${scale(summary.totalMs).toFixed(3)} ${unit} of CPU (idle excluded)`);
    console.log(`\n| stage | ${unit} | share |\n|---|---|---|`);
    for (const [stage, ms] of [...summary.stages].sort((a, b) => b[1] - a[1])) {
      console.log(`| ${stage} | ${scale(ms).toFixed(3)} | ${((100 * ms) / summary.totalMs).toFixed(1)}% |`);
    }
    console.log(`\n| where | ${unit} | share |\n|---|---|---|`);
    for (const [group, ms] of [...summary.groups].sort((a, b) => b[1] - a[1]).slice(0, top)) {
      console.log(`| ${group} | ${scale(ms).toFixed(3)} | ${((100 * ms) / summary.totalMs).toFixed(1)}% |`);
    }
    console.log(`\n| function | ${unit} | share |\n|---|---|---|`);
    for (const [fn, ms] of [...summary.functions].sort((a, b) => b[1] - a[1]).slice(0, top)) {
      console.log(`| ${fn} | ${scale(ms).toFixed(3)} | ${((100 * ms) / summary.totalMs).toFixed(1)}% |`);
    }
  }
}

if (process.argv[1]?.endsWith('profile-summary.js')) main();
