import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { SchemaError } from '../errors.js';
import { importModuleFile } from './import-module-file.js';
import { checkMigrationModule, checkMigrationName, type Migration, type MigrationsOption } from './migration-definition.js';

/** A migration ready to run: its name, functions, and the checksum of its code. */
export interface LoadedMigration extends Migration {
  /** sha256 of the file (or of the functions' source, for an array), recorded when it is applied. */
  readonly checksum: string;
  /** The file it came from, for messages. */
  readonly file?: string;
}

/** The files a migrations folder holds: modules, TypeScript declarations excepted. */
const MIGRATION_FILE = /^(?!.*\.d\.[mc]?ts$).+\.(js|mjs|ts|mts)$/;

/** Most files a folder may hold: a bound on what one start loads. */
export const MAX_MIGRATION_FILES = 10_000;

/** The name of a migration file: its file name without the extension. */
export function migrationNameOf(file: string): string {
  return path.basename(file).replace(/\.(js|mjs|ts|mts)$/, '');
}

/** The migration files of `folder`, in name order; SchemaError when it is missing, or two files share a name. */
export function listMigrationFiles(folder: string): string[] {
  let entries: string[];
  try {
    entries = readdirSync(folder, { withFileTypes: true })
      .filter((entry) => entry.isFile() && MIGRATION_FILE.test(entry.name))
      .map((entry) => entry.name);
  } catch (err) {
    throw new SchemaError(`migrations: cannot read the folder ${folder} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  if (entries.length > MAX_MIGRATION_FILES) throw new SchemaError(`migrations: ${folder} holds ${entries.length} files, more than ${MAX_MIGRATION_FILES}`);
  const byName = new Map<string, string>();
  for (const entry of entries) {
    const name = migrationNameOf(entry);
    const other = byName.get(name);
    if (other !== undefined) throw new SchemaError(`migrations: ${other} and ${entry} in ${folder} are both migration "${name}"`);
    byName.set(name, entry);
  }
  return [...byName.keys()].sort(compareNames).map((name) => path.join(folder, byName.get(name)!));
}

/** Name order: by code unit, the same on every machine whatever its locale. */
function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function checksumOf(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/**
 * The migrations of the option, in name order: an array as given, or each file of a folder
 * (resolved against the working directory) loaded and checked. A file that fails to load, or
 * whose default export has no `up`, is a SchemaError naming it.
 */
export async function loadMigrations(option: MigrationsOption): Promise<LoadedMigration[]> {
  if (typeof option !== 'string') {
    return [...option]
      .map((migration) => ({ ...migration, checksum: checksumOf(`${String(migration.up)}\n${String(migration.down ?? '')}`) }))
      .sort((a, b) => compareNames(a.name, b.name));
  }
  const loaded: LoadedMigration[] = [];
  for (const file of listMigrationFiles(path.resolve(option))) {
    const name = checkMigrationName(`migration file ${file}`, migrationNameOf(file));
    let namespace: Record<string, unknown>;
    try {
      namespace = await importModuleFile(file);
    } catch (err) {
      throw new SchemaError(`migration "${name}" (${file}) could not be loaded: ${err instanceof Error ? err.message : String(err)}`);
    }
    let module;
    try {
      module = checkMigrationModule(`the default export of ${file}`, namespace.default);
    } catch (err) {
      throw new SchemaError((err as Error).message);
    }
    loaded.push({ name, up: module.up, ...(module.down ? { down: module.down } : {}), checksum: checksumOf(readFileSync(file, 'utf8')), file });
  }
  return loaded;
}
