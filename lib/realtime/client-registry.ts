import type { Knex } from 'knex';
import type { Identity } from '../auth/identity.js';
import { runWithTryAdvisoryLock } from '../db/advisory-lock.js';
import { ForbiddenError, NotFoundError, TooManyRequestsError } from '../errors.js';
import { quoteIdent as q } from '../query/sql-fragment.js';
import { CLIENTS_TABLE, INSTANCE_EXPIRY_SQL, INSTANCES_TABLE, OUTBOX_TABLE } from './outbox-schema.js';

/** Taken (without waiting) by the instance that prunes the outbox; the others skip that round. */
const PRUNE_LOCK_KEY = 727_274_002;
/**
 * Prefix of the transaction-scoped advisory locks that serialise the POSTs giving clients one
 * identity (`hashtextextended(prefix || id, 0)`): without it, concurrent POSTs would each count
 * the others' uncommitted rows as absent and pass the per-identity bound together.
 */
const IDENTITY_LOCK_PREFIX = 'recordbase realtime identity ';
/** Outbox rows removed per prune transaction, and batches per prune round. */
const PRUNE_BATCH_ROWS = 1_000;
const PRUNE_MAX_BATCHES = 1_000;
/** How often a wait for running transactions looks again. */
const TRANSACTION_POLL_MS = 50;

/**
 * What the registry keeps of an identity: its id (for the identity lock and the per-identity
 * bound) and whether it is a superuser. Everything rules read stays in the instance holding the
 * stream (a host's identity may carry a session token).
 */
export type StoredIdentity = {
  id: string;
  superuser: boolean;
};

/** A client's row: who it is (StoredIdentity) and what it subscribed to. */
export interface ClientRow {
  identity: StoredIdentity | null;
  subscriptions: string[];
}

/** The part of an identity the registry stores. */
export function storedIdentity(identity: Pick<Identity, 'id' | 'superuser'> | null): StoredIdentity | null {
  return identity === null ? null : { id: identity.id, superuser: identity.superuser === true };
}

/** Whether a POST's identity may replace the client's (PocketBase's isSameAuth): guest to signed-in is allowed, nothing else changes. */
export function mayChangeIdentity(before: Pick<Identity, 'id'> | null, after: Pick<Identity, 'id'> | null): boolean {
  return before === null || (after !== null && after.id === before.id);
}

/** What one heartbeat found. */
export interface HeartbeatResult {
  /** This instance's row had to be made again (another instance took it for gone): register the open clients again. */
  remade: boolean;
  /**
   * Some realtime instance (this one included) was live just before: capture was on. False at a
   * first start, or after a stall so long that every instance's row expired (nothing was captured
   * meanwhile).
   */
  captureWasOn: boolean;
}

/**
 * The realtime registry in Postgres (DESIGN 12): instances with their heartbeats and expiries (the
 * capture gate reads them), and every open stream's client id, owner instance, stored identity
 * and subscriptions, so a POST may reach any instance.
 */
export class ClientRegistry {
  private readonly maxClientsPerIdentity: number;

  constructor(
    private readonly db: Knex,
    readonly instanceId: string,
    limits: { maxClientsPerIdentity?: number } = {},
  ) {
    this.maxClientsPerIdentity = limits.maxClientsPerIdentity ?? Number.POSITIVE_INFINITY;
  }

  /**
   * Refreshes this instance's row, live until `lifetimeMs` from now (the capture function writes
   * while some row is live), and removes instances whose own expiry passed, with their clients.
   */
  async heartbeat(lifetimeMs: number): Promise<HeartbeatResult> {
    // One statement: `before` reads the snapshot the upsert started from.
    const result: { rows: { inserted: boolean; live: boolean }[] } = await this.db.raw(
      `WITH "before" AS (SELECT EXISTS (SELECT 1 FROM ${q(INSTANCES_TABLE)} WHERE ${INSTANCE_EXPIRY_SQL} > now()) AS "live"),
        "up" AS (INSERT INTO ${q(INSTANCES_TABLE)} ("instance_id", "heartbeat_at", "expires_at") VALUES (?, now(), now() + ?::double precision * interval '1 millisecond')
          ON CONFLICT ("instance_id") DO UPDATE SET "heartbeat_at" = EXCLUDED."heartbeat_at", "expires_at" = EXCLUDED."expires_at" RETURNING (xmax = 0) AS "inserted")
        SELECT "up"."inserted", "before"."live" FROM "up", "before"`,
      [this.instanceId, lifetimeMs],
    );
    await this.db.raw(
      `WITH gone AS (DELETE FROM ${q(INSTANCES_TABLE)} WHERE ${INSTANCE_EXPIRY_SQL} < now() RETURNING "instance_id")
        DELETE FROM ${q(CLIENTS_TABLE)} WHERE "instance_id" IN (SELECT "instance_id" FROM gone)`,
    );
    const row = result.rows[0];
    return { remade: row?.inserted === true, captureWasOn: row?.live === true };
  }

