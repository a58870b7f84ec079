/**
 * Checks the throwaway-postgres test helper itself: a private cluster can be started, queried,
 * stopped (queries then fail), restarted on the same URL, and destroyed (data dir removed).
 * Why: restart-simulation tests depend on this helper; if it misbehaves they fail confusingly.
 */
import { existsSync } from 'node:fs';
import pg from 'pg';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/throwaway-postgres.js';

/** Generous: initdb + start is ~1-2 s here, but CI machines under parallel load can be slow. */
const TIMEOUT_MS = 60_000;

async function selectOne(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const res = await client.query<{ one: number }>('SELECT 1 AS one');
    return res.rows[0]!.one;
  } finally {
    await client.end().catch(() => undefined);
  }
}

describe('startThrowawayPostgres', () => {
  let db: ThrowawayPostgres | undefined;

  afterAll(async () => {
    await db?.destroy();
  }, TIMEOUT_MS);

  it('starts, stops, restarts on the same port and is destroyed', async () => {
    let t = Date.now();
    db = await startThrowawayPostgres();
    const startMs = Date.now() - t;

    expect(db.port).toBeGreaterThan(0);
    expect(db.port).not.toBe(5432);
    expect(db.url).toBe(`postgres://postgres@127.0.0.1:${db.port}/postgres`);
    expect(db.running).toBe(true);
    expect(existsSync(db.dataDir)).toBe(true);
    expect(await selectOne(db.url)).toBe(1);

    // A connection held across the stop sees its query fail (fast shutdown terminates it).
    const held = new pg.Client({ connectionString: db.url });
    const heldErrors: Error[] = [];
    held.on('error', (e) => heldErrors.push(e));
    await held.connect();

    t = Date.now();
    await db.stop();
    const stopMs = Date.now() - t;
    expect(db.running).toBe(false);

    await expect(held.query('SELECT 1')).rejects.toThrow();
    await held.end().catch(() => undefined);
    await expect(selectOne(db.url)).rejects.toThrow(/ECONNREFUSED/);

    const port = db.port;
    t = Date.now();
    await db.start();
    const restartMs = Date.now() - t;
    expect(db.port).toBe(port);
    expect(db.running).toBe(true);
    expect(await selectOne(db.url)).toBe(1);

    const dataDir = db.dataDir;
    const baseDir = db.baseDir;
    await db.destroy();
    expect(existsSync(dataDir)).toBe(false);
    expect(existsSync(baseDir)).toBe(false);
    await expect(selectOne(db.url)).rejects.toThrow(/ECONNREFUSED/);
    // destroy() is idempotent
    await db.destroy();

    // Visible with --verbose; handy to see how cheap a restart is.
    console.log(`throwaway postgres: start ${startMs} ms, stop ${stopMs} ms, restart ${restartMs} ms`);
  }, TIMEOUT_MS);

  it('gives parallel callers distinct ports and directories', async () => {
    const [a, b] = await Promise.all([startThrowawayPostgres(), startThrowawayPostgres()]);
    try {
      expect(a.port).not.toBe(b.port);
      expect(a.baseDir).not.toBe(b.baseDir);
      expect(await selectOne(a.url)).toBe(1);
      expect(await selectOne(b.url)).toBe(1);
    } finally {
      await Promise.all([a.destroy(), b.destroy()]);
    }
    expect(existsSync(a.baseDir)).toBe(false);
    expect(existsSync(b.baseDir)).toBe(false);
  }, TIMEOUT_MS);
});
