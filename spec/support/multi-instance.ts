import { fork, type ChildProcess } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { S3ClientSettings } from '../../lib/files/s3-storage.js';
import type { Identity } from '../../lib/auth/identity.js';
import type { CollectionDefinition } from '../../lib/schema/definitions.js';
import type { RecordsRouterOptions } from '../../lib/options.js';

/** Where the instances keep files: one folder, or one bucket (and prefix) of an S3 server. */
export type SharedStorage = { kind: 'disk'; root: string } | { kind: 's3'; bucket: string; prefix: string; client: S3ClientSettings };

/** One recordbase process of a multi-instance run. */
export interface Instance {
  readonly index: number;
  /** `http://127.0.0.1:<port>`; the router is under `/backend`. */
  readonly url: string;
  readonly process: ChildProcess;
  /** Kills the process with SIGKILL (no shutdown of any kind) and waits until it is gone. */
  kill(): Promise<void>;
  /** Stops it as a host does at SIGTERM (records.close(), then server.close()) and waits until the process has exited. */
  shutdown(): Promise<void>;
}

/** Options of `startInstances`. */
export interface StartInstancesOptions {
  count: number;
  /** Postgres URL and schema every instance uses (a schema is set with Knex's searchPath; left out, none: the database's default). */
  databaseUrl: string;
  schema?: string;
  /** The router's `preparedStatements` for every instance (false behind a pooler in transaction mode); left out, the default. */
  preparedStatements?: boolean;
  storage: SharedStorage;
  collections: CollectionDefinition[];
  identities: Record<string, Identity>;
  /** The router's `realtime` option for every instance (e.g. a short `instanceHeartbeatMs`); left out, the default. */
  realtime?: RecordsRouterOptions['realtime'];
  /** The router's `drainMs` for every instance; left out, the default. */
  drainMs?: number;
  /** The router's `rateLimits` for every instance; left out, none. */
  rateLimits?: RecordsRouterOptions['rateLimits'];
}

const SERVER_SCRIPT = fileURLToPath(new URL('./multi-instance-server.mjs', import.meta.url));
const START_TIMEOUT_MS = 30_000;

/**
 * Forks `count` recordbase processes from the built package (dist/: call `ensureBuilt` first) at
 * the same moment, so their schema syncs and file-token secrets race as in a real deployment, and
 * resolves once every one is ready and listening. Each has its own dataDir; they share only the
 * database and the storage. `stopAll` kills whatever is still running and removes the dataDirs.
 */
export async function startInstances(options: StartInstancesOptions): Promise<{ instances: Instance[]; stopAll(): Promise<void> }> {
  const parent = await fs.mkdtemp(path.join(os.tmpdir(), 'rb-instances-'));
  const children: ChildProcess[] = [];
  const exited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null;
  const waitForExit = (child: ChildProcess) => (exited(child) ? Promise.resolve() : new Promise<void>((resolve) => child.once('exit', () => resolve())));
  const stopAll = async (): Promise<void> => {
    for (const child of children) if (!exited(child)) child.kill('SIGKILL');
    await Promise.all(children.map(waitForExit));
    await fs.rm(parent, { recursive: true, force: true });
  };

  const started = Array.from({ length: options.count }, (_, index) => {
    const config = {
      databaseUrl: options.databaseUrl,
      schema: options.schema,
      dataDir: path.join(parent, `instance-${index}`),
      collections: options.collections,
      identities: options.identities,
      storage: options.storage,
      realtime: options.realtime,
      preparedStatements: options.preparedStatements,
      drainMs: options.drainMs,
      rateLimits: options.rateLimits,
    };
    const child = fork(SERVER_SCRIPT, [], { env: { ...process.env, RB_INSTANCE_CONFIG: JSON.stringify(config) }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    children.push(child);
    return new Promise<Instance>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`instance ${index} not ready within ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS);
      child.once('message', (message: { port?: number; error?: string }) => {
        clearTimeout(timer);
        if (typeof message?.port !== 'number') {
          reject(new Error(`instance ${index} failed to start: ${message?.error ?? 'no port'}`));
          return;
        }
        resolve({
          index,
          url: `http://127.0.0.1:${message.port}`,
          process: child,
          async kill() {
            child.kill('SIGKILL');
            await waitForExit(child);
          },
          async shutdown() {
            const gone = waitForExit(child);
            child.send({ shutdown: true });
            await gone;
          },
        });
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`instance ${index} exited (${signal ?? code}) before it was ready`));
      });
    });
  });
  try {
    return { instances: await Promise.all(started), stopAll };
  } catch (error) {
    await stopAll();
    throw error;
  }
}