  /**
   * Waits until every transaction running in this database now (but this statement's own) has
   * ended, up to `timeoutMs`; false if some were still running then. A transaction is seen by the
   * lock it holds on its own virtual transaction id, so one that has not written yet (and whose
   * snapshot may already be taken) is waited for too.
   */
  async waitForRunningTransactions(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    const running: { rows: { ids: string[] }[] } = await this.db.raw(
      `SELECT coalesce(array_agg(l."virtualxid"), '{}') AS "ids" FROM pg_locks AS l JOIN pg_stat_activity AS a ON a."pid" = l."pid"
        WHERE l."locktype" = 'virtualxid' AND l."granted" AND l."pid" <> pg_backend_pid() AND a."datname" = current_database()`,
    );
    let ids = running.rows[0]?.ids ?? [];
    while (ids.length > 0) {
      if (Date.now() >= deadline) return false;
      await new Promise((resolve) => setTimeout(resolve, TRANSACTION_POLL_MS));
      const left: { rows: { ids: string[] }[] } = await this.db.raw(
        `SELECT coalesce(array_agg("virtualxid"), '{}') AS "ids" FROM pg_locks WHERE "locktype" = 'virtualxid' AND "virtualxid" = ANY(?::text[])`,
        [ids],
      );
      ids = left.rows[0]?.ids ?? [];
    }
    return true;
  }

  /**
   * Removes outbox rows older than `retentionMs`, or older than `idleRetentionMs` while no client
   * of any instance subscribes to anything (the same statement looks, so a subscription committed
   * meanwhile keeps the rows written after it). One instance at a time, in batches of 1,000 rows
   * each in its own short transaction (at most 1,000 batches per call; the rest next time). A
   * deleting transaction holds the server's snapshot xmin, and so every instance's delivery, while
   * it runs: one long `DELETE` of a large backlog would stall realtime for its whole duration.
   * The lock's own transaction writes nothing, so it takes no transaction id and holds nothing back.
   * Returns the rows removed.
   */
  async pruneOutbox(retention: { retentionMs: number; idleRetentionMs: number }): Promise<number> {
    const idleRetentionMs = Math.min(retention.idleRetentionMs, retention.retentionMs);
    const outcome = await runWithTryAdvisoryLock({ database: this.db, key: PRUNE_LOCK_KEY }, async () => {
      let removed = 0;
      for (let batch = 0; batch < PRUNE_MAX_BATCHES; batch++) {
        // On this.db (autocommit), not the lock's transaction: each batch commits at once.
        const result: { rows: { n: number }[] } = await this.db.raw(
          `WITH gone AS (DELETE FROM ${q(OUTBOX_TABLE)} WHERE "seq" IN (SELECT "seq" FROM ${q(OUTBOX_TABLE)}
            WHERE "created_at" < now() - (CASE WHEN EXISTS (SELECT 1 FROM ${q(CLIENTS_TABLE)} WHERE "subscriptions" <> '[]'::jsonb) THEN ?::double precision ELSE ?::double precision END) * interval '1 millisecond'
            ORDER BY "seq" LIMIT ${PRUNE_BATCH_ROWS}) RETURNING 1)
            SELECT count(*)::int AS "n" FROM gone`,
          [retention.retentionMs, idleRetentionMs],
        );
        const count = result.rows[0]?.n ?? 0;
        removed += count;
        if (count < PRUNE_BATCH_ROWS) break;
      }
      return removed;
    });
    return outcome.acquired ? outcome.result : 0;
  }

