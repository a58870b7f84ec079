import type { Knex } from 'knex';
import { quoteIdent as q } from '../../sql-fragment.js';
import { SETTINGS_TABLE } from '../shared-names.js';
import { StatementRunner } from '../statements/statement-runner.js';

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
  const runner = new StatementRunner(db);
  const read = async (): Promise<string | undefined> => {
    const rows = await runner.rows<{ value: string }>({ sql: `SELECT "value" FROM ${q(SETTINGS_TABLE)} WHERE "key" = ? LIMIT 1`, bindings: [key] });
    return rows[0]?.value;
  };
  return {
    read,
    async claim(candidate: string): Promise<string> {
      await runner.query({ sql: `INSERT INTO ${q(SETTINGS_TABLE)} ("key", "value") VALUES (?, ?) ON CONFLICT ("key") DO NOTHING`, bindings: [key, candidate] });
      const stored = await read();
      if (stored === undefined) throw new Error(`the setting "${key}" vanished from ${SETTINGS_TABLE} right after it was stored`);
      return stored;
    },
    async remove(): Promise<void> {
      await runner.query({ sql: `DELETE FROM ${q(SETTINGS_TABLE)} WHERE "key" = ?`, bindings: [key] });
    },
  };
}
