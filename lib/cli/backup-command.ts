import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Knex } from 'knex';
import { createBackupService } from '../backups/backup-service.js';
import { embeddedDatabaseDir, openEmbeddedDatabase } from '../db/engine/open-embedded-database.js';
import { asUsageError } from './command-args.js';
import { loadCheckedConfig } from './load-config.js';

/**
 * The embedded database of `dataDir`, opened for a backup: refused when there is none yet (a
 * backup of an empty folder would restore nothing) and, while an app holds it, refused with the
 * way to back up a running app.
 */
function openEmbeddedForBackup(dataDir: string): { database: Knex; directory: string } {
  const directory = embeddedDatabaseDir(dataDir);
  if (!existsSync(join(directory, 'PG_VERSION'))) {
    throw new Error(`there is no embedded database in ${directory} to back up: start the app (or run recordbase migrate) with this config first`);
  }
  try {
    return { database: openEmbeddedDatabase(directory), directory };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new Error(`${message} To back up while the app runs, ask the app for the backup: records.backup() or POST /api/backups as a superuser (docs/deployment.md, "Backups").`);
  }
}

/**
 * `recordbase backup [--config file] [--name key]`: the backup `records.backup()` makes, from the
 * command line, with the config's database, storage and `backups` settings. The schema is left
 * as it is (no migration, no sync): a backup records the database as it is.
 */
async function backup(args: string[]): Promise<void> {
  const { values } = asUsageError(() => parseArgs({ args, options: { config: { type: 'string' }, name: { type: 'string' } }, strict: true, allowPositionals: false }));
  const { options } = await loadCheckedConfig(values.config);
  let embedded: { database: Knex; directory: string } | undefined;
  try {
    if (options.database === undefined) embedded = openEmbeddedForBackup(options.dataDir);
    const database = options.database ?? embedded!.database;
    // The service's own info line would repeat what is printed below; its warnings and errors stay.
    const logger = { ...options.logger, info: () => undefined };
    const service = createBackupService({ database, embeddedDirectory: embedded?.directory, storage: options.storage, ...options.backups, logger });
    const created = await service.create({ name: values.name });
    const { manifest } = created;
    console.log(`backup written: ${created.path} (${created.size} bytes, engine ${manifest.engine})`);
    for (const part of ['database', 'storage'] as const) {
      const held = manifest[part];
      console.log(held.included ? `  ${part}: ${held.files} files, ${held.bytes} bytes` : `  ${part}: not included (${held.note})`);
    }
  } finally {
    await embedded?.database.destroy();
    await options.database?.destroy();
  }
}

/** The `backup` command of the executable (its entry in main.ts's table). */
export const BACKUP_COMMAND = {
  usage: 'recordbase backup [--config file] [--name key]',
  summary: 'write a backup (what records.backup() writes) into the backups folder',
  help: `Writes a backup, the archive records.backup() and POST /api/backups write, into the config's
backups folder (backups.dir, default dataDir/backups), and prints its path and what it holds.
\`recordbase restore\` restores it. See docs/deployment.md, "Backups".

On the embedded database the app must be stopped (the command names the process holding it;
a running app makes its own backups: records.backup() or POST /api/backups). With a Postgres
database the archive holds the storage's files only: back the database up with pg_dump.
Neither the database nor its schema is changed.

  --config file   the config module (default ./recordbase.config.js)
  --name key      the archive's name: lower-case letters, digits, _ and -, then .tar.gz
                  (default rb_backup_<UTC time>.tar.gz)`,
  run: backup,
};
