import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from '@jest/globals';
import { existsSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import knexFactory, { type Knex } from 'knex';
import { RecordStore } from '../../lib/db/record-store.js';
import { FILE_SWEEP_LOCK_KEY, OUTBOX_PRUNE_LOCK_KEY } from '../../lib/db/shared-names.js';
import { StatementRunner } from '../../lib/db/statements/statement-runner.js';
import { syncDatabaseSchema } from '../../lib/db/schema/sync-database-schema.js';
import { diskStorage, type DiskStorage } from '../../lib/files/disk-storage.js';
import type { Storage, StoredObject } from '../../lib/files/storage.js';
import { selectReferencedFileNames, startFileSweeper, sweepUnreferencedFiles } from '../../lib/files/sweep-files.js';
import type { Logger } from '../../lib/logger.js';
import { buildSchemaRegistry, type CollectionSchema, type SchemaRegistry } from '../../lib/schema/collection-schema.js';
import { openTestDatabase, testEngines, type TestDatabase } from '../support/test-database.js';

const DAY = 24 * 60 * 60 * 1000;
const OLD = 10 * DAY;
const YOUNG = 60 * 60 * 1000;

const registry: SchemaRegistry = buildSchemaRegistry([
  {
    name: 'docs',
    fields: [
      { name: 'title', type: 'text' },
      { name: 'cover', type: 'file' },
      { name: 'attachments', type: 'file', maxSelect: 5 },
    ],
  },
  { name: 'notes', fields: [{ name: 'text', type: 'text' }] },
]);
const docs = registry.get('docs') as CollectionSchema;
const C = docs.id;

const A = 'aaaaaaaaaaaaaaa';
const B = 'bbbbbbbbbbbbbbb';
const GONE = 'ddddddddddddddd';
const COVER = 'cover_aaaaaaaaaa.png';
const ATT1 = 'report_bbbbbbbbbb.pdf';
const ATT2 = 'photo_cccccccccc.jpg';
const STALE = 'stale_dddddddddd.png';
const OLD_B = 'old_eeeeeeeeee.txt';
const YOUNG_B = 'young_ffffffffff.txt';
const GONE_FILE = 'gone_gggggggggg.png';
const GONE_YOUNG = 'fresh_hhhhhhhhhh.txt';

/** Every object of the standard fixture, with its age and what the sweep must do with it. */
const FIXTURE: { key: string; bytes: number; age: number; fate: 'keep' | 'remove' | 'skip' }[] = [
  { key: `${C}/${A}/${COVER}`, bytes: 101, age: OLD, fate: 'keep' },
  { key: `${C}/${A}/thumbs_${COVER}/100x100_${COVER}`, bytes: 102, age: OLD, fate: 'keep' },
  { key: `${C}/${A}/${ATT1}`, bytes: 103, age: OLD, fate: 'keep' },
  { key: `${C}/${A}/${ATT2}`, bytes: 104, age: OLD, fate: 'keep' },
  { key: `${C}/${A}/thumbs_${ATT2}/0x50f_${ATT2}`, bytes: 105, age: OLD, fate: 'keep' },
  { key: `${C}/${A}/${STALE}`, bytes: 1000, age: OLD, fate: 'remove' },
  { key: `${C}/${A}/thumbs_${STALE}/100x100_${STALE}`, bytes: 200, age: OLD, fate: 'remove' },
  { key: `${C}/${B}/${OLD_B}`, bytes: 30, age: OLD, fate: 'remove' },
  { key: `${C}/${B}/${YOUNG_B}`, bytes: 40, age: YOUNG, fate: 'keep' },
  { key: `${C}/${GONE}/${GONE_FILE}`, bytes: 5, age: OLD, fate: 'remove' },
  { key: `${C}/${GONE}/thumbs_${GONE_FILE}/100x100t_${GONE_FILE}`, bytes: 6, age: OLD, fate: 'remove' },
  { key: `${C}/${GONE}/${GONE_YOUNG}`, bytes: 7, age: YOUNG, fate: 'keep' },
  { key: `pbc_unknown00/${GONE}/${GONE_FILE}`, bytes: 8, age: OLD, fate: 'skip' },
  { key: `${C}/${A}/notes.txt`, bytes: 9, age: OLD, fate: 'skip' },
  { key: `${C}/README`, bytes: 10, age: OLD, fate: 'skip' },
  { key: `${C}/${A}/thumbs_${STALE}/garbage`, bytes: 11, age: OLD, fate: 'skip' },
];
const EXPECTED = {
  scanned: FIXTURE.length,
  removed: FIXTURE.filter((f) => f.fate === 'remove').length,
  bytesFreed: FIXTURE.filter((f) => f.fate === 'remove').reduce((sum, f) => sum + f.bytes, 0),
  skipped: FIXTURE.filter((f) => f.fate === 'skip').length,
  failed: 0,
  locked: true,
};

/** A logger that remembers, so tests can see what the sweeper reported. */
function createMemoryLogger(): Logger & { lines: { level: string; message: string }[] } {
  const lines: { level: string; message: string }[] = [];
  return {
    lines,
    error: (message) => lines.push({ level: 'error', message }),
    warn: (message) => lines.push({ level: 'warn', message }),
    info: (message) => lines.push({ level: 'info', message }),
  };
}

/** Resolves once `check` holds, polling; fails after `timeoutMs`. */
async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > timeoutMs) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe.each(testEngines())('the unreferenced-file sweep on %s', (engine) => {
  let database: TestDatabase;
  let db: Knex;
  let dir: string;
  let storage: DiskStorage;

  /** Writes an object through the storage and back-dates its mtime by `age` ms. */
  async function put(key: string, bytes: number, age: number): Promise<void> {
    await storage.write(key, Readable.from([Buffer.alloc(bytes, 0x61)]));
    const when = new Date(Date.now() - age);
    await fs.utimes(path.join(storage.root, ...key.split('/')), when, when);
  }

  async function remainingKeys(): Promise<string[]> {
    const keys: string[] = [];
    for await (const object of storage.list('')) keys.push(object.key);
    return keys.sort();
  }

  const keysWithFate = (...fates: string[]) => FIXTURE.filter((f) => fates.includes(f.fate)).map((f) => f.key).sort();

  // One database per engine for the file (opening PGlite takes seconds); each test starts from
  // the same two records and a fresh storage folder.
  beforeAll(async () => {
    database = await openTestDatabase(engine);
    db = database.db;
    await syncDatabaseSchema(db, registry.collections);
  });

  afterAll(async () => {
    await database?.destroy();
  });

  beforeEach(async () => {
    await db.raw(`DELETE FROM "docs"`);
    const store = new RecordStore(db);
    await store.insert(docs, { id: A, title: 'a', cover: COVER, attachments: [ATT1, ATT2] });
    await store.insert(docs, { id: B, title: 'b', cover: '', attachments: [] });
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'rb-sweep-'));
    storage = diskStorage({ root: path.join(dir, 'storage'), fsync: false });
    for (const object of FIXTURE) await put(object.key, object.bytes, object.age);
  });

  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  test('selectReferencedFileNames reads single and multi file fields; a missing record is absent', async () => {
    const references = await selectReferencedFileNames(new StatementRunner(db), { collection: docs, recordIds: [A, B, GONE, A] });
    expect([...references.keys()].sort()).toEqual([A, B]);
    expect([...references.get(A)!].sort()).toEqual([ATT2, COVER, ATT1].sort());
    expect(references.get(B)!.size).toBe(0);
    expect((await selectReferencedFileNames(new StatementRunner(db), { collection: docs, recordIds: [] })).size).toBe(0);
  });

  test('removes old unreferenced files and thumbnails; keeps referenced, young and unknown ones; exact report', async () => {
    const report = await sweepUnreferencedFiles({ database: db, registry, storage, minAgeMs: DAY });
    expect(report).toEqual(EXPECTED);
    expect(await remainingKeys()).toEqual(keysWithFate('keep', 'skip'));
    // A second sweep finds nothing more to do.
    expect(await sweepUnreferencedFiles({ database: db, registry, storage, minAgeMs: DAY })).toEqual({
      ...EXPECTED,
      scanned: EXPECTED.scanned - EXPECTED.removed,
      removed: 0,
      bytesFreed: 0,
    });
  });

  test('a dry run removes nothing but reports the same counts and bytes as the real run', async () => {
    const before = await remainingKeys();
    const dry = await sweepUnreferencedFiles({ database: db, registry, storage, minAgeMs: DAY, dryRun: true });
    expect(dry).toEqual(EXPECTED);
    expect(await remainingKeys()).toEqual(before);
    const real = await sweepUnreferencedFiles({ database: db, registry, storage, minAgeMs: DAY });
    expect(real).toEqual(dry);
  });

  test('the grace period follows minAgeMs and now: a longer grace keeps everything, a later clock removes young files too', async () => {
    const longGrace = await sweepUnreferencedFiles({ database: db, registry, storage, minAgeMs: 30 * DAY });
    expect(longGrace).toEqual({ ...EXPECTED, removed: 0, bytesFreed: 0 });
    expect(await remainingKeys()).toHaveLength(FIXTURE.length);
    const later = await sweepUnreferencedFiles({ database: db, registry, storage, minAgeMs: DAY, now: new Date(Date.now() + 2 * DAY) });
    expect(later.removed).toBe(EXPECTED.removed + 2);
    expect(later.bytesFreed).toBe(EXPECTED.bytesFreed + 40 + 7);
    expect(await remainingKeys()).toEqual(keysWithFate('keep', 'skip').filter((k) => !k.endsWith(YOUNG_B) && !k.endsWith(GONE_YOUNG)));
  });

  test('a record updated to drop a file frees it; a record deleted frees all of its files', async () => {
    const store = new RecordStore(db);
    await store.update(docs, A, { cover: '', attachments: [ATT2] });
    await store.deleteByIds(docs, [B]);
    const report = await sweepUnreferencedFiles({ database: db, registry, storage, minAgeMs: DAY });
    // Newly free: the cover and its thumbnail, the first attachment; B's young file stays (grace).
    expect(report.removed).toBe(EXPECTED.removed + 3);
    expect(report.bytesFreed).toBe(EXPECTED.bytesFreed + 101 + 102 + 103);
    const left = await remainingKeys();
    expect(left).toContain(`${C}/${A}/${ATT2}`);
    expect(left).toContain(`${C}/${A}/thumbs_${ATT2}/0x50f_${ATT2}`);
    expect(left).toContain(`${C}/${B}/${YOUNG_B}`);
    expect(left).not.toContain(`${C}/${A}/${COVER}`);
  });

  test('checks in batches: 1,200 files over 600 records, half of them deleted, with progress along the way', async () => {
    await fs.rm(storage.root, { recursive: true, force: true });
    const store = new RecordStore(db);
    const kept: string[] = [];
    for (let i = 0; i < 600; i++) {
      const id = `r${String(i).padStart(14, '0')}`;
      const name = `f_${String(i).padStart(10, '0')}.bin`;
      const stray = `s_${String(i).padStart(10, '0')}.bin`;
      if (i % 2 === 0) {
        await store.insert(docs, { id, title: '', cover: name, attachments: [] });
        kept.push(`${C}/${id}/${name}`);
      }
      await put(`${C}/${id}/${name}`, 3, OLD);
      await put(`${C}/${id}/${stray}`, 2, OLD);
    }
    const progress: { scanned: number; removed: number }[] = [];
    const report = await sweepUnreferencedFiles({ database: db, registry, storage, minAgeMs: DAY, onProgress: (p) => progress.push(p) });
    expect(report).toEqual({ scanned: 1200, removed: 900, bytesFreed: 300 * 3 + 600 * 2, skipped: 0, failed: 0, locked: true });
    expect(await remainingKeys()).toEqual(kept.sort());
    expect(progress.length).toBeGreaterThanOrEqual(12);
    expect(progress.at(-1)).toEqual({ scanned: 1200, removed: 900 });
    for (let i = 1; i < progress.length; i++) {
      expect(progress[i]!.scanned).toBeGreaterThanOrEqual(progress[i - 1]!.scanned);
      expect(progress[i]!.removed).toBeGreaterThanOrEqual(progress[i - 1]!.removed);
    }
  }, 60_000);

  test('a failed removal is counted and reported, and the sweep carries on', async () => {
    const failing = `${C}/${B}/${OLD_B}`;
    const flaky: Storage = {
      ...storage,
      list: (prefix) => storage.list(prefix),
      delete: async (key) => {
        if (key === failing) throw new Error('disk on fire');
        return storage.delete(key);
      },
    };
    const failures: string[] = [];
    const report = await sweepUnreferencedFiles({ database: db, registry, storage: flaky, minAgeMs: DAY, onDeleteError: ({ key }) => failures.push(key) });
    expect(report).toEqual({ ...EXPECTED, removed: EXPECTED.removed - 1, bytesFreed: EXPECTED.bytesFreed - 30, failed: 1 });
    expect(failures).toEqual([failing]);
    expect(await remainingKeys()).toEqual([...keysWithFate('keep', 'skip'), failing].sort());
  });

  test('the app keeps using the database while a sweep runs (no long transaction on a single connection)', async () => {
    // A storage whose listing queries the database between objects, as the app's requests would
    // while a sweep walks a large store. On PGlite (one connection) a sweep holding a transaction
    // for its whole walk would make these queries wait for it: a deadlock here.
    const busy: Storage = {
      ...storage,
      list: (prefix) => ({
        async *[Symbol.asyncIterator](): AsyncGenerator<StoredObject> {
          for await (const object of storage.list(prefix)) {
            let timer: NodeJS.Timeout | undefined;
            const timeout = new Promise((_, reject) => {
              timer = setTimeout(() => reject(new Error('the database was blocked by the sweep')), 5_000);
            });
            try {
              await Promise.race([db.raw('SELECT 1 AS one'), timeout]);
            } finally {
              clearTimeout(timer);
            }
            yield object;
          }
        },
      }),
    };
    expect(await sweepUnreferencedFiles({ database: db, registry, storage: busy, minAgeMs: DAY })).toEqual(EXPECTED);
  });

  if (engine === 'postgres') {
    // Only on Postgres: PGlite has a single connection, so no second session can hold the lock
    // while the sweep runs (a transaction holding it would occupy the only connection and the
    // sweep would just wait for it), and advisory locks are re-entrant within one session. PGlite
    // also opens a data directory in one process only, so there is no other instance to exclude.
    test('another instance holding the lock: locked false, nothing scanned or removed; it runs once released', async () => {
      const before = await remainingKeys();
      const trx = await db.transaction();
      try {
        await trx.raw('SELECT pg_advisory_xact_lock(?::bigint)', [FILE_SWEEP_LOCK_KEY]);
        const report = await sweepUnreferencedFiles({ database: db, registry, storage, minAgeMs: DAY });
        expect(report).toEqual({ scanned: 0, removed: 0, bytesFreed: 0, skipped: 0, failed: 0, locked: false });
        expect(await remainingKeys()).toEqual(before);
      } finally {
        await trx.commit();
      }
      expect(await sweepUnreferencedFiles({ database: db, registry, storage, minAgeMs: DAY })).toEqual(EXPECTED);
    });

    test('another instance pruning the realtime outbox (holding its lock) does not stop the sweep (issue 30 bug 1)', async () => {
      const trx = await db.transaction();
      try {
        await trx.raw('SELECT pg_advisory_xact_lock(?::bigint)', [OUTBOX_PRUNE_LOCK_KEY]);
        expect(await sweepUnreferencedFiles({ database: db, registry, storage, minAgeMs: DAY })).toEqual(EXPECTED);
      } finally {
        await trx.commit();
      }
    });

    test('a single-connection pool takes a session lock, honours another holder and releases it afterwards', async () => {
      const schema = ((await db.raw('SELECT current_schema() AS s')) as { rows: { s: string }[] }).rows[0]!.s;
      const single = knexFactory({ client: 'pg', connection: process.env.RB_TEST_POSTGRES!, searchPath: [schema], pool: { min: 0, max: 1 } });
      try {
        const trx = await db.transaction();
        try {
          await trx.raw('SELECT pg_advisory_xact_lock(?::bigint)', [FILE_SWEEP_LOCK_KEY]);
          expect((await sweepUnreferencedFiles({ database: single, registry, storage, minAgeMs: DAY })).locked).toBe(false);
        } finally {
          await trx.commit();
        }
        expect(await sweepUnreferencedFiles({ database: single, registry, storage, minAgeMs: DAY })).toEqual(EXPECTED);
        // Released: another session can take it at once.
        const free = await db.transaction(async (other) => (await other.raw('SELECT pg_try_advisory_xact_lock(?::bigint) AS ok', [FILE_SWEEP_LOCK_KEY])).rows[0].ok);
        expect(free).toBe(true);
      } finally {
        await single.destroy();
      }
    });
  }

  test('startFileSweeper sweeps on its timer, logs what it removed, and stop() ends it', async () => {
    const logger = createMemoryLogger();
    const sweeper = startFileSweeper({ database: db, registry, storage, intervalMs: 50, initialDelayMs: 10, minAgeMs: DAY, logger });
    try {
      await waitFor(() => !existsSync(path.join(storage.root, C, B, OLD_B)));
      await waitFor(() => logger.lines.length > 0);
    } finally {
      await sweeper.stop();
    }
    expect(await remainingKeys()).toEqual(keysWithFate('keep', 'skip'));
    expect(logger.lines[0]!.level).toBe('info');
    expect(logger.lines[0]!.message).toContain(`removed ${EXPECTED.removed} (${EXPECTED.bytesFreed} bytes)`);
    expect(logger.lines.filter((l) => l.level === 'error')).toEqual([]);
  });

  test('startFileSweeper logs a failing sweep instead of throwing, and tries again at the next interval', async () => {
    const logger = createMemoryLogger();
    let calls = 0;
    const broken: Storage = {
      ...storage,
      list: () => ({
        async *[Symbol.asyncIterator](): AsyncGenerator<StoredObject> {
          calls++;
          throw new Error('bucket unreachable');
        },
      }),
    };
    const sweeper = startFileSweeper({ database: db, registry, storage: broken, intervalMs: 20, initialDelayMs: 5, minAgeMs: DAY, logger });
    try {
      await waitFor(() => calls >= 2);
    } finally {
      await sweeper.stop();
    }
    expect(logger.lines.filter((l) => l.level === 'error').length).toBeGreaterThanOrEqual(1);
    expect(logger.lines[0]!.message).toContain('bucket unreachable');
  });

  test('stop() waits for a running sweep, which stops early; no sweep starts afterwards', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let listings = 0;
    let yielded = 0;
    const slow: Storage = {
      ...storage,
      list: (prefix) => ({
        async *[Symbol.asyncIterator](): AsyncGenerator<StoredObject> {
          listings++;
          for await (const object of storage.list(prefix)) {
            await gate;
            yielded++;
            yield object;
          }
        },
      }),
    };
    const sweeper = startFileSweeper({ database: db, registry, storage: slow, intervalMs: 20, initialDelayMs: 5, minAgeMs: DAY, logger: createMemoryLogger() });
    await waitFor(() => listings === 1);
    let stopped = false;
    const stopping = sweeper.stop().then(() => (stopped = true));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(stopped).toBe(false); // the sweep is still inside the storage's listing
    release();
    await stopping;
    expect(yielded).toBeLessThan(FIXTURE.length); // it stopped at the next object, not after the whole walk
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(listings).toBe(1);
    // Nothing was removed: the walk stopped before its batch was checked.
    expect(await remainingKeys()).toHaveLength(FIXTURE.length);
  });

  test('rejects a negative grace period before touching anything', async () => {
    await expect(sweepUnreferencedFiles({ database: db, registry, storage, minAgeMs: -1 })).rejects.toThrow(RangeError);
    expect(await remainingKeys()).toHaveLength(FIXTURE.length);
  });
});
