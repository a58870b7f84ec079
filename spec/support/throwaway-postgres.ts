/**
 * Throwaway PostgreSQL clusters for tests.
 *
 * Why: the shared server on 127.0.0.1:5432 is used by many test files at once and must never be
 * stopped or reconfigured. Tests that need to *restart* the database (connection-loss handling,
 * pool recovery, ...) therefore get their own private cluster: a fresh `initdb` in a temp dir,
 * on its own free port, with a Unix-socket dir inside that temp dir, so it cannot collide with
 * the shared server or with other test files doing the same thing in parallel.
 *
 * Requires the PostgreSQL server binaries (Debian: /usr/lib/postgresql/<major>/bin). When running
 * as root the binaries are run as the `postgres` OS user via `runuser` (initdb refuses root).
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { chown, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import process from 'node:process';
import { promisify } from 'node:util';
import pg from 'pg';

const execFileAsync = promisify(execFile);

/** A private, disposable PostgreSQL server owned by one test file. */
export interface ThrowawayPostgres {
  /** TCP port on 127.0.0.1; stays the same across stop()/start() so the URL remains valid. */
  readonly port: number;
  /** Connection URL: `postgres://postgres@127.0.0.1:PORT/postgres` (trust auth, no password). */
  readonly url: string;
  /** Data directory (inside the temp dir); exposed so tests can assert on/inspect it. */
  readonly dataDir: string;
  /** Temp dir holding data dir, socket dir and server log; removed by destroy(). */
  readonly baseDir: string;
  /** The server's log (pg_ctl -l), inside the temp dir; read it when a start or a test goes wrong. */
  readonly logFile: string;
  /** Whether the server is currently running (as far as this handle knows). */
  readonly running: boolean;
  /** `pg_ctl stop -m fast -w`: terminates client connections, simulating a database outage. No-op if stopped. */
  stop(): Promise<void>;
  /** Starts the server again on the same data dir and port (simulates the database coming back). No-op if running. */
  start(): Promise<void>;
  /** Stops the server if running and deletes the temp dir. Idempotent; the handle is unusable afterwards. */
  destroy(): Promise<void>;
}

/** Options for {@link startThrowawayPostgres}; all optional, the defaults suit unit-speed tests. */
export interface ThrowawayPostgresOptions {
  /** Directory with initdb/pg_ctl/postgres. Default: $PG_BIN, else the newest /usr/lib/postgresql/<n>/bin, else PATH. */
  binDir?: string;
  /** Extra `-c name=value` server settings appended to the defaults. */
  settings?: Record<string, string | number>;
  /**
   * Makes the data directory instead of initdb: a copy of another cluster (pg_basebackup, as a
   * streaming replica does; see spec/support/replica.ts). Called once the temp dir exists and
   * belongs to the `postgres` OS user; run the server's binaries with {@link runPostgresBinary}.
   */
  createDataDir?: (dataDir: string) => Promise<void>;
}

const CMD_TIMEOUT_MS = 30_000;
const PORT_ATTEMPTS = 5;

/** Instances not yet destroyed, for the best-effort process 'exit' cleanup. */
const live = new Set<Instance>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // 'exit' handlers must be synchronous: stop with -m immediate (no wait for checkpoint), then rm.
  process.on('exit', () => {
    for (const inst of live) inst.destroySync();
  });
}

function findBinDir(explicit?: string): string | undefined {
  if (explicit) return explicit;
  if (process.env.PG_BIN) return process.env.PG_BIN;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined; // fall back to PATH
  const majors = readdirSync(root)
    .filter((v) => /^\d+$/.test(v) && existsSync(path.join(root, v, 'bin', 'pg_ctl')))
    .sort((a, b) => Number(b) - Number(a));
  return majors.length ? path.join(root, majors[0]!, 'bin') : undefined;
}

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

/** Builds [file, args] running `bin` as the postgres OS user when we are root (pgbouncer.ts runs PgBouncer so). */
export function asPostgres(binDir: string | undefined, bin: string, args: string[]): [string, string[]] {
  const exe = binDir ? path.join(binDir, bin) : bin;
  return isRoot ? ['runuser', ['-u', 'postgres', '--', exe, ...args]] : [exe, args];
}

/** Error whose message includes the command's stderr/stdout (execFile's own message often lacks them). */
class CommandError extends Error {
  constructor(
    message: string,
    readonly stderr: string,
    readonly stdout: string,
  ) {
    super(message);
    this.name = 'ThrowawayPostgresCommandError';
  }
}

/**
 * Runs one of the server's binaries (pg_basebackup, psql, ...) from the same bin dir as the
 * throwaway servers, as the `postgres` OS user when we are root; resolves its stdout, rejects
 * with its stderr in the message.
 */
