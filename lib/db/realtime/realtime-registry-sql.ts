import { quoteIdent as q } from '../../sql-fragment.js';
import { waitForAdvisoryXactLock } from '../statements/advisory-lock.js';
import type { StatementRunner } from '../statements/statement-runner.js';
import { INSTANCE_EXPIRY_SQL, READING_OTHER_TABLES_SQL } from './realtime-schema.js';
import { CLIENTS_READS_OTHER_TABLES_COLUMN, CLIENTS_TABLE, CLIENTS_TOPIC_KEYS_COLUMN, INSTANCES_TABLE, OUTBOX_TABLE, REALTIME_IDENTITY_LOCK_PREFIX } from '../shared-names.js';

/*
 * The statements of realtime's registry (lib/realtime/client-registry.ts decides what to do with
 * them): instances and their expiries, clients and their subscriptions, the outbox prune, and the
 * notifications between instances. Tables in lib/db/realtime/realtime-schema.ts. Each takes the runner its
 * statements go through (lib/db/statements/statement-runner.ts): realtime's own, bounded by its limits.
 */

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
  subscriptions: readonly string[];
}

/** What the capture gate reads of a client besides its subscriptions (lib/db/realtime/realtime-schema.ts). */
export interface CaptureNeeds {
  /** The topic keys of its subscriptions that name a collection with a table (its name or id as written). */
  readonly watched: readonly string[];
  /** Some subscription's rule or filter reads other tables than its record's. */
  readonly readsOtherTables: boolean;
}

const json = (value: unknown): string | null => (value === null ? null : JSON.stringify(value));

/**
 * Makes or refreshes an instance's row, live until `lifetimeMs` from now. `inserted`: the row had
 * to be made (a first start, or another instance took this one for gone); `wasLive`: some
 * instance's row was live just before (one statement: `before` reads the snapshot the upsert
 * started from).
 */
export async function beatInstance(runner: StatementRunner, options: { instanceId: string; lifetimeMs: number }): Promise<{ inserted: boolean; wasLive: boolean }> {
  const rows = await runner.rows<{ inserted: boolean; live: boolean }>({
    sql: `WITH "before" AS (SELECT EXISTS (SELECT 1 FROM ${q(INSTANCES_TABLE)} WHERE ${INSTANCE_EXPIRY_SQL} > now()) AS "live"),
      "up" AS (INSERT INTO ${q(INSTANCES_TABLE)} ("instance_id", "heartbeat_at", "expires_at") VALUES (?, now(), now() + ?::double precision * interval '1 millisecond')
        ON CONFLICT ("instance_id") DO UPDATE SET "heartbeat_at" = EXCLUDED."heartbeat_at", "expires_at" = EXCLUDED."expires_at" RETURNING (xmax = 0) AS "inserted")
      SELECT "up"."inserted", "before"."live" FROM "up", "before"`,
    bindings: [options.instanceId, options.lifetimeMs],
  });
  const row = rows[0];
  return { inserted: row?.inserted === true, wasLive: row?.live === true };
}

/** Removes the instances whose own expiry passed, with their clients. */
export async function removeExpiredInstances(runner: StatementRunner): Promise<void> {
  await runner.query({
    sql: `WITH gone AS (DELETE FROM ${q(INSTANCES_TABLE)} WHERE ${INSTANCE_EXPIRY_SQL} < now() RETURNING "instance_id")
      DELETE FROM ${q(CLIENTS_TABLE)} WHERE "instance_id" IN (SELECT "instance_id" FROM gone)`,
    bindings: [],
  });
}

/** Removes an instance and its clients. */
export async function removeInstance(runner: StatementRunner, instanceId: string): Promise<void> {
  await runner.query({ sql: `DELETE FROM ${q(CLIENTS_TABLE)} WHERE "instance_id" = ?`, bindings: [instanceId] });
  await runner.query({ sql: `DELETE FROM ${q(INSTANCES_TABLE)} WHERE "instance_id" = ?`, bindings: [instanceId] });
}

/**
 * The virtual transaction ids of the transactions running in this database now, but this
 * statement's own. A transaction holds a lock on its virtual id from its start, so one that has
 * not written yet (and whose snapshot may already be taken) is listed too.
 */
