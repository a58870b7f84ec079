import { quoteIdent as q, rawSql } from '../../sql-fragment.js';
import type { CollectionSchema } from '../../schema/collection-schema.js';
import {
  CAPTURE_DELETE_TRIGGER,
  CAPTURE_FUNCTION,
  CAPTURE_INSERT_TRIGGER,
  CAPTURE_UPDATE_TRIGGER,
  CHANGES_CHANNEL,
  CLIENTS_IDENTITY_INDEX,
  CLIENTS_INSTANCE_INDEX,
  CLIENTS_READING_OTHER_TABLES_INDEX,
  CLIENTS_READS_OTHER_TABLES_COLUMN,
  CLIENTS_TABLE,
  CLIENTS_TOPIC_KEYS_COLUMN,
  CLIENTS_TOPICS_INDEX,
  INSTANCES_TABLE,
  OUTBOX_CREATED_INDEX,
  OUTBOX_TABLE,
  OUTBOX_TRACEPARENT_COLUMN,
  OUTBOX_TX_INDEX,
  TOPIC_KEYS_FUNCTION,
  TRACEPARENT_SESSION_SETTING,
} from '../shared-names.js';
import type { StatementRunner } from '../statements/statement-runner.js';
import type { SchemaAddition } from '../schema/sync-database-schema.js';

/**
 * When a row of INSTANCES_TABLE stops counting as a live realtime instance: its own `expires_at`,
 * written by each heartbeat. A row of older code has none: its heartbeat counts for a minute.
 */
export const INSTANCE_EXPIRY_SQL = `COALESCE("expires_at", "heartbeat_at" + interval '1 minute')`;

/** A client row whose subscriptions may read other tables (CLIENTS_READS_OTHER_TABLES_COLUMN; NULL: a row of older code). */
export const READING_OTHER_TABLES_SQL = `${q(CLIENTS_READS_OTHER_TABLES_COLUMN)} IS NOT FALSE`;

const TRIGGERS = [
  { name: CAPTURE_INSERT_TRIGGER, event: 'INSERT', transition: 'NEW TABLE AS rb_new' },
  { name: CAPTURE_UPDATE_TRIGGER, event: 'UPDATE', transition: 'NEW TABLE AS rb_new' },
  { name: CAPTURE_DELETE_TRIGGER, event: 'DELETE', transition: 'OLD TABLE AS rb_old' },
] as const;

/** A table name or collection id (only `[A-Za-z0-9_]`, so no quote) as an SQL string literal. */
function literal(name: string): string {
  if (!/^[A-Za-z0-9_]+$/.test(name)) throw new Error(`recordbase: refusing to write ${JSON.stringify(name)} as a literal`);
  return `'${name}'`;
}

/**
 * Adds a column a table made by older code lacks. Only when it is missing: ALTER TABLE takes an
 * exclusive lock even when there is nothing to add, and every writing transaction holds a lock on
 * these tables until it ends, so an unconditional ALTER at each start would queue every write
 * behind the longest running transaction.
 */
function addColumnIfMissing(table: string, column: string, type: string): string {
  return `DO $do$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ${literal(table)} AND column_name = ${literal(column)}) THEN
    ALTER TABLE ${q(table)} ADD COLUMN IF NOT EXISTS ${q(column)} ${type};
  END IF;
END $do$`;
}

/** CREATE INDEX only when missing: CREATE INDEX IF NOT EXISTS locks the table before it looks (see addColumnIfMissing). */
function createIndexIfMissing(name: string, table: string, columns: string, how: { method?: 'btree' | 'gin'; where?: string } = {}): string {
  return `DO $do$ BEGIN
  IF to_regclass(format('%I.%I', current_schema(), ${literal(name)})) IS NULL THEN
    CREATE INDEX IF NOT EXISTS ${q(name)} ON ${q(table)} USING ${how.method ?? 'btree'} (${columns})${how.where ? ` WHERE ${how.where}` : ''};
  END IF;
END $do$`;
}

/**
 * What each subscription of a client names before its first `/` or `?` (a collection's name or
 * id, as lib/realtime/parse-subscription.ts reads a topic), distinct. IMMUTABLE, so a generated
 * column can hold it; it reads nothing but its argument, and only pg_catalog's functions. `?` is
 * written `chr(63)`: the send path (Knex's client.query) takes every `?` in a statement's text for a
 * binding.
 */
function topicKeysFunction(): string {
  return `CREATE OR REPLACE FUNCTION ${q(TOPIC_KEYS_FUNCTION)}("subscriptions" jsonb) RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
  SELECT coalesce(array_agg(DISTINCT split_part(split_part(s, chr(63), 1), '/', 1)), '{}'::text[])
    FROM jsonb_array_elements_text(CASE WHEN jsonb_typeof("subscriptions") = 'array' THEN "subscriptions" ELSE '[]'::jsonb END) AS s
$fn$`;
}