export function runPostgresBinary(bin: string, args: string[], options: { binDir?: string } = {}): Promise<string> {
  return run(findBinDir(options.binDir), bin, args);
}

async function run(binDir: string | undefined, bin: string, args: string[], extra = ''): Promise<string> {
  const [file, argv] = asPostgres(binDir, bin, args);
  try {
    const { stdout } = await execFileAsync(file, argv, { timeout: CMD_TIMEOUT_MS, encoding: 'utf8' });
    return stdout;
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string; stdout?: string; killed?: boolean; signal?: string };
    const stderr = (e.stderr ?? '').trim();
    const stdout = (e.stdout ?? '').trim();
    const why = e.killed ? `timed out after ${CMD_TIMEOUT_MS} ms` : e.code !== undefined ? `exit ${e.code}` : e.message;
    const parts = [`${file} ${argv.join(' ')} failed (${why})`];
    if (stderr) parts.push(`stderr:\n${stderr}`);
    if (stdout) parts.push(`stdout:\n${stdout}`);
    if (extra) parts.push(extra);
    throw new CommandError(parts.join('\n'), stderr, stdout);
  }
}

/** Asks the kernel for a free port on 127.0.0.1. Racy by nature; callers retry if their server cannot bind it. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => (port ? resolve(port) : reject(new Error('could not determine a free port'))));
    });
  });
}

class Instance implements ThrowawayPostgres {
  readonly dataDir: string;
  readonly socketDir: string;
  readonly logFile: string;
  port = 0;
  private isRunning = false;
  private destroyed = false;
  /** Serialises start/stop/destroy so overlapping calls cannot interleave pg_ctl invocations. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    readonly baseDir: string,
    private readonly binDir: string | undefined,
    private readonly settings: Record<string, string | number>,
  ) {
    this.dataDir = path.join(baseDir, 'data');
    this.socketDir = path.join(baseDir, 'sock');
    this.logFile = path.join(baseDir, 'server.log');
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  get running(): boolean {
    return this.isRunning;
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.queue.then(fn, fn);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async logTail(lines = 20): Promise<string> {
    try {
      const text = await readFile(this.logFile, 'utf8');
      return `server log (${this.logFile}, last ${lines} lines):\n${text.trimEnd().split('\n').slice(-lines).join('\n')}`;
    } catch {
      return '';
    }
  }

  async initdb(createDataDir?: (dataDir: string) => Promise<void>): Promise<void> {
    await chown(this.baseDir, ...postgresIds());
    await mkdir(this.socketDir);
    await chown(this.socketDir, ...postgresIds());
    if (createDataDir) return createDataDir(this.dataDir);
    await run(this.binDir, 'initdb', [
      '-D', this.dataDir,
      '-U', 'postgres',
      '-A', 'trust',
      '-E', 'UTF8',
      '--locale=C',
      '--no-sync',
      '--no-instructions',
    ]);
  }

  /** One pg_ctl start attempt on this.port; resolves false if the port turned out to be taken. */
  private async tryStart(): Promise<boolean> {
    const settings: Record<string, string | number> = {
      listen_addresses: '127.0.0.1',
      fsync: 'off',
      full_page_writes: 'off',
      synchronous_commit: 'off',
      ...this.settings,
    };
    const opts = [`-p ${this.port}`, `-k ${this.socketDir}`, ...Object.entries(settings).map(([k, v]) => `-c ${k}=${v}`)];
    try {
      // -l is essential: without it the postmaster inherits our stdout/stderr pipes and execFile
      // would wait for them to close, i.e. until the server exits.
      await run(this.binDir, 'pg_ctl', ['start', '-w', '-t', '20', '-D', this.dataDir, '-l', this.logFile, '-o', opts.join(' ')]);
    } catch (err) {
      const log = await this.logTail();
      if (/could not bind|Address already in use|could not create any TCP\/IP sockets/i.test(log)) return false;
      if (err instanceof Error && log) err.message += `\n${log}`;
      throw err;
    }
    await this.checkReady();
    return true;
  }

  /** Confirms the server answers SQL over TCP on our port (pg_ctl -w only watches postmaster.pid). */
  private async checkReady(): Promise<void> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 2_000 });
      client.on('error', () => undefined);
      try {
        await client.connect();
        await client.query('SELECT 1');
        return;
      } catch (err) {
        if (Date.now() > deadline) {
          throw new Error(`throwaway postgres on port ${this.port} not answering: ${(err as Error).message}\n${await this.logTail()}`);
        }
        await new Promise((r) => setTimeout(r, 50));
      } finally {
        await client.end().catch(() => undefined);
      }
    }
  }

  /** First start: picks a port, retrying with a fresh one if another process grabbed it meanwhile. */
  async firstStart(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      this.port = await freePort();
      if (await this.tryStart()) break;
      if (attempt >= PORT_ATTEMPTS) {
        throw new Error(`throwaway postgres: no bindable port after ${PORT_ATTEMPTS} attempts\n${await this.logTail()}`);
      }
    }
    this.isRunning = true;
  }

  start(): Promise<void> {
    return this.serial(async () => {
      if (this.destroyed) throw new Error('throwaway postgres: start() after destroy()');
      if (this.isRunning) return;
      // Restart must keep the port (clients hold the URL); if someone took it, fail loudly.
      if (!(await this.tryStart())) {
        throw new Error(`throwaway postgres: port ${this.port} was taken while the server was stopped\n${await this.logTail()}`);
      }
      this.isRunning = true;
    });
  }

  stop(): Promise<void> {
    return this.serial(async () => {
      if (this.destroyed) throw new Error('throwaway postgres: stop() after destroy()');
      if (!this.isRunning) return;
      await this.pgCtlStop('fast');
      this.isRunning = false;
    });
  }

  private async pgCtlStop(mode: 'fast' | 'immediate'): Promise<void> {
    await run(this.binDir, 'pg_ctl', ['stop', '-m', mode, '-w', '-t', '20', '-D', this.dataDir], await this.logTail());
  }

  destroy(): Promise<void> {
    return this.serial(async () => {
      if (this.destroyed) return;
      this.destroyed = true;
      live.delete(this);
      // Stop whenever a postmaster.pid exists, even if we think it's stopped (e.g. a failed start()).
      if (this.isRunning || existsSync(path.join(this.dataDir, 'postmaster.pid'))) {
        try {
          await this.pgCtlStop('fast');
        } catch {
          await this.pgCtlStop('immediate').catch(() => undefined);
        }
        this.isRunning = false;
      }
      await rm(this.baseDir, { recursive: true, force: true });
    });
  }

  /** Synchronous variant for the process 'exit' hook; never throws. */
  destroySync(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    try {
      if (existsSync(path.join(this.dataDir, 'postmaster.pid'))) {
        const [file, argv] = asPostgres(this.binDir, 'pg_ctl', ['stop', '-m', 'immediate', '-w', '-t', '10', '-D', this.dataDir]);
        execFileSync(file, argv, { timeout: 15_000, stdio: 'ignore' });
      }
    } catch {
      /* best effort */
    }
    try {
      rmSync(this.baseDir, { recursive: true, force: true });
    } catch {
      /* best effort */
    }
  }
}

