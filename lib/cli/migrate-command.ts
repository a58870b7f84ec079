import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Knex } from 'knex';
import { embeddedDatabaseDir, openEmbeddedDatabase } from '../db/engine/open-embedded-database.js';
import { realtimeSchema } from '../db/realtime/realtime-schema.js';
import { planDatabaseSync, planSchemaSync, readDatabaseState, syncDatabaseSchema } from '../db/schema/sync-database-schema.js';
import { loadMigrations, migrationNameOf, type LoadedMigration } from '../migrations/load-migrations.js';
import { applyPendingMigrations, describeMigrations, previewPendingMigrations, revertLastMigration, type MigrationStatus } from '../migrations/run-migrations.js';
import type { MigrationServices } from '../migrations/transaction-records.js';
import type { ResolvedOptions } from '../options.js';
import { emptyDatabaseState, type MigrationPlan } from '../schema/plan-migration.js';
import type { CheckedConfig } from './load-config.js';

/** What `recordbase migrate` and its subcommands are given: the checked config, and its file (for `create`'s file type). */
export interface MigrateInput {
  readonly config: CheckedConfig;
  readonly configFile: string;
}

/**
 * The database the config names, or the embedded one under its dataDir, as the router opens it
 * (whose lock names the process holding it, if one does); a first start of the embedded one says
 * so on stderr while it creates it. Every command that opens the config's database opens it here.
 */
export function openConfiguredDatabase(options: ResolvedOptions): Knex {
  return options.database ?? openEmbeddedDatabase(embeddedDatabaseDir(options.dataDir), { onCreate: (message) => console.error(`recordbase: ${message}`) });
}

/** Whether the config's embedded database does not exist yet (opening it would create its folder). */
function isEmbeddedAndAbsent(options: ResolvedOptions): boolean {
  return options.database === undefined && !existsSync(embeddedDatabaseDir(options.dataDir));
}

function servicesOf(config: CheckedConfig): MigrationServices {
  const { options, compiled } = config;
  return { compiled, storage: options.storage, logger: options.logger, limits: options.limits, tempDir: options.uploadTempDir };
}

async function loadConfiguredMigrations(options: ResolvedOptions): Promise<LoadedMigration[]> {
  return options.migrations === undefined ? [] : loadMigrations(options.migrations);
}

/** Runs `work` on the config's database and closes it, the host's Knex included (the command owns the process). */
async function withDatabase<T>(options: ResolvedOptions, work: (db: Knex) => Promise<T>): Promise<T> {
  const db = openConfiguredDatabase(options);
  try {
    return await work(db);
  } finally {
    await db.destroy();
  }
}

function printPlan(plan: MigrationPlan, applied: boolean): void {
  if (plan.statements.length === 0) console.log('-- the database is up to date');
  for (const statement of plan.statements) console.log(`${statement};`);
  if (applied && plan.statements.length > 0) console.log(`-- applied ${plan.statements.length} statement(s)`);
}

/**
 * `recordbase migrate [--dry-run]`: the pending migrations, then the schema sync, as a start of
 * the app would run them. A dry run changes nothing: it runs the pending migrations in a
 * transaction it rolls back, and prints the sync's DDL against the database they leave (with the
 * embedded database not made yet, it lists them and plans against an empty database).
 */
export async function migrateUp(input: MigrateInput, dryRun: boolean): Promise<void> {
  const { options, compiled } = input.config;
  const collections = compiled.registry.collections;
  const migrations = await loadConfiguredMigrations(options);
  if (!dryRun) {
    const plan = await withDatabase(options, async (db) => {
      for (const name of await applyPendingMigrations(db, { migrations, services: servicesOf(input.config) })) console.log(`-- applied migration ${name}`);
      return syncDatabaseSchema(db, collections, { additions: [realtimeSchema(options.realtime !== false)] });
    });
    printPlan(plan, true);
    return;
  }
  if (isEmbeddedAndAbsent(options)) {
    if (migrations.length > 0) console.log(`-- pending migrations: ${migrations.map((m) => m.name).join(', ')}`);
    printPlan(planSchemaSync(collections, emptyDatabaseState()), false);
    return;
  }
  await withDatabase(options, async (db) => {
    const pending = (await describeMigrations(db, migrations)).filter((m) => m.appliedAt === undefined);
    if (pending.length === 0) {
      printPlan(await planDatabaseSync(db, collections), false);
      return;
    }
    console.log(`-- pending migrations: ${pending.map((m) => m.name).join(', ')} (run in a transaction rolled back: the plan below is the sync after them)`);
    const plan = await previewPendingMigrations(db, {
      migrations,
      services: servicesOf(input.config),
      inspect: async (trx) => planSchemaSync(collections, await readDatabaseState(trx, collections.map((c) => c.table))),
    });
    printPlan(plan, false);
  });
}

