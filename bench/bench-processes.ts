/**
 * The child processes of the benchmarks (bench/run.ts, bench/storage-bench.ts): servers forked
 * from this folder that announce their port over IPC, and a fresh load generator (load.js) per
 * measurement, so that no server shares a process with the load or with another server.
 */
import { fork, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LoadReply, LoadRequest, LoadSummary } from './load.js';
// The module alone, not the package's index: the baseline's process loads nothing else of recordbase.
import { createAppServer, type PrototypedApp } from '../lib/http/create-app-server.js';
import { databaseCpuSecondsBetween, readCpuSeconds, readDatabaseCpuSeconds } from './machine.js';
import type { LoadSpec } from './scenarios.js';

const here = path.dirname(fileURLToPath(import.meta.url));
/** Every child still running; killed when the benchmark exits, however it exits. */
const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

/** A positive number from a flag or the environment (`raw`), or `fallback` when absent; throws on anything else. */
export function parsePositive(name: string, raw: string | undefined, fallback: number): number {
  const n = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got "${raw}"`);
  return n;
}

/**
 * The server side of `startServer`, for a forked host app: listens on 127.0.0.1 (port 0), sends
 * `{ type: 'ready', port }`, and on SIGTERM or when the runner goes away closes the server, then
 * `close()` (the router, the pool), and exits. The server is made by createAppServer, as the docs
 * advise a host; with BENCH_EXPRESS_LISTEN=1 (`--express-listen`) as `app.listen` makes it.
 */
export function serveBenchApp(options: { app: PrototypedApp; close(): Promise<void>; listening?(port: number): Promise<void> }): void {
  const server = process.env.BENCH_EXPRESS_LISTEN === '1' ? http.createServer(options.app) : createAppServer(options.app);
  server.listen(0, '127.0.0.1', () => {
    const { port } = server.address() as AddressInfo;
    void (options.listening?.(port) ?? Promise.resolve()).then(
      () => process.send!({ type: 'ready', port }),
      (err: unknown) => {
        console.error(err);
        process.exit(1);
      },
    );
  });
  const shutdown = async (): Promise<void> => {
    server.close();
    server.closeAllConnections();
    await options.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown());
  process.once('disconnect', () => void shutdown());
}

/** A forked server: its process, its port and its base URL. */
export interface ServerProcess {
  name: string;
  child: ChildProcess;
  pid: number;
  base: string;
}

/** Resolves with the next IPC message of `type` from `child`; rejects if it exits or stays silent. */
export function waitForMessage<T extends { type: string }>(child: ChildProcess, type: string, timeoutMs: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => done(new Error(`no "${type}" message from pid ${child.pid} within ${timeoutMs} ms`)), timeoutMs);
    const onMessage = (message: T) => {
      if (message?.type === type) done(undefined, message);
    };
    const onExit = (code: number | null) => done(new Error(`pid ${child.pid} exited (code ${code}) before sending "${type}"`));
    function done(error?: Error, message?: T) {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
      if (error) reject(error);
      else resolve(message!);
    }
    child.on('message', onMessage);
    child.on('exit', onExit);
  });
}

/** Forks a compiled script of this folder with extra environment. */
export function forkBenchScript(script: string, env: Record<string, string>, execArgv: string[] = []): ChildProcess {
  const child = fork(path.resolve(here, script), [], { env: { ...process.env, ...env }, execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/**
 * Forks a server script and waits for its `{ type: 'ready', port }`. `nodeFlags` are Node and V8
 * flags for its process (`--node-flags`: the same for every server of a run).
 */
export async function startServer(name: string, script: string, env: Record<string, string>, nodeFlags: readonly string[] = []): Promise<ServerProcess> {
  // BENCH_PROFILE_DIR: each server writes a V8 CPU profile there when it stops (open it in Chrome DevTools).
  const profileDir = process.env.BENCH_PROFILE_DIR;
  const profile = profileDir ? ['--cpu-prof', '--cpu-prof-dir', profileDir, '--cpu-prof-name', `${name}-${Date.now()}.cpuprofile`] : [];
  const child = forkBenchScript(script, env, [...nodeFlags, ...profile]);
  const { port } = await waitForMessage<{ type: 'ready'; port: number }>(child, 'ready', 120_000);
  return { name, child, pid: child.pid!, base: `http://127.0.0.1:${port}` };
}

/** SIGTERM, then SIGKILL after 10 s. */
export async function stopServer(server: ServerProcess): Promise<void> {
  if (server.child.exitCode !== null) return;
  const exited = new Promise((resolve) => server.child.once('exit', resolve));
  server.child.kill('SIGTERM');
  await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 10_000))]);
  if (server.child.exitCode === null) server.child.kill('SIGKILL');
}

/** What one server did in one scenario: the measured window, and its own CPU time per request (warm-up included). */
export interface Measurement extends LoadSummary {
  cpuMsPerRequest: number;
  /** The kernel's share of it (syscalls: sockets, files). */
  systemMsPerRequest: number;
  /** The Postgres server processes' CPU per request over the same time (0 on the embedded engine, which runs inside the server). */
  databaseMsPerRequest: number;
  /** Answers of the warm-up that were not 2xx (the measured window's are `non2xx`). */
  warmupNon2xx: number;
}

/** How hard and how long to load a server. */
export interface LoadSettings {
  connections: number;
  warmupSeconds: number;
  durationSeconds: number;
  /** A fixed request rate (per second, all connections together) instead of as fast as the server answers. */
  rate?: number;
}

/** Runs one load spec against one server in a fresh load-generator process. */
export async function measureLoad(options: { server: ServerProcess; spec: LoadSpec; load: LoadSettings }): Promise<Measurement> {
  const { server, spec, load } = options;
  const cpuBefore = readCpuSeconds(server.pid);
  const databaseBefore = readDatabaseCpuSeconds();
  const child = forkBenchScript('load.js', {});
  const reply = waitForMessage<LoadReply>(child, 'result', (load.warmupSeconds + load.durationSeconds) * 1000 + 120_000);
  child.send({
    type: 'run',
    url: server.base,
    spec,
    connections: load.connections,
    warmupSeconds: load.warmupSeconds,
    durationSeconds: load.durationSeconds,
    rate: load.rate,
  } satisfies LoadRequest);
  const { warmup, measured } = await reply;
  const cpuAfter = readCpuSeconds(server.pid);
  const databaseSeconds = databaseCpuSecondsBetween(databaseBefore, readDatabaseCpuSeconds());
  const requests = warmup.total + measured.total;
  const user = cpuAfter.user - cpuBefore.user;
  const system = cpuAfter.system - cpuBefore.system;
  return {
    ...measured,
    cpuMsPerRequest: ((user + system) * 1000) / requests,
    systemMsPerRequest: (system * 1000) / requests,
    databaseMsPerRequest: (databaseSeconds * 1000) / requests,
    warmupNon2xx: warmup.non2xx,
  };
}
