/**
 * Throwaway PgBouncer processes for tests.
 *
 * Why: most production Postgres sits behind a pooler in transaction mode (PgBouncer, Supavisor,
 * Neon's pooled URL), where a client's session is not a server's session: named prepared
 * statements, LISTEN and session settings do not follow the client (issue 43). Tests that prove
 * recordbase works there run through a real PgBouncer: Debian's package (`.ci/run` installs it),
 * 1.18, without `max_prepared_statements`. Each call starts a private process on a free port with
 * its ini, user list and log in a temp dir, so test files running in parallel never share one,
 * and none uses the package's own service.
 *
 * PgBouncer refuses to run as root: as root it runs as the `postgres` OS user via `runuser`, as
 * spec/support/throwaway-postgres.ts does for the server's binaries.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { chown, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import process from 'node:process';
import { promisify } from 'node:util';
import pg from 'pg';
import { asPostgres, freePort, postgresIds } from './throwaway-postgres.js';

const execFileAsync = promisify(execFile);

/** Where Debian's package puts the binary; `PGBOUNCER_BIN` overrides it. */
export const PGBOUNCER_PATH = process.env.PGBOUNCER_BIN ?? '/usr/sbin/pgbouncer';

/** The database name of PgBouncer's admin console (`SHOW POOLS`, `KILL db`, `RECONNECT`). */
const ADMIN_DATABASE = 'pgbouncer';
const START_TIMEOUT_MS = 20_000;
const STOP_TIMEOUT_MS = 10_000;
const PORT_ATTEMPTS = 5;

/**
 * Whether PgBouncer is installed. Without it, and without CI, the pooler suites are skipped with a
 * warning; with CI=true a missing binary fails the run, since CI must prove the pooler.
 */
export function pgBouncerAvailable(): boolean {
  if (existsSync(PGBOUNCER_PATH)) return true;
  if (process.env.CI === 'true') {
    throw new Error(`CI=true but no PgBouncer at ${PGBOUNCER_PATH}: install Debian's pgbouncer (see .ci/run)`);
  }
  console.warn(`\n*** No PgBouncer at ${PGBOUNCER_PATH}: the pooler suites are SKIPPED (apt-get install pgbouncer). ***\n`);
  return false;
}

/** Options for {@link startPgBouncer}. */
export interface PgBouncerOptions {
  /** The Postgres server every database name is forwarded to (PgBouncer's `* = host= port=`). */
  target: { host: string; port: number };
  /** `transaction`: a server connection per transaction (what poolers in production do); `session`: per client connection. */
  poolMode: 'transaction' | 'session';
  /** Server connections per database and user (`default_pool_size`). Default 2, so that clients share them. */
  poolSize?: number;
  /** Client connections PgBouncer accepts in all (`max_client_conn`). Default 100. */
  maxClientConnections?: number;
  /** User names clients may log in as (trust: no password); the first is also the admin. Default `['postgres']`. */
  users?: string[];
  /** Startup parameters PgBouncer drops instead of refusing the client. Default `['extra_float_digits']`. */
  ignoreStartupParameters?: string[];
  /** Further `[pgbouncer]` settings, written after the defaults (e.g. `server_round_robin: 1`). */
  settings?: Record<string, string | number>;
}

/** A row of an admin command's answer: node-postgres reads PgBouncer's integer columns as numbers, the rest as text. */
export type AdminRow = Record<string, string | number | null>;

/** A private PgBouncer process owned by one test file. */
export interface PgBouncer {
  /** TCP port on 127.0.0.1; stays the same across stop()/start(). */
  readonly port: number;
  /** Temp dir holding the ini, the user list, the log and the pid file; removed by destroy(). */
  readonly baseDir: string;
  /** PgBouncer's log; read it when a test goes wrong. */
  readonly logFile: string;
  /** Whether the process runs (as far as this handle knows). */
  readonly running: boolean;
  /** `postgres://user@127.0.0.1:PORT/database` through the pooler; the user defaults to the first of `users`. */
  url(database: string, user?: string): string;
  /**
   * Runs one admin console command (`SHOW SERVERS`, `SHOW POOLS`, `KILL test`, `RECONNECT test`,
   * `PAUSE`, `RESUME`) on a connection of its own, and resolves its rows.
   */
  admin(command: string): Promise<AdminRow[]>;
  /** Immediate shutdown (SIGTERM): every client and server connection is closed, as when the pooler goes away. No-op if stopped. */
  stop(): Promise<void>;
  /** Starts the process again on the same port and settings. No-op if running. */
  start(): Promise<void>;
  /** Stops the process if it runs and deletes the temp dir. Idempotent; the handle is unusable afterwards. */
  destroy(): Promise<void>;
}