/**
 * The tables and the capture function realtime needs (idempotent, run by the schema sync under
 * its advisory lock). The function is statement-level with transition tables: a bulk delete of
 * 100,000 rows is one INSERT ... SELECT into the outbox and one notification, not 100,000 trigger
 * calls. `SET search_path FROM CURRENT` pins the schema the function was made in, so the outbox it
 * writes is the one beside the collection tables whatever the writing session's search_path.
 * `to_jsonb(n.*)`, not `to_jsonb(n)`: a collection may have a field named `n`, and a bare name
 * means the column before the row.
 *
 * Capture is gated in the database, so that instances on one database agree whatever their own
 * `realtime` setting: the function writes nothing unless some client of any instance subscribes to
 * the collection (its table name, or its id, the trigger's argument, among the client's topic keys:
 * a generated column, so a row written by any code counts) or has a subscription whose rules read
 * other tables (a delete is then checked for staleness against every later change: see
 * lib/db/realtime/evaluate-conditions.ts), and some realtime instance is live (an unexpired row in
 * INSTANCES_TABLE). So nothing is copied that nobody could receive. Switching a
 * collection's capture on is safe because a subscription's POST waits, before its 204, for the
 * transactions whose trigger may have looked before it (lib/realtime/client-registry.ts). A
 * delete's rows carry the deleting transaction's snapshot, which tells what that transaction could
 * see.
 */
export function realtimeTableStatements(): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS ${q(OUTBOX_TABLE)} ("seq" bigserial PRIMARY KEY, "tx" xid8 NOT NULL DEFAULT pg_current_xact_id(), "collection" text NOT NULL, "record_id" text NOT NULL, "action" text NOT NULL, "row" jsonb NOT NULL, "created_at" timestamptz NOT NULL DEFAULT now(), "snapshot" pg_snapshot)`,
    addColumnIfMissing(OUTBOX_TABLE, 'snapshot', 'pg_snapshot'),
    // The write's traceparent (docs/observability.md), when its transaction carried one; a row of older code has none.
    addColumnIfMissing(OUTBOX_TABLE, OUTBOX_TRACEPARENT_COLUMN, 'text'),
    createIndexIfMissing(OUTBOX_TX_INDEX, OUTBOX_TABLE, '"tx"'),
    createIndexIfMissing(OUTBOX_CREATED_INDEX, OUTBOX_TABLE, '"created_at"'),
    // expires_at stays nullable: older code inserts rows without it (INSTANCE_EXPIRY_SQL).
    `CREATE TABLE IF NOT EXISTS ${q(INSTANCES_TABLE)} ("instance_id" text PRIMARY KEY, "heartbeat_at" timestamptz NOT NULL DEFAULT now(), "expires_at" timestamptz)`,
    addColumnIfMissing(INSTANCES_TABLE, 'expires_at', 'timestamptz'),
    `CREATE TABLE IF NOT EXISTS ${q(CLIENTS_TABLE)} ("client_id" text PRIMARY KEY, "instance_id" text NOT NULL, "identity" jsonb, "subscriptions" jsonb NOT NULL DEFAULT '[]'::jsonb, "updated_at" timestamptz NOT NULL DEFAULT now())`,
    createIndexIfMissing(CLIENTS_INSTANCE_INDEX, CLIENTS_TABLE, '"instance_id"'),
    // The per-identity bound counts an identity's clients at every POST.
    createIndexIfMissing(CLIENTS_IDENTITY_INDEX, CLIENTS_TABLE, `("identity" ->> 'id')`),
    topicKeysFunction(),
    addColumnIfMissing(CLIENTS_TABLE, CLIENTS_TOPIC_KEYS_COLUMN, `text[] GENERATED ALWAYS AS (${q(TOPIC_KEYS_FUNCTION)}("subscriptions")) STORED`),
    createIndexIfMissing(CLIENTS_TOPICS_INDEX, CLIENTS_TABLE, q(CLIENTS_TOPIC_KEYS_COLUMN), { method: 'gin' }),
    addColumnIfMissing(CLIENTS_TABLE, CLIENTS_READS_OTHER_TABLES_COLUMN, 'boolean'),
    createIndexIfMissing(CLIENTS_READING_OTHER_TABLES_INDEX, CLIENTS_TABLE, '"client_id"', { where: READING_OTHER_TABLES_SQL }),
    `CREATE OR REPLACE FUNCTION ${q(CAPTURE_FUNCTION)}() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
