import path from 'node:path';
import { parseArgs } from 'node:util';
import { restoreBackup } from '../backups/restore-backup.js';

/** `recordbase restore <file> --data-dir <dir> [--storage-dir dir] [--force]`: a backup into a data directory no process holds. */
async function restore(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    options: { 'data-dir': { type: 'string' }, 'storage-dir': { type: 'string' }, force: { type: 'boolean', default: false } },
    strict: true,
    allowPositionals: true,
  });
  const file = positionals[0];
  if (file === undefined || positionals.length > 1) throw new Error(`restore takes one backup file. Usage: ${RESTORE_COMMAND.usage}`);
  if (values['data-dir'] === undefined) throw new Error(`restore needs --data-dir: the data directory to restore into. Usage: ${RESTORE_COMMAND.usage}`);
  const report = await restoreBackup({ file, dataDir: values['data-dir'], storageDir: values['storage-dir'], force: values.force });
  const { manifest } = report;
  console.log(`restored ${path.basename(file)} (taken ${manifest.created}, engine ${manifest.engine})`);
  for (const { part, folder } of report.restored) console.log(`  ${part}: ${manifest[part].files} files, ${manifest[part].bytes} bytes -> ${folder}`);
  for (const part of ['database', 'storage'] as const) if (!manifest[part].included) console.log(`  ${part}: not in this backup (${manifest[part].note})`);
}

/** The `restore` command of the executable (its entry in main.ts's table). */
export const RESTORE_COMMAND = {
  usage: 'recordbase restore <file> --data-dir <dir> [--storage-dir dir] [--force]',
  summary: 'restore a backup into a data directory no app is using',
  help: `Restores a backup made by records.backup() or POST /api/backups into a data directory that no
app or command has open (refused, naming the holder, while one does). The archive is read and
checked whole before anything is written (entries inside db/ and storage/ only, no links, sizes
as its manifest says); then each part is written beside its target and swapped in, so a failure
leaves the data directory as it was. See docs/deployment.md, "Backups".

  --data-dir dir      the data directory: the database goes to dir/db
  --storage-dir dir   where the storage's files go (default dir/storage)
  --force             replace a database or storage folder that is not empty (default: refuse);
                      the old contents are removed once the restore has succeeded`,
  run: restore,
};
