import type { Knex } from 'knex';
import { OUTBOX_TABLE } from '../../lib/db/shared-names.js';

/** How many rows the realtime outbox holds for `collection` (its table name). */
export async function outboxCount(db: Knex, collection: string): Promise<number> {
  const result: { rows: { n: number }[] } = await db.raw(`SELECT count(*)::int AS n FROM "${OUTBOX_TABLE}" WHERE "collection" = ?`, [collection]);
  return result.rows[0]!.n;
}