export async function listRunningTransactions(runner: StatementRunner): Promise<string[]> {
  const running = await runner.rows<{ ids: string[] }>({
    sql: `SELECT coalesce(array_agg(l."virtualxid"), '{}') AS "ids" FROM pg_locks AS l JOIN pg_stat_activity AS a ON a."pid" = l."pid"
      WHERE l."locktype" = 'virtualxid' AND l."granted" AND l."pid" <> pg_backend_pid() AND a."datname" = current_database()`,
    bindings: [],
  });
  return running[0]?.ids ?? [];
}

/** Those of `ids` (from listRunningTransactions) still running. */
export async function listStillRunning(runner: StatementRunner, ids: readonly string[]): Promise<string[]> {
  const left = await runner.rows<{ ids: string[] }>({
    sql: `SELECT coalesce(array_agg("virtualxid"), '{}') AS "ids" FROM pg_locks WHERE "locktype" = 'virtualxid' AND "virtualxid" = ANY(?::text[])`,
    bindings: [[...ids]],
  });
  return left[0]?.ids ?? [];
}

/**
 * Removes up to `limit` outbox rows, oldest first, older than `retentionMs`, or older than
 * `idleRetentionMs` while no client of any instance subscribes to anything (the same statement
 * looks, so a subscription committed meanwhile keeps the rows written after it). One statement,
 * so on a runner outside a transaction it is its own short transaction. Returns the rows removed.
 */
export async function pruneOutboxBatch(runner: StatementRunner, options: { retentionMs: number; idleRetentionMs: number; limit: number }): Promise<number> {
  const rows = await runner.rows<{ n: number }>({
    sql: `WITH gone AS (DELETE FROM ${q(OUTBOX_TABLE)} WHERE "seq" IN (SELECT "seq" FROM ${q(OUTBOX_TABLE)}
      WHERE "created_at" < now() - (CASE WHEN EXISTS (SELECT 1 FROM ${q(CLIENTS_TABLE)} WHERE "subscriptions" <> '[]'::jsonb) THEN ?::double precision ELSE ?::double precision END) * interval '1 millisecond'
      ORDER BY "seq" LIMIT ?::int) RETURNING 1)
      SELECT count(*)::int AS "n" FROM gone`,
    bindings: [options.retentionMs, options.idleRetentionMs, options.limit],
  });
  return rows[0]?.n ?? 0;
}

/** Writes the row of a client without subscriptions (made, or taken over by `instanceId` after this instance was taken for gone). */
export async function upsertClient(runner: StatementRunner, row: { clientId: string; instanceId: string; identity: StoredIdentity | null }): Promise<void> {
  await runner.query({
    sql: `INSERT INTO ${q(CLIENTS_TABLE)} ("client_id", "instance_id", "identity", "subscriptions", ${q(CLIENTS_READS_OTHER_TABLES_COLUMN)}) VALUES (?, ?, ?::jsonb, '[]'::jsonb, false)
      ON CONFLICT ("client_id") DO UPDATE SET "instance_id" = EXCLUDED."instance_id", "identity" = EXCLUDED."identity", "subscriptions" = EXCLUDED."subscriptions",
        ${q(CLIENTS_READS_OTHER_TABLES_COLUMN)} = false, "updated_at" = now()`,
    bindings: [row.clientId, row.instanceId, json(row.identity)],
  });
}

/** Removes a client's row. */
export async function removeClientRow(runner: StatementRunner, clientId: string): Promise<void> {
  await runner.query({ sql: `DELETE FROM ${q(CLIENTS_TABLE)} WHERE "client_id" = ?`, bindings: [clientId] });
}

/** A client's row, or undefined when it is gone. */
export async function loadClientRow(runner: StatementRunner, clientId: string): Promise<ClientRow | undefined> {
  const found = await runner.rows<ClientRow>({ sql: `SELECT "identity", "subscriptions" FROM ${q(CLIENTS_TABLE)} WHERE "client_id" = ?`, bindings: [clientId] });
  const row = found[0];
  return row ? { identity: row.identity, subscriptions: row.subscriptions } : undefined;
}