let postgresIdsCache: [number, number] | undefined;
/** uid/gid of the `postgres` OS user when root (so it can own the temp dir), else our own. */
export function postgresIds(): [number, number] {
  if (!isRoot) return [process.getuid!(), process.getgid!()];
  if (!postgresIdsCache) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8', timeout: 5_000 }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8', timeout: 5_000 }).trim());
    postgresIdsCache = [uid, gid];
  }
  return postgresIdsCache;
}

/**
 * Creates and starts a private PostgreSQL cluster (fresh initdb, trust auth, fsync off, free port).
 *
 * Why: lets a test stop/start "the database" without touching the shared server on :5432 that
 * other test files use concurrently. Safe to call from several jest workers at once (each call
 * gets its own temp dir, socket dir and port). Always `await pg.destroy()` in afterAll; a process
 * 'exit' hook also tears down anything left over, best effort.
 */
export async function startThrowawayPostgres(options: ThrowawayPostgresOptions = {}): Promise<ThrowawayPostgres> {
  const baseDir = await mkdtemp(path.join(os.tmpdir(), 'recordbase-pg-'));
  const inst = new Instance(baseDir, findBinDir(options.binDir), options.settings ?? {});
  live.add(inst);
  installExitHook();
  try {
    await inst.initdb(options.createDataDir);
    await inst.firstStart();
  } catch (err) {
    await inst.destroy().catch(() => undefined);
    throw err;
  }
  return inst;
}

/** A throwaway server and a plain connection to it for watching `pg_stat_activity`. */
export interface MonitoredPostgres {
  readonly server: ThrowawayPostgres;
  readonly monitor: pg.Client;
  /** Ends the monitor's connection, then destroys the server. */
  destroy(): Promise<void>;
}

/** Starts a throwaway server (startThrowawayPostgres) and connects a monitor to it. */
export async function startMonitoredPostgres(options: ThrowawayPostgresOptions = {}): Promise<MonitoredPostgres> {
  const server = await startThrowawayPostgres(options);
  const monitor = new pg.Client({ connectionString: server.url });
  await monitor.connect();
  return {
    server,
    monitor,
    async destroy() {
      await monitor.end();
      await server.destroy();
    },
  };
}