function formatStatus(status: MigrationStatus): string {
  if (status.appliedAt === undefined) return `pending  ${' '.repeat(24)}  ${status.name}`;
  const notes = [status.changed ? 'changed since it was applied' : '', status.missing ? 'not among the migrations' : ''].filter(Boolean);
  return `applied  ${status.appliedAt.padEnd(24)}  ${status.name}${notes.length > 0 ? `  (${notes.join(', ')})` : ''}`;
}

/** `recordbase migrate status`: every migration applied (when) or pending. Reads only; an embedded database that does not exist is not created. */
export async function migrateStatus(input: MigrateInput): Promise<void> {
  const { options } = input.config;
  const migrations = await loadConfiguredMigrations(options);
  const statuses = isEmbeddedAndAbsent(options) ? migrations.map((m) => ({ name: m.name, changed: false, missing: false })) : await withDatabase(options, (db) => describeMigrations(db, migrations));
  if (statuses.length === 0) console.log(options.migrations === undefined ? 'no migrations: the config has no migrations option' : 'no migrations');
  for (const status of statuses) console.log(formatStatus(status));
}

/** `recordbase migrate down`: the `down` of the migration applied last, its record removed. */
export async function migrateDown(input: MigrateInput): Promise<void> {
  const { options } = input.config;
  const migrations = await loadConfiguredMigrations(options);
  if (isEmbeddedAndAbsent(options)) throw new Error('no migration has been applied: the embedded database does not exist yet');
  const name = await withDatabase(options, (db) => revertLastMigration(db, { migrations, services: servicesOf(input.config) }));
  console.log(`reverted migration ${name}`);
}

/** A new migration's name: lower-case words joined by `_`, as its file name ends. */
const NEW_MIGRATION_NAME = /^[a-z0-9]+(_[a-z0-9]+)*$/;

const TYPESCRIPT_TEMPLATE = `import type { MigrationContext } from 'recordbase';

// docs/collections.md "Changing your schema". Runs once, in one transaction, before the schema sync.
export default {
  async up(m: MigrationContext) {
    // await m.renameField('posts', 'body', 'content');
  },
  async down(m: MigrationContext) {
    // await m.renameField('posts', 'content', 'body');
  },
};
`;

const JAVASCRIPT_TEMPLATE = `// docs/collections.md "Changing your schema". Runs once, in one transaction, before the schema sync.
/** @type {import('recordbase').MigrationModule} */
export default {
  async up(m) {
    // await m.renameField('posts', 'body', 'content');
  },
  async down(m) {
    // await m.renameField('posts', 'content', 'body');
  },
};
`;

/** `YYYYMMDDHHMMSS` of `now`, in UTC: names sort in the order they were made. */
function formatStamp(now: Date): string {
  return now.toISOString().replace(/[-:T]/g, '').slice(0, 14);
}

/**
 * The extension of a new migration, matching the project: that of the folder's newest migration,
 * else `.ts` for a TypeScript config, else `.js` in an ES module package and `.mjs` elsewhere (so
 * that `export default` loads either way).
 */
function chooseExtension(folder: string, configFile: string): string {
  const existing = existsSync(folder) ? readdirSync(folder).filter((file) => /\.(js|mjs|ts|mts)$/.test(file) && !/\.d\.[mc]?ts$/.test(file)).sort() : [];
  const newest = existing.at(-1);
  if (newest !== undefined) return path.extname(newest);
  if (/\.[mc]?ts$/.test(configFile)) return '.ts';
  try {
    return (JSON.parse(readFileSync('package.json', 'utf8')) as { type?: string }).type === 'module' ? '.js' : '.mjs';
  } catch {
    return '.mjs';
  }
}

/** `recordbase migrate create <name>`: writes a template into the migrations folder and prints its path. */
export function migrateCreate(input: MigrateInput, name: string, now = new Date()): void {
  if (!NEW_MIGRATION_NAME.test(name) || name.length > 150) throw new Error(`a migration name is lower-case words joined by "_" (rename_body_to_content), got ${JSON.stringify(name)}`);
  const folder = input.config.options.migrations;
  if (typeof folder !== 'string') throw new Error('migrate create needs the config\'s migrations option to be a folder (migrations: "./migrations")');
  const resolved = path.resolve(folder);
  const extension = chooseExtension(resolved, input.configFile);
  const file = path.join(resolved, `${formatStamp(now)}_${name}${extension}`);
  mkdirSync(resolved, { recursive: true });
  writeFileSync(file, extension.endsWith('ts') ? TYPESCRIPT_TEMPLATE : JAVASCRIPT_TEMPLATE, { flag: 'wx' });
  console.log(`created ${path.relative(process.cwd(), file) || file} (migration ${migrationNameOf(file)})`);
}