/** What may be done with a client's row while it is locked (withClientLocked). */
export interface LockedClient {
  /** The instance holding the stream, and the identity stored now. */
  readonly instanceId: string;
  readonly identity: StoredIdentity | null;
  /**
   * Serialises, until the transaction ends, every POST giving a client `identityId`: without it,
   * concurrent POSTs would each count the others' uncommitted rows as absent and pass the
   * per-identity bound together.
   */
  lockIdentity(identityId: string): Promise<void>;
  /** How many other clients hold `identityId`. */
  countOthersWithIdentity(identityId: string): Promise<number>;
  /**
   * Stores the client's new identity and subscriptions, and what the capture gate reads of them.
   * Returns whether this switched capture on for some collection: the client asks for something
   * it did not before (a key of `watched`, or other tables read) that no other client asks for
   * now, so capture of it was off until this transaction commits. Another client asking for it
   * keeps its row locked (`FOR SHARE`) until then, so it cannot take it away meanwhile.
   */
  store(row: ClientRow, needs: CaptureNeeds): Promise<boolean>;
}

/**
 * Runs `work` in one transaction of `runner` with the client's row locked (`FOR UPDATE`), or with
 * undefined when no instance holds the client. What `work` throws rolls the transaction back.
 */
export async function withClientLocked<T>(runner: StatementRunner, clientId: string, work: (client: LockedClient | undefined) => Promise<T>): Promise<T> {
  return runner.transaction(async (trx) => {
    const found = await trx.rows<{ instance_id: string; identity: StoredIdentity | null; keys: string[] | null; wide: boolean }>({
      sql: `SELECT "instance_id", "identity", ${q(CLIENTS_TOPIC_KEYS_COLUMN)} AS "keys", ${READING_OTHER_TABLES_SQL} AS "wide" FROM ${q(CLIENTS_TABLE)} WHERE "client_id" = ? FOR UPDATE`,
      bindings: [clientId],
    });
    const row = found[0];
    if (!row) return work(undefined);
    return work({
      instanceId: row.instance_id,
      identity: row.identity,
      lockIdentity: (identityId) => waitForAdvisoryXactLock(trx, REALTIME_IDENTITY_LOCK_PREFIX + identityId),
      async countOthersWithIdentity(identityId) {
        const others = await trx.rows<{ n: number }>({ sql: `SELECT count(*)::int AS "n" FROM ${q(CLIENTS_TABLE)} WHERE ("identity" ->> 'id') = ? AND "client_id" <> ?`, bindings: [identityId, clientId] });
        return others[0]?.n ?? 0;
      },
      async store(next, needs) {
        await trx.query({
          sql: `UPDATE ${q(CLIENTS_TABLE)} SET "identity" = ?::jsonb, "subscriptions" = ?::jsonb, ${q(CLIENTS_READS_OTHER_TABLES_COLUMN)} = ?, "updated_at" = now() WHERE "client_id" = ?`,
          bindings: [json(next.identity), JSON.stringify(next.subscriptions), needs.readsOtherTables, clientId],
        });
        if (needs.readsOtherTables && !row.wide) {
          const others = await trx.rows({ sql: `SELECT 1 FROM ${q(CLIENTS_TABLE)} WHERE ${READING_OTHER_TABLES_SQL} AND "client_id" <> ? LIMIT 1 FOR SHARE`, bindings: [clientId] });
          if (others.length === 0) return true;
        }
        const before = new Set(row.keys ?? []);
        const added = [...new Set(needs.watched)].filter((key) => !before.has(key));
        if (added.length === 0) return false;
        const holders = await trx.rows<{ holder: string | null }>({
          sql: `SELECT h."client_id" AS "holder" FROM unnest(?::text[]) AS k
            LEFT JOIN LATERAL (SELECT c."client_id" FROM ${q(CLIENTS_TABLE)} AS c WHERE c.${q(CLIENTS_TOPIC_KEYS_COLUMN)} @> ARRAY[k] AND c."client_id" <> ? LIMIT 1 FOR SHARE) AS h ON true`,
          bindings: [added, clientId],
        });
        return holders.some((h) => h.holder === null);
      },
    });
  });
}

/**
 * Sends `payloads` on `channel` in one statement, so in one transaction: they arrive together, in
 * order. Each must be under 8,000 bytes (Postgres' bound).
 */
export async function notifyChannel(runner: StatementRunner, channel: string, payloads: readonly string[]): Promise<void> {
  await runner.query({ sql: 'SELECT pg_notify(?, "p") FROM unnest(?::text[]) AS u("p")', bindings: [channel, [...payloads]] });
}