DECLARE
  snap pg_snapshot;
  -- A traced write's transaction set it (SET LOCAL, lib/db/statements/statement-bounds.ts), or its
  -- statement begins with it (a comment, lib/telemetry/trace-statement.ts); neither: NULL.
  traced text := coalesce(NULLIF(current_setting('${TRACEPARENT_SESSION_SETTING}', true), ''),
    substring(current_query() from '^/\\* traceparent=''(00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2})'' \\*/'));
BEGIN
  -- TG_ARGV[0]: the collection's id (NULL on a trigger of older code, which names none).
  IF (NOT EXISTS (SELECT 1 FROM ${q(CLIENTS_TABLE)} WHERE ${q(CLIENTS_TOPIC_KEYS_COLUMN)} && ARRAY[TG_TABLE_NAME::text, TG_ARGV[0]])
      AND NOT EXISTS (SELECT 1 FROM ${q(CLIENTS_TABLE)} WHERE ${READING_OTHER_TABLES_SQL}))
    OR NOT EXISTS (SELECT 1 FROM ${q(INSTANCES_TABLE)} WHERE ${INSTANCE_EXPIRY_SQL} > now()) THEN
    RETURN NULL;
  END IF;
  IF TG_OP = 'DELETE' THEN
    snap := pg_current_snapshot();
    INSERT INTO ${q(OUTBOX_TABLE)} ("collection", "record_id", "action", "row", "snapshot", ${q(OUTBOX_TRACEPARENT_COLUMN)}) SELECT TG_TABLE_NAME, o."id", 'delete', to_jsonb(o.*), snap, traced FROM rb_old AS o;
  ELSE
    INSERT INTO ${q(OUTBOX_TABLE)} ("collection", "record_id", "action", "row", ${q(OUTBOX_TRACEPARENT_COLUMN)}) SELECT TG_TABLE_NAME, n."id", CASE TG_OP WHEN 'INSERT' THEN 'create' ELSE 'update' END, to_jsonb(n.*), traced FROM rb_new AS n;
  END IF;
  IF FOUND THEN
    PERFORM pg_notify(${literal(CHANGES_CHANNEL)}, '');
  END IF;
  RETURN NULL;
END
$fn$`,
  ];
}

/**
 * Installs the capture triggers on each collection table where they are missing or name another
 * collection id than the collection's (a trigger of older code names none); a trigger in place is
 * left alone: CREATE TRIGGER locks the table against writes, and waits for every transaction that
 * wrote to it. Never removes them: an instance with realtime off leaves them to the others (the
 * function itself writes nothing while no realtime instance is live). A view collection has no
 * table and no events (as in PocketBase): its records change only when the tables it reads do, and
 * no write is ever made to it.
 */
export function captureTriggerStatements(collections: readonly CollectionSchema[]): string[] {
  return collections.filter((c) => c.type !== 'view').flatMap((c) =>
    TRIGGERS.map(
      // pg_trigger.tgargs holds each argument followed by a zero byte.
      (t) => `DO $do$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = format('%I.%I', current_schema(), ${literal(c.table)})::regclass AND tgname = ${literal(t.name)}
      AND tgargs = convert_to(${literal(c.id)}, 'UTF8') || '\\x00'::bytea) THEN
    CREATE OR REPLACE TRIGGER ${q(t.name)} AFTER ${t.event} ON ${q(c.table)} REFERENCING ${t.transition} FOR EACH STATEMENT EXECUTE FUNCTION ${q(CAPTURE_FUNCTION)}(${literal(c.id)});
  END IF;
END $do$`,
    ),
  );
}

/** Whether realtime's capture function exists in the current schema (made by an instance with realtime on). */
export async function hasCaptureFunction(runner: StatementRunner): Promise<boolean> {
  const rows = await runner.rows<{ found: boolean }>(rawSql(`SELECT to_regprocedure(format('%I.%I()', current_schema(), ${literal(CAPTURE_FUNCTION)})) IS NOT NULL AS "found"`));
  return rows[0]?.found === true;
}

/**
 * Realtime's part of the schema sync, which the router hands to `syncDatabaseSchema`. An instance
 * that `serves` realtime makes its tables and capture function and installs the capture triggers on
 * every collection table. One that does not leaves realtime to the instances that serve it: where
 * the capture function exists it installs the triggers on its collections too (a collection only it
 * declares is captured for the others), where it does not it creates nothing; and it removes
 * nothing (one instance with realtime off must not switch capture off for the others).
 */
export function realtimeSchema(serves: boolean): SchemaAddition {
  return {
    async statements(trx, collections) {
      const capture = serves || (await hasCaptureFunction(trx));
      return [...(serves ? realtimeTableStatements() : []), ...(capture ? captureTriggerStatements(collections) : [])];
    },
    ...(serves ? {} : { notice: 'realtime: this instance does not serve realtime (realtime: false); its writes still reach the subscribers of the instances that do' }),
  };
}
