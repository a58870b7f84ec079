/**
 * The posts the update and delete scenarios write on, prepared before each of their cells with one
 * `INSERT ... SELECT ... FROM generate_series` straight into the table: the update rotates over a
 * set of its own per server, the delete removes each post of a fresh range once. Ids follow
 * `preparedPostId` (bench-data.ts), so that the load generator names them without asking the
 * database; titles start with WRITE_MARKER, so that the cleanup removes whatever is left.
 */
import { PREPARED_ID_PREFIX, preparedPostId, USER_COUNT, WRITE_MARKER } from './bench-data.js';
import type { Measurement, ServerProcess } from './bench-processes.js';
import type { LoadSpec, Scenario } from './scenarios.js';

/**
 * Runs one statement (knex `?` placeholders) on the database `server` answers from and resolves
 * with its rows: on Postgres both servers share one, on the embedded engine each has its own.
 */
export type RunSql = (server: ServerProcess, sql: string, bindings: unknown[]) => Promise<Record<string, unknown>[]>;

/** How many posts each server's update cells rotate over. */
export const UPDATE_ROWS = 1000;

/** How long a cell loads a server, and at what fixed rate if any. */
export interface CellLoad {
  warmupSeconds: number;
  durationSeconds: number;
  rate?: number;
}

/** Prepares the rows of the update and delete cells and checks what those cells answered. */
export interface WritePreparer {
  /** The spec one cell of `scenario` on `server` runs: for update and delete, on posts prepared for it now; otherwise the scenario's own. */
  prepareCell(scenario: Scenario, server: ServerProcess, load: CellLoad): Promise<LoadSpec>;
  /** The id of a post prepared for one request of `kind` on `server` (the answer checks, the SQL capture). */
  prepareSample(kind: 'update' | 'delete', server: ServerProcess): Promise<string>;
  /**
   * Notes a measured cell: its rate raises the estimate of later delete cells on that server. An
   * update, delete or batch cell with any answer but 2xx throws: a delete cell that ran out of
   * posts sends the rest to a missing id, and a 404 is not work. (Create and upload cells keep
   * the table's `!` mark for theirs, as before.)
   */
  checkCell(scenario: Scenario, server: ServerProcess, measured: Measurement): void;
}

/** The cells that must answer nothing but 2xx. */
const STRICT_KEYS = new Set(['update', 'delete', 'batch']);

/** One INSERT of `count` prepared posts of `kind` from number `first`; a post already there is left as it is. */
function insertPrepared(kind: keyof typeof PREPARED_ID_PREFIX, first: number, count: number): [string, unknown[]] {
  const prefix = PREPARED_ID_PREFIX[kind];
  // Unpublished and with views below 100: outside the list scenarios' filter, whatever is left over.
  const sql = `INSERT INTO posts (id, title, body, views, published, author, cover, created, updated)
    SELECT ?::text || substr(md5(?::text || i), 1, 14), ?::text || i, '', 0, false, 'u' || substr(md5('u' || (1 + i % ?::int)), 1, 14), '', now(), now()
    FROM generate_series(?::int, ?::int) AS i
    ON CONFLICT (id) DO NOTHING`;
  return [sql, [prefix, prefix, `${WRITE_MARKER} prepared ${kind} `, USER_COUNT, first, first + count - 1]];
}

/**
 * `deleteRate`: the fastest rate of deletes a server is assumed to reach (per second): a cell
 * prepares that many posts per second of its warm-up and measurement, or twice the rate that
 * server reached in an earlier delete cell if more, or 1.5 times a fixed rate.
 */
export function createWritePreparer(options: { runSql: RunSql; deleteRate: number }): WritePreparer {
  const { runSql, deleteRate } = options;
  // One counter per kind for the whole run: on Postgres both servers' posts live in one table.
  let nextDelete = 1;
  let nextUpdate = 1;
  const updateRanges = new Map<ServerProcess, number>();
  const fastestDelete = new Map<ServerProcess, number>();

  async function insert(server: ServerProcess, kind: keyof typeof PREPARED_ID_PREFIX, first: number, count: number): Promise<void> {
    const [sql, bindings] = insertPrepared(kind, first, count);
    await runSql(server, sql, bindings);
  }

  /** The server's update posts; inserted again where the cleanup between the table and `--fixed-rate` removed them. */
  async function prepareUpdates(server: ServerProcess): Promise<number> {
    let first = updateRanges.get(server);
    if (first === undefined) {
      first = nextUpdate;
      nextUpdate += UPDATE_ROWS;
      updateRanges.set(server, first);
    }
    await insert(server, 'update', first, UPDATE_ROWS);
    return first;
  }

  async function prepareDeletes(server: ServerProcess, count: number): Promise<number> {
    const first = nextDelete;
    nextDelete += count;
    const started = Date.now();
    await insert(server, 'delete', first, count);
    if (count > 1) console.log(`  (prepared ${count.toLocaleString('en')} posts for ${server.name}'s delete cell in ${((Date.now() - started) / 1000).toFixed(1)} s)`);
    return first;
  }

  return {
    async prepareCell(scenario, server, load) {
      const spec = scenario.spec;
      if (spec.kind === 'update') return { ...spec, first: await prepareUpdates(server), count: UPDATE_ROWS };
      if (spec.kind !== 'delete') return spec;
      const seconds = load.warmupSeconds + load.durationSeconds;
      const rate = load.rate ? load.rate * 1.5 : Math.max(deleteRate, 2 * (fastestDelete.get(server) ?? 0));
      const count = Math.ceil(rate * seconds) + 1000;
      return { ...spec, first: await prepareDeletes(server, count), count };
    },
    async prepareSample(kind, server) {
      if (kind === 'update') return preparedPostId('update', await prepareUpdates(server));
      return preparedPostId('delete', await prepareDeletes(server, 1));
    },
    checkCell(scenario, server, measured) {
      if (scenario.key === 'delete') fastestDelete.set(server, Math.max(fastestDelete.get(server) ?? 0, measured.requestsPerSecond));
      if (!STRICT_KEYS.has(scenario.key)) return;
      const bad = measured.non2xx + measured.warmupNon2xx;
      if (bad === 0) return;
      const ranOut = scenario.key === 'delete' ? ': it ran out of prepared posts (raise BENCH_DELETE_RATE)' : '';
      throw new Error(`${scenario.key} on ${server.name}: ${bad} answers were not 2xx (${measured.warmupNon2xx} in the warm-up)${ranOut}; such a cell measures nothing`);
    },
  };
}
