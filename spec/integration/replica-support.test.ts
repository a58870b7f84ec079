/**
 * Checks the replica test helper (spec/support/replica.ts) against real servers: a throwaway
 * primary and its streaming hot standby. A row written on the primary appears on the replica;
 * with replay paused the replica has received the WAL but does not show the row until replay is
 * resumed; a stopped replica refuses connections and, started again, catches up. Issue 43's
 * replica routing (lag, read-your-writes, a replica failing) is tested on this.
 */
import { queryOnce as query, startPrimaryWithReplica, type PrimaryWithReplica } from '../support/replica.js';

/** Generous: two clusters (initdb, pg_basebackup, two starts) take 2-4 s here, far more on a loaded 2-core machine. */
const TIMEOUT_MS = 120_000;

async function ids(url: string): Promise<number[]> {
  return (await query<{ id: number }>(url, 'SELECT id FROM notes ORDER BY id')).map((row) => row.id);
}

describe('startPrimaryWithReplica', () => {
  let pair: PrimaryWithReplica;

  beforeAll(async () => {
    pair = await startPrimaryWithReplica();
  }, TIMEOUT_MS);

  afterAll(async () => {
    await pair?.destroy();
  }, TIMEOUT_MS);

  test('the replica is a read-only hot standby on its own port, streaming from the primary', async () => {
    expect(pair.replica.port).not.toBe(pair.primary.port);
    expect(await query(pair.replica.url, 'SELECT pg_is_in_recovery() AS standby')).toEqual([{ standby: true }]);
    expect(await query(pair.primary.url, 'SELECT pg_is_in_recovery() AS standby')).toEqual([{ standby: false }]);
    const senders = await query<{ slot: string; state: string }>(
      pair.primary.url,
      "SELECT s.slot_name AS slot, r.state FROM pg_stat_replication r JOIN pg_replication_slots s ON s.active_pid = r.pid",
    );
    expect(senders).toEqual([{ slot: 'recordbase_replica', state: 'streaming' }]);
    await expect(query(pair.replica.url, 'CREATE TABLE refused (id int)')).rejects.toThrow(/read-only transaction/);
  }, TIMEOUT_MS);

  test('a row written on the primary appears on the replica', async () => {
    await query(pair.primary.url, 'CREATE TABLE notes (id int PRIMARY KEY)');
    await query(pair.primary.url, 'INSERT INTO notes VALUES (1)');
    await pair.waitForReplay(await pair.primaryLsn());
    expect(await ids(pair.replica.url)).toEqual([1]);
  }, TIMEOUT_MS);

  test('with replay paused the replica receives the WAL but shows the row only once replay resumes', async () => {
    await pair.pauseReplay();
    await query(pair.primary.url, 'INSERT INTO notes VALUES (2)');
    const lsn = await pair.primaryLsn();
    // The WAL with the row has arrived: its absence below is the pause's doing, not the network's.
    await pair.waitForReceive(lsn);
    expect(await ids(pair.replica.url)).toEqual([1]);
    expect(await ids(pair.primary.url)).toEqual([1, 2]);
    expect(await pair.replayLagBytes()).toBeGreaterThan(0);

    await pair.resumeReplay();
    await pair.waitForReplay(lsn);
    expect(await ids(pair.replica.url)).toEqual([1, 2]);
  }, TIMEOUT_MS);

  test('a stopped replica refuses connections; started again it catches up from its slot', async () => {
    await pair.stopReplica();
    expect(pair.replica.running).toBe(false);
    await expect(ids(pair.replica.url)).rejects.toThrow(/ECONNREFUSED/);
    await query(pair.primary.url, 'INSERT INTO notes VALUES (3)');
    const lsn = await pair.primaryLsn();

    await pair.startReplica();
    await pair.waitForReplay(lsn);
    expect(await ids(pair.replica.url)).toEqual([1, 2, 3]);
    // Caught up: what is left is at most the primary's own background WAL since.
    await pair.waitForReplay();
  }, TIMEOUT_MS);
});
