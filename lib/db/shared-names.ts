/**
 * Every name that recordbase instances on one database share: advisory-lock keys, tables and the
 * database objects beside them, NOTIFY channels. Two instances agree only through these names, so
 * a name reused for a second purpose couples two features across every instance (were the file
 * sweep and the outbox prune to take one lock, each would skip its turn while the other ran).
 * Declared here and nowhere else; spec/unit/db/shared-names.test.ts checks that each kind is
 * distinct, and that every export here has one of the suffixes it checks.
 *
 * A value, once released, stays: instances of older and newer code share a database during a
 * rolling deploy, and an old database keeps the tables and functions an older version made.
 */

/** Serialises the schema sync of every instance (and `recordbase migrate`). A fixed 32-bit value, so it can be spotted in `pg_locks` (`objid`, with `classid = 0`). */
export const SCHEMA_SYNC_LOCK_KEY = 727_274_001;
/** Taken without waiting by the instance (or `recordbase clean`) that sweeps unreferenced files; the others skip that round. */
export const FILE_SWEEP_LOCK_KEY = 727_274_002;
/** Taken without waiting by the instance that prunes the realtime outbox; the others skip that round. */
export const OUTBOX_PRUNE_LOCK_KEY = 727_274_003;
/**
 * Prefix of the transaction-scoped locks that serialise the POSTs giving realtime clients one
 * identity: the key is `hashtextextended(prefix || id, 0)`, one lock per identity.
 */
export const REALTIME_IDENTITY_LOCK_PREFIX = 'recordbase realtime identity ';

/** recordbase's own bookkeeping: the last applied definition per collection. */
export const META_TABLE = '_rb_collections';
/**
 * Values every instance on the database must share, by key (the file-token secret): kept in the
 * database so that instances need no shared disk or configuration to agree.
 */
export const SETTINGS_TABLE = '_recordbase_settings';
/**
 * One row per applied migration (its name, when, a checksum of its code): written in the
 * migration's own transaction, under SCHEMA_SYNC_LOCK_KEY, so each is applied once by one instance.
 */
export const MIGRATIONS_TABLE = '_recordbase_migrations';
/** The key of the file-token secret in SETTINGS_TABLE: every instance signs and checks file tokens with the one secret it holds. */
export const FILE_TOKEN_SECRET_SETTING = 'file_token_secret';
/** Every committed change of a collection table, written by the capture trigger in the write's own transaction. */
export const OUTBOX_TABLE = '_recordbase_realtime_outbox';
/**
 * The outbox's nullable column with the writing request's W3C `traceparent` (docs/observability.md):
 * a delivery on any instance links its span to the write's.
 */
export const OUTBOX_TRACEPARENT_COLUMN = 'traceparent';
/**
 * The session setting (a Postgres custom parameter, `SET LOCAL`, not a key of SETTINGS_TABLE) a
 * traced write's transaction carries its `traceparent` in, for the capture trigger to copy into
 * OUTBOX_TRACEPARENT_COLUMN.
 */
export const TRACEPARENT_SESSION_SETTING = 'recordbase.traceparent';
/** One row per running instance with realtime on, refreshed by its heartbeat. */
export const INSTANCES_TABLE = '_recordbase_realtime_instances';
/** One row per open stream: its owner instance, identity (id and superuser flag only) and subscriptions. */
export const CLIENTS_TABLE = '_recordbase_realtime_clients';
/** The outbox by writing transaction (the reader's windows). */
export const OUTBOX_TX_INDEX = '_recordbase_realtime_outbox_tx';
/** The outbox by age (the prune). */
export const OUTBOX_CREATED_INDEX = '_recordbase_realtime_outbox_created';
/** Clients by owner instance (an expired instance's clients go with it). */
export const CLIENTS_INSTANCE_INDEX = '_recordbase_realtime_clients_instance';
/** Clients by identity id (the per-identity bound counts them at every POST). */
export const CLIENTS_IDENTITY_INDEX = '_recordbase_realtime_clients_identity';
/** Clients by the collections their subscriptions name (the capture gate looks a table up in it at every write). */
export const CLIENTS_TOPICS_INDEX = '_recordbase_realtime_clients_topics';
/**
 * The generated column of CLIENTS_TABLE holding what each subscription names before its `/` or `?`
 * (a collection's name or id), computed by the database from `subscriptions` whoever writes them.
 */
export const CLIENTS_TOPIC_KEYS_COLUMN = 'topic_keys';
/**
 * The column of CLIENTS_TABLE saying whether some subscription of the client has a rule or filter
 * that reads other tables than its record's: a delete is then checked for staleness against every
 * change committed after it, so every collection's changes are captured. NULL (a row of older
 * code) counts as true.
 */
export const CLIENTS_READS_OTHER_TABLES_COLUMN = 'reads_other_tables';
/** The clients whose CLIENTS_READS_OTHER_TABLES_COLUMN is not false (the capture gate asks whether there is one). */
export const CLIENTS_READING_OTHER_TABLES_INDEX = '_recordbase_realtime_clients_reading_others';
/** The immutable function CLIENTS_TOPIC_KEYS_COLUMN is computed with. */
export const TOPIC_KEYS_FUNCTION = '_recordbase_realtime_topic_keys';

/**
 * Rate limits' counters shared by the instances (lib/db/rate-limits/rate-limit-sql.ts): one row per
 * rule, client and window, the hits every instance added at its syncs; pruned once the window is over.
 */
export const RATE_LIMITS_TABLE = '_recordbase_rate_limits';
/** RATE_LIMITS_TABLE by the end of each row's window (the prune). */
export const RATE_LIMITS_EXPIRY_INDEX = '_recordbase_rate_limits_expiry';

/** The statement-level trigger function that copies changes into OUTBOX_TABLE. */
export const CAPTURE_FUNCTION = '_recordbase_realtime_capture';
/** The capture trigger for inserts, on every collection table (one per event: each has its transition table). */
export const CAPTURE_INSERT_TRIGGER = '_recordbase_realtime_insert';
/** The capture trigger for updates, on every collection table. */
export const CAPTURE_UPDATE_TRIGGER = '_recordbase_realtime_update';
/** The capture trigger for deletes, on every collection table. */
export const CAPTURE_DELETE_TRIGGER = '_recordbase_realtime_delete';

/** The channel every change wakes (one notification per committing transaction: identical ones fold). */
export const CHANGES_CHANNEL = 'recordbase_changes';
/**
 * Read-your-writes across instances with a read replica (lib/db/replica/replica-reads.ts): after a
 * caller's write commits, its instance notifies here with a hash of the caller's key, and every
 * instance reads that caller from the primary until the replica has replayed the write.
 */
export const READ_FENCES_CHANNEL = 'recordbase_read_fences';
/** The start of every instance's own channel (instanceChannel). */
export const INSTANCE_CHANNEL_PREFIX = 'recordbase_i_';

/** What `pg_stat_activity.application_name` shows for an instance's listening connection (operators and tests look for it). */
export const LISTENER_APPLICATION_NAME = 'recordbase-realtime';

/** The channel an instance listens on for requests addressed to it (subscription changes, acks). */
export function instanceChannel(instanceId: string): string {
  return `${INSTANCE_CHANNEL_PREFIX}${instanceId}`;
}