/** Instances not yet destroyed, for the best-effort process 'exit' cleanup. */
const live = new Set<Bouncer>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const bouncer of live) bouncer.destroySync();
  });
}

/**
 * Whether the process with this pid still runs. A zombie does not: the daemon's parent is init,
 * and the init of a container may reap it only seconds later, while signal 0 still finds it.
 */
function processRuns(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' && existsSync('/proc/self/stat')) return false;
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A value for the ini file: PgBouncer reads the rest of the line, so a line break would inject a setting. */
function iniValue(value: string | number): string {
  const text = String(value);
  if (/[\r\n]/.test(text)) throw new Error(`pgbouncer setting value with a line break: ${JSON.stringify(text)}`);
  return text;
}

class Bouncer implements PgBouncer {
  readonly logFile: string;
  private readonly iniFile: string;
  private readonly pidFile: string;
  private readonly users: string[];
  port = 0;
  private isRunning = false;
  private destroyed = false;
  /** Serialises start/stop/destroy so overlapping calls cannot interleave. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    readonly baseDir: string,
    private readonly options: PgBouncerOptions,
  ) {
    this.logFile = path.join(baseDir, 'pgbouncer.log');
    this.iniFile = path.join(baseDir, 'pgbouncer.ini');
    this.pidFile = path.join(baseDir, 'pgbouncer.pid');
    this.users = options.users ?? ['postgres'];
    if (this.users.length === 0) throw new Error('startPgBouncer: users must name at least one user');
  }

  get running(): boolean {
    return this.isRunning;
  }

  url(database: string, user = this.users[0]!): string {
    return `postgres://${encodeURIComponent(user)}@127.0.0.1:${this.port}/${encodeURIComponent(database)}`;
  }

  async admin(command: string): Promise<AdminRow[]> {
    const client = new pg.Client({ connectionString: this.url(ADMIN_DATABASE), connectionTimeoutMillis: 5_000 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      // No parameters: the admin console speaks only the simple query protocol.
      const result = await client.query<AdminRow>(command);
      return result.rows ?? [];
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.queue.then(fn, fn);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async logSince(offset: number): Promise<string> {
    try {
      return (await readFile(this.logFile, 'utf8')).slice(offset);
    } catch {
      return '';
    }
  }

  private async logSize(): Promise<number> {
    try {
      return (await stat(this.logFile)).size;
    } catch {
      return 0;
    }
  }

  private async writeFiles(): Promise<void> {
    const { target, poolMode } = this.options;
    const settings: Record<string, string | number> = {
      listen_addr: '127.0.0.1',
      listen_port: this.port,
      unix_socket_dir: '',
      auth_type: 'trust',
      auth_file: path.join(this.baseDir, 'userlist.txt'),
      admin_users: this.users[0]!,
      stats_users: this.users[0]!,
      pool_mode: poolMode,
      default_pool_size: this.options.poolSize ?? 2,
      max_client_conn: this.options.maxClientConnections ?? 100,
      ignore_startup_parameters: (this.options.ignoreStartupParameters ?? ['extra_float_digits']).join(','),
      logfile: this.logFile,
      pidfile: this.pidFile,
      // Tests kill servers and clients on purpose; their connects and closes are the log worth reading.
      log_connections: 1,
      log_disconnections: 1,
      ...this.options.settings,
    };
    const ini = [
      '[databases]',
      `* = host=${iniValue(target.host)} port=${iniValue(target.port)}`,
      '',
      '[pgbouncer]',
      ...Object.entries(settings).map(([key, value]) => `${key} = ${iniValue(value)}`),
      '',
    ].join('\n');
    const userList = this.users.map((user) => `"${user.replace(/"/g, '""')}" ""`).join('\n') + '\n';
    await writeFile(this.iniFile, ini);
    await writeFile(path.join(this.baseDir, 'userlist.txt'), userList);
    const [uid, gid] = postgresIds();
    for (const file of [this.baseDir, this.iniFile, path.join(this.baseDir, 'userlist.txt')]) await chown(file, uid, gid);
  }

  /** One start on this.port; resolves false if the port turned out to be taken. */
  private async tryStart(): Promise<boolean> {
    await this.writeFiles();
    const logOffset = await this.logSize();
    const [file, argv] = asPostgres(path.dirname(PGBOUNCER_PATH), path.basename(PGBOUNCER_PATH), ['-d', this.iniFile]);
    try {
      // -d: the process goes to the background once its config is read; it binds the port after.
      await execFileAsync(file, argv, { timeout: START_TIMEOUT_MS, encoding: 'utf8' });
    } catch (err) {
      const e = err as Error & { stderr?: string };
      throw new Error(`pgbouncer did not start: ${e.message}\n${e.stderr ?? ''}\n${await this.logSince(logOffset)}`);
    }
    const deadline = Date.now() + START_TIMEOUT_MS;
    for (;;) {
      const log = await this.logSince(logOffset);
      if (/Address already in use|nowhere to listen/.test(log)) return false;
      if (/FATAL/.test(log)) throw new Error(`pgbouncer failed to start:\n${log}`);
      try {
        await this.admin('SHOW VERSION');
        return true;
      } catch (err) {
        if (Date.now() > deadline) {
          throw new Error(`pgbouncer on port ${this.port} not answering: ${(err as Error).message}\n${log}`);
        }
        await pause(50);
      }
    }
  }

  async firstStart(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      this.port = await freePort();
      if (await this.tryStart()) break;
      if (attempt >= PORT_ATTEMPTS) throw new Error(`pgbouncer: no bindable port after ${PORT_ATTEMPTS} attempts\n${await this.logSince(0)}`);
    }
    this.isRunning = true;
  }

  start(): Promise<void> {
    return this.serial(async () => {
      if (this.destroyed) throw new Error('pgbouncer: start() after destroy()');
      if (this.isRunning) return;
      if (!(await this.tryStart())) throw new Error(`pgbouncer: port ${this.port} was taken while it was stopped`);
      this.isRunning = true;
    });
  }

  stop(): Promise<void> {
    return this.serial(async () => {
      if (this.destroyed) throw new Error('pgbouncer: stop() after destroy()');
      if (!this.isRunning) return;
      await this.kill();
      this.isRunning = false;
    });
  }

  private readPid(): number | undefined {
    try {
      const pid = Number(readFileSync(this.pidFile, 'utf8').trim());
      return Number.isInteger(pid) && pid > 0 ? pid : undefined;
    } catch {
      return undefined;
    }
  }

  /** SIGTERM (PgBouncer's immediate shutdown), then waits until the process is gone; SIGKILL if it lingers. */
  private async kill(): Promise<void> {
    const pid = this.readPid();
    if (pid === undefined || !processRuns(pid)) return;
    process.kill(pid, 'SIGTERM');
    const deadline = Date.now() + STOP_TIMEOUT_MS;
    while (processRuns(pid)) {
      if (Date.now() > deadline) {
        process.kill(pid, 'SIGKILL');
        await pause(100);
        break;
      }
      await pause(20);
    }
    // A SIGKILLed process leaves its pid file, which would make the next start refuse.
    await rm(this.pidFile, { force: true });
  }

  destroy(): Promise<void> {
    return this.serial(async () => {
      if (this.destroyed) return;
      this.destroyed = true;
      live.delete(this);
      await this.kill();
      this.isRunning = false;
      await rm(this.baseDir, { recursive: true, force: true });
    });
  }

  /** Synchronous variant for the process 'exit' hook; never throws. */
  destroySync(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    try {
      const pid = this.readPid();
      if (pid !== undefined) process.kill(pid, 'SIGKILL');
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

/**
 * Starts a private PgBouncer in front of `target` (any database name is forwarded under its own
 * name), with trust authentication and the first user as admin, on a free port of 127.0.0.1, and
 * resolves once its admin console answers. Always `await bouncer.destroy()` in afterAll; a process
 * 'exit' hook also kills anything left over, best effort.
 */
export async function startPgBouncer(options: PgBouncerOptions): Promise<PgBouncer> {
  const baseDir = await mkdtemp(path.join(os.tmpdir(), 'recordbase-pgbouncer-'));
  const bouncer = new Bouncer(baseDir, options);
  live.add(bouncer);
  installExitHook();
  try {
    await bouncer.firstStart();
  } catch (err) {
    await bouncer.destroy().catch(() => undefined);
    throw err;
  }
  return bouncer;
}
