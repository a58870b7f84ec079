import type { Knex } from 'knex';
import type { Identity } from '../auth/identity.js';
import { runWithTryAdvisoryLock } from '../db/advisory-lock.js';
import { ForbiddenError, NotFoundError } from '../errors.js';
import { quoteIdent as q } from '../query/sql-fragment.js';
import { CLIENTS_TABLE, INSTANCES_TABLE, OUTBOX_TABLE } from './outbox-schema.js';

/** Taken (without waiting) by the instance that prunes the outbox; the others skip that round. */
const PRUNE_LOCK_KEY = 727_274_002;
/** Outbox rows removed per prune transaction, and batches per prune round. */
const PRUNE_BATCH_ROWS = 1_000;
const PRUNE_MAX_BATCHES = 1_000;

/** A client's row: who it is and what it subscribed to. */
export interface ClientRow {
  identity: Identity | null;
  subscriptions: string[];
}

/** Whether a POST's identity may replace the client's (PocketBase's isSameAuth): guest to signed-in is allowed, nothing else changes. */
export function mayChangeIdentity(before: Identity | null, after: Identity | null): boolean {
  return before === null || (after !== null && after.id === before.id);
}

/**
 * The realtime registry in Postgres (DESIGN 12): instances with their heartbeats, and every open
 * stream's client id, owner instance, identity and subscriptions, so a POST may reach any instance.
 */
export class ClientRegistry {
  constructor(
    private readonly db: Knex,
    readonly instanceId: string,
  ) {}

  /**
   * Refreshes this instance's heartbeat and removes instances silent for longer than `staleMs`,
   * with their clients. Returns true when this instance's row had to be made again (it was taken
   * for gone): the caller then registers its open clients again.
   */
  async heartbeat(staleMs: number): Promise<boolean> {
    const result: { rows: { inserted: boolean }[] } = await this.db.raw(
      `INSERT INTO ${q(INSTANCES_TABLE)} ("instance_id", "heartbeat_at") VALUES (?, now())
        ON CONFLICT ("instance_id") DO UPDATE SET "heartbeat_at" = now() RETURNING (xmax = 0) AS inserted`,
      [this.instanceId],
    );
    await this.db.raw(
      `WITH gone AS (DELETE FROM ${q(INSTANCES_TABLE)} WHERE "heartbeat_at" < now() - ?::double precision * interval '1 millisecond' RETURNING "instance_id")
        DELETE FROM ${q(CLIENTS_TABLE)} WHERE "instance_id" IN (SELECT "instance_id" FROM gone)`,
      [staleMs],
    );
    return result.rows[0]?.inserted === true;
  }

  /**
   * Removes outbox rows older than `retentionMs`, one instance at a time, in batches of 1,000 rows
   * each in its own short transaction (at most 1,000 batches per call; the rest next time). A
   * deleting transaction holds the server's snapshot xmin, and so every instance's delivery, while
   * it runs: one long `DELETE` of a large backlog would stall realtime for its whole duration.
   * The lock's own transaction writes nothing, so it takes no transaction id and holds nothing back.
   * Returns the rows removed.
   */
  async pruneOutbox(retentionMs: number): Promise<number> {
    const outcome = await runWithTryAdvisoryLock({ database: this.db, key: PRUNE_LOCK_KEY }, async () => {
      let removed = 0;
      for (let batch = 0; batch < PRUNE_MAX_BATCHES; batch++) {
        // On this.db (autocommit), not the lock's transaction: each batch commits at once.
        const result: { rows: { n: number }[] } = await this.db.raw(
          `WITH gone AS (DELETE FROM ${q(OUTBOX_TABLE)} WHERE "seq" IN (SELECT "seq" FROM ${q(OUTBOX_TABLE)}
            WHERE "created_at" < now() - ?::double precision * interval '1 millisecond' ORDER BY "seq" LIMIT ${PRUNE_BATCH_ROWS}) RETURNING 1)
            SELECT count(*)::int AS "n" FROM gone`,
          [retentionMs],
        );
        const count = result.rows[0]?.n ?? 0;
        removed += count;
        if (count < PRUNE_BATCH_ROWS) break;
      }
      return removed;
    });
    return outcome.acquired ? outcome.result : 0;
  }

  /** Registers a new stream held by this instance (before its PB_CONNECT is written, so any instance may take its POST at once). */
  async addClient(clientId: string, row: ClientRow = { identity: null, subscriptions: [] }): Promise<void> {
    await this.db.raw(
      `INSERT INTO ${q(CLIENTS_TABLE)} ("client_id", "instance_id", "identity", "subscriptions") VALUES (?, ?, ?::jsonb, ?::jsonb)
        ON CONFLICT ("client_id") DO UPDATE SET "instance_id" = EXCLUDED."instance_id", "identity" = EXCLUDED."identity", "subscriptions" = EXCLUDED."subscriptions", "updated_at" = now()`,
      [clientId, this.instanceId, row.identity === null ? null : JSON.stringify(row.identity), JSON.stringify(row.subscriptions)],
    );
  }

  async removeClient(clientId: string): Promise<void> {
    await this.db.raw(`DELETE FROM ${q(CLIENTS_TABLE)} WHERE "client_id" = ?`, [clientId]);
  }

  /** Removes this instance and its clients (close()). */
  async removeInstance(): Promise<void> {
    await this.db.raw(`DELETE FROM ${q(CLIENTS_TABLE)} WHERE "instance_id" = ?`, [this.instanceId]);
    await this.db.raw(`DELETE FROM ${q(INSTANCES_TABLE)} WHERE "instance_id" = ?`, [this.instanceId]);
  }

  /**
   * Stores a client's new identity and subscriptions, its row locked meanwhile: 404 when no
   * instance holds the client, 403 when the identity would change (mayChangeIdentity). Returns the
   * owning instance.
   */
  async setSubscriptions(clientId: string, identity: Identity | null, subscriptions: readonly string[]): Promise<string> {
    return this.db.transaction(async (trx) => {
      const found: { rows: { instance_id: string; identity: Identity | null }[] } = await trx.raw(
        `SELECT "instance_id", "identity" FROM ${q(CLIENTS_TABLE)} WHERE "client_id" = ? FOR UPDATE`,
        [clientId],
      );
      const row = found.rows[0];
      if (!row) throw new NotFoundError(undefined, 'realtime_client_not_found');
      if (!mayChangeIdentity(row.identity, identity)) throw new ForbiddenError(undefined, 'realtime_auth_mismatch');
      await trx.raw(`UPDATE ${q(CLIENTS_TABLE)} SET "identity" = ?::jsonb, "subscriptions" = ?::jsonb, "updated_at" = now() WHERE "client_id" = ?`, [
        identity === null ? null : JSON.stringify(identity),
        JSON.stringify(subscriptions),
        clientId,
      ]);
      return row.instance_id;
    });
  }

  /** A client's row, or undefined when it is gone. */
  async loadClient(clientId: string): Promise<ClientRow | undefined> {
    const found: { rows: { identity: Identity | null; subscriptions: string[] }[] } = await this.db.raw(
      `SELECT "identity", "subscriptions" FROM ${q(CLIENTS_TABLE)} WHERE "client_id" = ?`,
      [clientId],
    );
    const row = found.rows[0];
    return row ? { identity: row.identity, subscriptions: row.subscriptions } : undefined;
  }

  /** Sends a notification on `channel` (an instance's own channel). */
  async notify(channel: string, payload: string): Promise<void> {
    await this.db.raw('SELECT pg_notify(?, ?)', [channel, payload]);
  }
}