  /**
   * Registers a stream held by this instance (before its PB_CONNECT is written, so any instance
   * may take its POST at once), or again after this instance was taken for gone. Of the identity,
   * only StoredIdentity is written.
   */
  async addClient(clientId: string, row: { identity: Identity | null; subscriptions: readonly string[] } = { identity: null, subscriptions: [] }): Promise<void> {
    const identity = storedIdentity(row.identity);
    await this.db.raw(
      `INSERT INTO ${q(CLIENTS_TABLE)} ("client_id", "instance_id", "identity", "subscriptions") VALUES (?, ?, ?::jsonb, ?::jsonb)
        ON CONFLICT ("client_id") DO UPDATE SET "instance_id" = EXCLUDED."instance_id", "identity" = EXCLUDED."identity", "subscriptions" = EXCLUDED."subscriptions", "updated_at" = now()`,
      [clientId, this.instanceId, identity === null ? null : JSON.stringify(identity), JSON.stringify(row.subscriptions)],
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
   * Stores a client's new identity (StoredIdentity only) and subscriptions, its row locked
   * meanwhile: 404 when no instance holds the client, 403 when the identity would change
   * (mayChangeIdentity), 429 when the client would take an identity that `maxClientsPerIdentity`
   * other clients already hold. Returns the owning instance.
   */
  async setSubscriptions(clientId: string, identity: Identity | null, subscriptions: readonly string[]): Promise<string> {
    const stored = storedIdentity(identity);
    return this.db.transaction(async (trx) => {
      const found: { rows: { instance_id: string; identity: StoredIdentity | null }[] } = await trx.raw(
        `SELECT "instance_id", "identity" FROM ${q(CLIENTS_TABLE)} WHERE "client_id" = ? FOR UPDATE`,
        [clientId],
      );
      const row = found.rows[0];
      if (!row) throw new NotFoundError(undefined, 'realtime_client_not_found');
      if (!mayChangeIdentity(row.identity, stored)) throw new ForbiddenError(undefined, 'realtime_auth_mismatch');
      // A client that already holds the identity is counted already; one that takes it now needs a free slot.
      if (stored !== null && row.identity === null && Number.isFinite(this.maxClientsPerIdentity)) {
        await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [IDENTITY_LOCK_PREFIX + stored.id]);
        const others: { rows: { n: number }[] } = await trx.raw(
          `SELECT count(*)::int AS "n" FROM ${q(CLIENTS_TABLE)} WHERE ("identity" ->> 'id') = ? AND "client_id" <> ?`,
          [stored.id, clientId],
        );
        if ((others.rows[0]?.n ?? 0) >= this.maxClientsPerIdentity) {
          throw new TooManyRequestsError(
            `This identity already has ${this.maxClientsPerIdentity} realtime clients (realtime.maxClientsPerIdentity); close one first.`,
            'realtime_too_many_clients_per_identity',
          );
        }
      }
      await trx.raw(`UPDATE ${q(CLIENTS_TABLE)} SET "identity" = ?::jsonb, "subscriptions" = ?::jsonb, "updated_at" = now() WHERE "client_id" = ?`, [
        stored === null ? null : JSON.stringify(stored),
        JSON.stringify(subscriptions),
        clientId,
      ]);
      return row.instance_id;
    });
  }

  /** A client's row, or undefined when it is gone. */
  async loadClient(clientId: string): Promise<ClientRow | undefined> {
    const found: { rows: { identity: StoredIdentity | null; subscriptions: string[] }[] } = await this.db.raw(
      `SELECT "identity", "subscriptions" FROM ${q(CLIENTS_TABLE)} WHERE "client_id" = ?`,
      [clientId],
    );
    const row = found.rows[0];
    return row ? { identity: row.identity, subscriptions: row.subscriptions } : undefined;
  }

  /**
   * Sends `payloads` on `channel` (an instance's own channel) in one statement, so in one
   * transaction: they arrive together, in order. Each must be under 8,000 bytes (Postgres' bound).
   */
  async notify(channel: string, payloads: readonly string[]): Promise<void> {
    await this.db.raw('SELECT pg_notify(?, "p") FROM unnest(?::text[]) AS u("p")', [channel, [...payloads]]);
  }
}
