import type { Knex } from 'knex';
import { SETTINGS_TABLE } from './shared-names.js';

/**
 * One shared value in `_recordbase_settings`, read and created the same way by every instance on
 * the database. The table is made by the schema sync, so use it after `syncDatabaseSchema`.
 */
export interface SharedSetting {
  /** The stored value, or undefined when no instance has stored one yet. */
  read(): Promise<string | undefined>;
  /**
   * Stores `candidate` unless a value exists, and resolves with the value that is stored now:
   * `candidate`, or what another instance stored first. Concurrent claims all resolve with the
   * same value (INSERT ... ON CONFLICT DO NOTHING, then a read of the committed row).
   */
  claim(candidate: string): Promise<string>;
  /** Deletes the stored value, if any (a value no instance should use any more). */
  remove(): Promise<void>;
}

/** The shared setting `key` on `db`. */
export function openSharedSetting(db: Knex, key: string): SharedSetting {
  const read = async (): Promise<string | undefined> => {
    const row: { value: string } | undefined = await db.select('value').from(SETTINGS_TABLE).where({ key }).first();
    return row?.value;
  };
  return {
    read,
    async claim(candidate: string): Promise<string> {
      await db.insert({ key, value: candidate }).into(SETTINGS_TABLE).onConflict('key').ignore();
      const stored = await read();
      if (stored === undefined) throw new Error(`the setting "${key}" vanished from ${SETTINGS_TABLE} right after it was stored`);
      return stored;
    },
    async remove(): Promise<void> {
      await db.delete().from(SETTINGS_TABLE).where({ key });
    },
  };
}
