import { quoteIdent as q } from '../../sql-fragment.js';
import type { SchemaAddition } from '../schema/sync-database-schema.js';
import { RATE_LIMITS_EXPIRY_INDEX, RATE_LIMITS_TABLE } from '../shared-names.js';
import type { StatementRunner } from '../statements/statement-runner.js';

/**
 * The table of the counters instances share (lib/http/rate-limits/rate-limiter.ts): one row per
 * bucket (a hash of rule, scope and client: no address or identity is stored) and window start
 * (milliseconds since the epoch), its hits so far, and when the window ends (the prune's key).
 * Made by the schema sync of an instance with rate limits on; never dropped (an instance without
 * them leaves it to the others).
 */
export function rateLimitsSchema(): SchemaAddition {
  return {
    async statements() {
      return [
        `CREATE TABLE IF NOT EXISTS ${q(RATE_LIMITS_TABLE)} ("bucket" text NOT NULL, "window_start" bigint NOT NULL, "hits" bigint NOT NULL, "expires_at" bigint NOT NULL, PRIMARY KEY ("bucket", "window_start"))`,
        `DO $do$ BEGIN
  IF to_regclass(format('%I.%I', current_schema(), '${RATE_LIMITS_EXPIRY_INDEX}')) IS NULL THEN
    CREATE INDEX IF NOT EXISTS ${q(RATE_LIMITS_EXPIRY_INDEX)} ON ${q(RATE_LIMITS_TABLE)} ("expires_at");
  END IF;
END $do$`,
      ];
    },
  };
}

/** The hits one instance counted for one bucket and window since its last sync. */
export interface CounterDelta {
  readonly bucket: string;
  readonly windowStart: number;
  readonly windowEnd: number;
  readonly hits: number;
}

/** A bucket's total over every instance after a sync. */
export interface CounterTotal {
  readonly bucket: string;
  readonly windowStart: number;
  readonly hits: number;
}

/**
 * One sync of an instance, one statement: adds its `deltas` to the shared rows (made as needed)
 * and reads back each one's total over every instance, and removes at most `pruneLimit` rows whose
 * window ended before `pruneBefore` (bounded work per sync; every instance's syncs prune). The
 * deltas travel as one JSON parameter, which both engines' drivers send as text.
 */
export async function syncCounters(runner: StatementRunner, options: { deltas: readonly CounterDelta[]; pruneBefore: number; pruneLimit: number }): Promise<CounterTotal[]> {
  const rows = await runner.rows<{ bucket: string; window_start: string; hits: string }>({
    sql: `WITH "pruned" AS (
        DELETE FROM ${q(RATE_LIMITS_TABLE)} WHERE ctid = ANY (ARRAY(SELECT ctid FROM ${q(RATE_LIMITS_TABLE)} WHERE "expires_at" < ?::bigint LIMIT ?::integer))
      )
      INSERT INTO ${q(RATE_LIMITS_TABLE)} AS t ("bucket", "window_start", "hits", "expires_at")
        SELECT d."b", d."w", d."n", d."e" FROM json_to_recordset(?::json) AS d("b" text, "w" bigint, "n" bigint, "e" bigint) ORDER BY d."b", d."w"
      ON CONFLICT ("bucket", "window_start") DO UPDATE SET "hits" = t."hits" + EXCLUDED."hits"
      RETURNING t."bucket", t."window_start", t."hits"`,
    bindings: [options.pruneBefore, options.pruneLimit, JSON.stringify(options.deltas.map((d) => ({ b: d.bucket, w: d.windowStart, n: d.hits, e: d.windowEnd })))],
  });
  return rows.map((row) => ({ bucket: row.bucket, windowStart: Number(row.window_start), hits: Number(row.hits) }));
}

/** Rows of the shared table (tests and operators: the bound on rows, docs/limits.md). */
export async function countCounterRows(runner: StatementRunner): Promise<number> {
  const rows = await runner.rows<{ n: string }>({ sql: `SELECT count(*) AS "n" FROM ${q(RATE_LIMITS_TABLE)}`, bindings: [] });
  return Number(rows[0]?.n ?? 0);
}
