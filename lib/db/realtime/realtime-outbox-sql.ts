import { quoteIdent as q } from '../../sql-fragment.js';
import { OUTBOX_TABLE, OUTBOX_TRACEPARENT_COLUMN } from '../shared-names.js';
import type { StatementRunner } from '../statements/statement-runner.js';

/** One committed change, as the capture trigger wrote it (lib/db/realtime/realtime-schema.ts). */
export interface OutboxChange {
  readonly seq: string;
  readonly collection: string;
  readonly recordId: string;
  readonly action: 'create' | 'update' | 'delete';
  /** The row as stored (`to_jsonb`): after a create or update, before a delete. */
  readonly row: Record<string, unknown>;
  /** The writing transaction's id (`xid8`, as text). */
  readonly tx: string;
  /** A delete's only: the deleting statement's snapshot (`pg_snapshot`, as text `xmin:xmax:xip,...`), what that transaction could see. */
  readonly snapshot?: string;
  /** The writing transaction's W3C traceparent, when a traced request wrote it in a transaction (docs/observability.md). */
  readonly traceparent?: string;
  /** When the writing transaction began, in the database's clock (ms since the epoch): the start of its commit-to-delivery latency. */
  readonly writtenAtMs: number;
}

/**
 * The oldest transaction still running on the server (`pg_snapshot_xmin(pg_current_snapshot())`,
 * an `xid8` as text): every transaction below it has ended, so what they wrote is final.
 */
export async function readCurrentXmin(runner: StatementRunner): Promise<string> {
  const rows = await runner.rows<{ xmin: string }>({ sql: 'SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin', bindings: [] });
  return rows[0].xmin;
}

/**
 * Up to `limit` outbox rows of `collections` written by transactions in `[from, to)` with a
 * sequence above `after`, in sequence order (the ChangeReader's window, lib/realtime/change-reader.ts).
 */
export async function readOutboxPage(
  runner: StatementRunner,
  page: { from: string; to: string; after: string; collections: readonly string[]; limit: number },
): Promise<OutboxChange[]> {
  const rows = await runner.rows<{ seq_text: string; collection: string; record_id: string; action: OutboxChange['action']; row: Record<string, unknown>; tx_text: string; snapshot_text: string | null; writer_span: string | null; written_ms: number }>({
    // ORDER BY the table's bigint column, not the text alias (which would sort "10" before "5").
    sql: `SELECT o."seq"::text AS "seq_text", o."collection", o."record_id", o."action", o."row", o."tx"::text AS "tx_text", o."snapshot"::text AS "snapshot_text", o.${q(OUTBOX_TRACEPARENT_COLUMN)} AS "writer_span", (extract(epoch FROM o."created_at") * 1000)::float8 AS "written_ms" FROM ${q(OUTBOX_TABLE)} AS o
      WHERE o."tx" >= ?::xid8 AND o."tx" < ?::xid8 AND o."seq" > ?::bigint AND o."collection" = ANY(?::text[]) ORDER BY o."seq" LIMIT ?::int`,
    bindings: [page.from, page.to, page.after, [...page.collections], page.limit],
  });
  return rows.map((r) => ({
    seq: r.seq_text,
    collection: r.collection,
    recordId: r.record_id,
    action: r.action,
    row: r.row,
    tx: r.tx_text,
    ...(r.snapshot_text === null ? {} : { snapshot: r.snapshot_text }),
    ...(r.writer_span === null ? {} : { traceparent: r.writer_span }),
    writtenAtMs: r.written_ms,
  }));
}

/**
 * Outbox rows written by transactions at or after `from` (a reader's position, an `xid8` as text):
 * what is still to be read, committed or not (the `recordbase.realtime.outbox.depth` gauge, asked
 * only when the host's SDK collects). Counted on the `tx` index.
 */
export async function countOutboxFrom(runner: StatementRunner, from: string): Promise<number> {
  const rows = await runner.rows<{ n: string }>({ sql: `SELECT count(*)::text AS "n" FROM ${q(OUTBOX_TABLE)} WHERE "tx" >= ?::xid8`, bindings: [from] });
  return Number(rows[0].n);
}
