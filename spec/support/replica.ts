/**
 * A throwaway primary with a streaming hot-standby replica, for tests of reads routed to replicas.
 *
 * Why: many deployments read from a replica that lags behind the primary (issue 43). The shared
 * server at :5432 takes no replication connections and must never be reconfigured, so each call
 * starts a private primary (spec/support/throwaway-postgres.ts; initdb -A trust writes
 * `host replication all 127.0.0.1/32 trust` into its pg_hba.conf) and copies it with
 * `pg_basebackup -R` into a second temp dir, started as a hot standby on its own port. Replay can
 * be paused and resumed on the replica to make lag on demand, and the replica stopped and started
 * to make it fail.
 */
import pg from 'pg';
import { runPostgresBinary, startThrowawayPostgres, type ThrowawayPostgres } from './throwaway-postgres.js';

/** The replication slot on the primary that keeps the WAL the replica has not received yet (while it is stopped, say). */
const SLOT = 'recordbase_replica';
const WAIT_MS = 30_000;

/** A primary, its replica, and the handles that make the replica lag or fail. */
export interface PrimaryWithReplica {
  /** The primary: read-write, `wal_level=replica`, `synchronous_commit=on` (a commit's LSN is flushed when it returns). */
  readonly primary: ThrowawayPostgres;
  /** The hot standby: read-only, streaming from the primary through the slot `recordbase_replica`. */
  readonly replica: ThrowawayPostgres;
  /** The primary's current WAL position (`pg_current_wal_lsn()`): after a commit returns, it covers that commit. */
  primaryLsn(): Promise<string>;
  /** Pauses replay on the replica (`pg_wal_replay_pause()`) and resolves once it is paused; WAL is still received. */
  pauseReplay(): Promise<void>;
  /** Resumes replay on the replica (`pg_wal_replay_resume()`). A restart of the replica resumes it too. */
  resumeReplay(): Promise<void>;
  /** Bytes of WAL the primary has written that the replica has not replayed yet. */
  replayLagBytes(): Promise<number>;
  /** Resolves once the replica has replayed up to `lsn` (default: the primary's position now). */
  waitForReplay(lsn?: string): Promise<void>;
  /** Resolves once the replica has received (not necessarily replayed) the WAL up to `lsn` (default: the primary's position now). */
  waitForReceive(lsn?: string): Promise<void>;
  /** Stops the replica (`pg_ctl stop -m fast`): its clients are cut off, the primary keeps its WAL in the slot. */
  stopReplica(): Promise<void>;
  /** Starts the replica again on the same port; it catches up from the slot. */
  startReplica(): Promise<void>;
  /** Destroys the replica, then the primary. Idempotent. */
  destroy(): Promise<void>;
}

/** Runs one statement on a connection of its own and resolves its rows (either server may be restarted between calls). */
export async function queryOnce<R extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Polls `probe` until it is true; after WAIT_MS fails naming `what` and the probe's last error. */
async function pollUntil(what: string, probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  let lastError: unknown;
  for (;;) {
    try {
      if (await probe()) return;
      lastError = undefined;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`replica: timed out after ${WAIT_MS} ms waiting until ${what}${lastError ? ` (last error: ${(lastError as Error).message})` : ''}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/**
 * Starts a throwaway primary and a streaming hot-standby replica of it (pg_basebackup -R with a
 * replication slot), both on free ports of 127.0.0.1 with trust authentication, and resolves once
 * the replica answers queries. Always `await pair.destroy()` in afterAll.
 */
export async function startPrimaryWithReplica(): Promise<PrimaryWithReplica> {
  const primary = await startThrowawayPostgres({
    settings: { wal_level: 'replica', max_wal_senders: 4, max_replication_slots: 4, full_page_writes: 'on', synchronous_commit: 'on' },
  });
  let replica: ThrowawayPostgres;
  try {
    replica = await startThrowawayPostgres({
      settings: { hot_standby: 'on' },
      createDataDir: async (dataDir) => {
        await runPostgresBinary('pg_basebackup', [
          '-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres', '-w',
          '-D', dataDir, '-R', '-X', 'stream', '-c', 'fast', '-C', '-S', SLOT, '--no-sync',
        ]);
      },
    });
  } catch (err) {
    await primary.destroy().catch(() => undefined);
    throw err;
  }

  async function primaryLsn(): Promise<string> {
    const [row] = await queryOnce<{ lsn: string }>(primary.url, 'SELECT pg_current_wal_lsn()::text AS lsn');
    return row!.lsn;
  }

  async function replicaReached(column: 'replay' | 'receive', lsn: string): Promise<boolean> {
    const position = column === 'replay' ? 'pg_last_wal_replay_lsn()' : 'pg_last_wal_receive_lsn()';
    const [row] = await queryOnce<{ done: boolean | null }>(replica.url, `SELECT ${position} >= $1::pg_lsn AS done`, [lsn]);
    return row!.done === true;
  }

  return {
    primary,
    replica,
    primaryLsn,
    async pauseReplay() {
      await queryOnce(replica.url, 'SELECT pg_wal_replay_pause()');
      // 'pause requested' until the startup process sees it: only 'paused' means nothing more is replayed.
      await pollUntil('replay is paused', async () => {
        const [row] = await queryOnce<{ state: string }>(replica.url, 'SELECT pg_get_wal_replay_pause_state() AS state');
        return row!.state === 'paused';
      });
    },
    async resumeReplay() {
      await queryOnce(replica.url, 'SELECT pg_wal_replay_resume()');
    },
    async replayLagBytes() {
      const [replayed] = await queryOnce<{ lsn: string | null }>(replica.url, 'SELECT pg_last_wal_replay_lsn()::text AS lsn');
      if (!replayed?.lsn) throw new Error('replica: pg_last_wal_replay_lsn() is null (not in recovery?)');
      const [row] = await queryOnce<{ lag: string }>(primary.url, 'SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::text AS lag', [replayed.lsn]);
      return Number(row!.lag);
    },
    async waitForReplay(lsn) {
      const target = lsn ?? (await primaryLsn());
      await pollUntil(`the replica has replayed ${target}`, () => replicaReached('replay', target));
    },
    async waitForReceive(lsn) {
      const target = lsn ?? (await primaryLsn());
      await pollUntil(`the replica has received ${target}`, () => replicaReached('receive', target));
    },
    stopReplica: () => replica.stop(),
    startReplica: () => replica.start(),
    async destroy() {
      await replica.destroy().catch(() => undefined);
      await primary.destroy();
    },
  };
}
