import { quoteIdent as q } from '../query/sql-fragment.js';
import type { CollectionSchema } from '../schema/collection-schema.js';

/** Every committed change of a collection table, written by the capture trigger in the write's own transaction. */
export const OUTBOX_TABLE = '_recordbase_realtime_outbox';
/** One row per running instance with realtime on, refreshed by its heartbeat. */
export const INSTANCES_TABLE = '_recordbase_realtime_instances';
/** One row per open stream: its owner instance, identity and subscriptions. */
export const CLIENTS_TABLE = '_recordbase_realtime_clients';
/** The channel every change wakes (one notification per committing transaction: identical ones fold). */
export const CHANGES_CHANNEL = 'recordbase_changes';

const CAPTURE_FUNCTION = '_recordbase_realtime_capture';
const TRIGGERS = [
  { name: '_recordbase_realtime_insert', event: 'INSERT', transition: 'NEW TABLE AS rb_new' },
  { name: '_recordbase_realtime_update', event: 'UPDATE', transition: 'NEW TABLE AS rb_new' },
  { name: '_recordbase_realtime_delete', event: 'DELETE', transition: 'OLD TABLE AS rb_old' },
] as const;

/** The channel an instance listens on for requests addressed to it (subscription changes, acks). */
export function instanceChannel(instanceId: string): string {
  return `recordbase_i_${instanceId}`;
}

/**
 * The tables and the capture function realtime needs (idempotent, run by the schema sync under
 * its advisory lock). The function is statement-level with transition tables: a bulk delete of
 * 100,000 rows is one INSERT ... SELECT into the outbox and one notification, not 100,000 trigger
 * calls. `SET search_path FROM CURRENT` pins the schema the function was made in, so the outbox it
 * writes is the one beside the collection tables whatever the writing session's search_path.
 * `to_jsonb(n.*)`, not `to_jsonb(n)`: a collection may have a field named `n`, and a bare name
 * means the column before the row.
 */
export function realtimeTableStatements(): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS ${q(OUTBOX_TABLE)} ("seq" bigserial PRIMARY KEY, "tx" xid8 NOT NULL DEFAULT pg_current_xact_id(), "collection" text NOT NULL, "record_id" text NOT NULL, "action" text NOT NULL, "row" jsonb NOT NULL, "created_at" timestamptz NOT NULL DEFAULT now())`,
    `CREATE INDEX IF NOT EXISTS "_recordbase_realtime_outbox_tx" ON ${q(OUTBOX_TABLE)} ("tx")`,
    `CREATE INDEX IF NOT EXISTS "_recordbase_realtime_outbox_created" ON ${q(OUTBOX_TABLE)} ("created_at")`,
    `CREATE TABLE IF NOT EXISTS ${q(INSTANCES_TABLE)} ("instance_id" text PRIMARY KEY, "heartbeat_at" timestamptz NOT NULL DEFAULT now())`,
    `CREATE TABLE IF NOT EXISTS ${q(CLIENTS_TABLE)} ("client_id" text PRIMARY KEY, "instance_id" text NOT NULL, "identity" jsonb, "subscriptions" jsonb NOT NULL DEFAULT '[]'::jsonb, "updated_at" timestamptz NOT NULL DEFAULT now())`,
    `CREATE INDEX IF NOT EXISTS "_recordbase_realtime_clients_instance" ON ${q(CLIENTS_TABLE)} ("instance_id")`,
    `CREATE OR REPLACE FUNCTION ${q(CAPTURE_FUNCTION)}() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
  IF TG_OP = 'DELETE' THEN
    INSERT INTO ${q(OUTBOX_TABLE)} ("collection", "record_id", "action", "row") SELECT TG_TABLE_NAME, o."id", 'delete', to_jsonb(o.*) FROM rb_old AS o;
  ELSE
    INSERT INTO ${q(OUTBOX_TABLE)} ("collection", "record_id", "action", "row") SELECT TG_TABLE_NAME, n."id", CASE TG_OP WHEN 'INSERT' THEN 'create' ELSE 'update' END, to_jsonb(n.*) FROM rb_new AS n;
  END IF;
  IF FOUND THEN
    PERFORM pg_notify('${CHANGES_CHANNEL}', '');
  END IF;
  RETURN NULL;
END
$fn$`,
  ];
}

/** Installs (realtime on) or removes (realtime off) the capture triggers of each collection table. */
export function captureTriggerStatements(collections: readonly CollectionSchema[], enabled: boolean): string[] {
  return collections.flatMap((c) =>
    TRIGGERS.map((t) =>
      enabled
        ? `CREATE OR REPLACE TRIGGER ${q(t.name)} AFTER ${t.event} ON ${q(c.table)} REFERENCING ${t.transition} FOR EACH STATEMENT EXECUTE FUNCTION ${q(CAPTURE_FUNCTION)}()`
        : `DROP TRIGGER IF EXISTS ${q(t.name)} ON ${q(c.table)}`,
    ),
  );
}
