#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import express from 'express';
import type { Knex } from 'knex';
import { createRecordsRouter } from '../router.js';
import { createAppServer } from '../http/create-app-server.js';
import { createLandingPage } from '../http/landing-page.js';
import type { ResolvedOptions } from '../options.js';
import { planDatabaseSync, previewViewCollections } from '../db/schema/sync-database-schema.js';
import { sweepUnreferencedFiles, type SweepReport } from '../files/sweep-files.js';
import { buildOpenApiDocument, renderOpenApiDocument } from '../openapi/build-openapi-document.js';
import { renderTypeScriptTypes } from '../openapi/render-typescript-types.js';
import { completeCollections, type CompiledCollections } from '../records/compile-collections.js';
import { BACKUP_COMMAND } from './backup-command.js';
import { asUsageError, UsageError } from './command-args.js';
import { RESTORE_COMMAND } from './restore-command.js';
import { findConfigFile, loadCheckedConfig, loadConfig, type CheckedConfig } from './load-config.js';
import { migrateCreate, migrateDown, migrateStatus, migrateUp, openConfiguredDatabase, type MigrateInput } from './migrate-command.js';

const CONFIG_NOTE = `The config file (default ./recordbase.config.js, .mjs or .ts) is a module whose default export
is the options object of createRecordsRouter (see docs/configuration.md).`;

/** One subcommand: its help text (printed by --help) and what it does. */
interface Command {
  readonly usage: string;
  readonly summary: string;
  readonly help: string;
  run(args: string[]): Promise<void>;
}

const DAY_MS = 24 * 60 * 60 * 1000;
/** Without a terminal, the progress line is printed once per this many files. */
const PROGRESS_LINE_EVERY = 1000;

/** Parses a command's arguments; an unknown or malformed option is a usage error, not a failure. */
function parseCommandArgs<T extends NonNullable<Parameters<typeof parseArgs>[0]>['options']>(args: string[], options: T) {
  return asUsageError(() => parseArgs({ args, options, strict: true, allowPositionals: false }));
}

/** Closes a database the config created (a Knex pool would keep the process alive). */
async function releaseConfiguredDatabase(options: ResolvedOptions): Promise<void> {
  await options.database?.destroy();
}


/** `host:port` as a URL authority: IPv6 addresses in brackets. */
function formatAuthority(address: AddressInfo): string {
  return address.family === 'IPv6' ? `[${address.address}]:${address.port}` : `${address.address}:${address.port}`;
}

async function serve(args: string[]): Promise<void> {
  const { values } = parseCommandArgs(args, {
    config: { type: 'string' },
    port: { type: 'string', default: process.env.PORT ?? '8090' },
    host: { type: 'string', default: process.env.HOST ?? '127.0.0.1' },
  });
  const port = Number(values.port);
  if (!/^\d+$/.test(values.port) || port > 65535) throw new UsageError(`--port must be a port number (0-65535), got "${values.port}"`);
  const config = await loadConfig(values.config);
  const router = createRecordsRouter(config);
  const app = express();
  app.disable('x-powered-by');
  app.use('/', router);
  app.get('/', createLandingPage({ dashboard: config.dashboard === true, openapi: config.openapi === true, atAppRoot: 'answer' }));
  // Listen before the schema sync, so a taken port fails at once; requests wait for `ready`.
  // The app's prototypes are given to the server (create-app-server.ts): Express then changes no
  // request's prototype, which costs V8 a hidden class per request.
  const server = createAppServer(app);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, values.host, () => {
      server.off('error', reject);
      resolve();
    });
  }).catch(async (error: unknown) => {
    await router.close();
    throw new Error(`cannot listen on ${values.host}:${port}: ${error instanceof Error ? error.message : String(error)}`);
  });
  try {
    await router.ready;
  } catch (err) {
    server.close();
    await router.close();
    throw err;
  }
  const base = `http://${formatAuthority(server.address() as AddressInfo)}`;
  console.log(`recordbase listening on ${base}/ (records under ${base}/api/collections/{collection}/records)`);
  if (config.dashboard === true) console.log(`dashboard: ${base}/_/ (superusers sign in with a token from your auth(); docs/dashboard.md)`);
  // The drain's order (docs/deployment.md, "Rolling restarts"): the router refuses new requests and
  // lets running ones finish while the server still answers (the load balancer sees the 503s and
  // the health check), and only then does the server stop taking connections.
  const stop = () => {
    void router.close().then(() => server.close(() => process.exit(0)));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

/** `recordbase migrate [status | create <name> | down]`: the subcommands are in migrate-command.ts. */
async function migrate(args: string[]): Promise<void> {
  const sub = args[0] !== undefined && !args[0].startsWith('-') ? args[0] : undefined;
  const { values, positionals } = parseMigrateArgs(sub === undefined ? args : args.slice(1));
  if (sub !== 'create' && positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}"`);
  if (sub !== undefined && values['dry-run'] === true) throw new UsageError('--dry-run goes with migrate alone');
  if (sub !== undefined && !['status', 'create', 'down'].includes(sub)) throw new UsageError(`unknown subcommand "migrate ${sub}"`);
  if (sub === 'create' && positionals.length !== 1) throw new UsageError('migrate create needs one name: recordbase migrate create rename_body');
  const configFile = findConfigFile(values.config);
  const input: MigrateInput = { config: await loadCheckedConfig(configFile), configFile };
  if (sub === 'status') return migrateStatus(input);
  if (sub === 'down') return migrateDown(input);
  if (sub === 'create') return migrateCreate(input, positionals[0]!);
  return migrateUp(input, values['dry-run'] === true);
}

/** migrate's options: as every command's, with `create`'s name as the one positional. */
function parseMigrateArgs(args: string[]) {
  return asUsageError(() => parseArgs({ args, options: { config: { type: 'string' }, 'dry-run': { type: 'boolean', default: false } }, strict: true, allowPositionals: true }));
}

/**
 * The config's collections with their view collections' fields, which only the database knows
 * (its answer on the query's columns): read from the configured database without changing it.
 * Without view collections, the database is not opened.
 */
async function withViewFields(config: CheckedConfig): Promise<CompiledCollections> {
  if (!config.compiled.viewsPending) return config.compiled;
  const db = openConfiguredDatabase(config.options);
  try {
    return completeCollections(config.compiled, await previewViewCollections(db, config.compiled.registry.collections));
  } finally {
    if (db !== config.options.database) await db.destroy();
  }
}

/** `recordbase openapi`: the OpenAPI document of the config's collections, on stdout. */
async function openapi(args: string[]): Promise<void> {
  const { values } = parseCommandArgs(args, { config: { type: 'string' }, server: { type: 'string', default: '/' } });
  const config = await loadCheckedConfig(values.config);
  const { options } = config;
  try {
    const compiled = await withViewFields(config);
    const document = buildOpenApiDocument(compiled.registry, { serverUrl: values.server, limits: options.limits, multipartUpdate: options.multipartUpdate });
    process.stdout.write(renderOpenApiDocument(document));
  } finally {
    await releaseConfiguredDatabase(options);
  }
}

/** `recordbase types`: TypeScript declarations of the config's collections, on stdout. */
async function types(args: string[]): Promise<void> {
  const { values } = parseCommandArgs(args, { config: { type: 'string' } });
  const config = await loadCheckedConfig(values.config);
  const { options } = config;
  try {
    const compiled = await withViewFields(config);
    process.stdout.write(renderTypeScriptTypes(compiled.registry, { limits: options.limits, multipartUpdate: options.multipartUpdate }));
  } finally {
    await releaseConfiguredDatabase(options);
  }
}

/** Reads `--days`: a non-negative number of days, fractions allowed, in milliseconds. */
function parseDays(raw: string | undefined): number {
  if (raw === undefined) throw new UsageError('clean needs --days N (remove unreferenced files older than N days)');
  if (!/^(?:\d+(?:\.\d*)?|\.\d+)$/.test(raw.trim())) throw new UsageError(`--days must be a non-negative number of days, got "${raw}"`);
  return Number(raw.trim()) * DAY_MS;
}

/** Sizes for people: `512 B`, `1.2 MB` (decimal units, one decimal). */
function formatBytes(bytes: number): string {
  if (bytes < 1000) return `${bytes} B`;
  const units = ['kB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = -1;
  do {
    value /= 1000;
    unit++;
  } while (value >= 1000 && unit < units.length - 1);
  return `${value.toFixed(1)} ${units[unit]}`;
}

/** The last line of `clean`: what was scanned, removed (or would be) and left alone. */
function formatSweepSummary(report: SweepReport, dryRun: boolean): string {
  const removed = dryRun
    ? `would remove ${report.removed} (${formatBytes(report.bytesFreed)} would be freed)`
    : `removed ${report.removed} (${formatBytes(report.bytesFreed)} freed)`;
  const failed = report.failed > 0 ? `, failed to remove ${report.failed}` : '';
  return `Scanned ${report.scanned} ${report.scanned === 1 ? 'file' : 'files'}, ${removed}, skipped ${report.skipped}${failed}.`;
}

/**
 * Reports progress on stderr, leaving stdout to the summary: one line rewritten in place on a
 * terminal, else a line every thousand files so that logs stay short.
 */
function createProgressReporter(dryRun: boolean): { update(p: { scanned: number; removed: number }): void; finish(): void } {
  const tty = process.stderr.isTTY === true;
  const verb = dryRun ? 'to remove' : 'removed';
  let printed = 0;
  let shown = false;
  return {
    update({ scanned, removed }) {
      if (tty) {
        process.stderr.write(`\rScanning: ${scanned} files, ${removed} ${verb}`);
        shown = true;
      } else if (Math.floor(scanned / PROGRESS_LINE_EVERY) > printed) {
        printed = Math.floor(scanned / PROGRESS_LINE_EVERY);
        process.stderr.write(`Scanning: ${scanned} files, ${removed} ${verb}\n`);
      }
    },
    finish() {
      if (shown) process.stderr.write('\n'); // end the rewritten line before anything else prints
      shown = false;
    },
  };
}

/**
 * `recordbase clean`: the periodic sweep on demand (a cron job, or after turning `fileSweep` off),
 * with the same config, database and storage as `serve`.
 */
async function clean(args: string[]): Promise<void> {
  const { values } = parseCommandArgs(args, { config: { type: 'string' }, days: { type: 'string' }, 'dry-run': { type: 'boolean', default: false } });
  const minAgeMs = parseDays(values.days);
  const dryRun = values['dry-run'] === true;
  const { options, compiled } = await loadCheckedConfig(values.config);
  const registry = compiled.registry;
  const storage = options.storage;
  const db = openConfiguredDatabase(options);
  const progress = createProgressReporter(dryRun);
  try {
    // The sweep reads every file column; on a database not yet migrated to the config it would
    // fail half-way with a bare SQL error, so say what to do instead.
    if ((await planDatabaseSync(db, registry.collections)).statements.length > 0) {
      throw new Error('the database schema is not up to date with the config; run `recordbase migrate` (or start the app) first');
    }
    const report = await sweepUnreferencedFiles({
      database: db,
      registry,
      storage,
      minAgeMs,
      dryRun,
      onProgress: (p) => progress.update(p),
      onDeleteError: ({ key, error }) => {
        progress.finish();
        console.error(`recordbase: could not remove ${key}: ${error instanceof Error ? error.message : String(error)}`);
      },
    });
    progress.finish();
    if (!report.locked) {
      console.log('Another recordbase instance is sweeping files right now; nothing was done. Try again later.');
      return;
    }
    console.log(formatSweepSummary(report, dryRun));
    if (report.failed > 0) process.exitCode = 1;
  } finally {
    progress.finish();
    await db.destroy();
  }
}

const COMMANDS: Record<string, Command> = {
  serve: {
    usage: 'recordbase serve [--config file] [--port 8090] [--host 127.0.0.1]',
    summary: 'run a standalone server with the router mounted at /',
    help: `Runs a standalone server with the router mounted at /, and prints the address it listens on
(and the dashboard's, with dashboard: true). A first start of the embedded database says so
while it creates it (several seconds). A port in use (or any other listen error) is an error: exit code 1.

  --config file   the config module (default ./recordbase.config.js)
  --port N        the port, 0 for any free one (default $PORT or 8090)
  --host address  the interface to listen on (default $HOST or 127.0.0.1; 0.0.0.0 for every IPv4 one)`,
    run: serve,
  },
  migrate: {
    usage: 'recordbase migrate [status | create <name> | down] [--config file] [--dry-run]',
    summary: 'apply pending migrations, then bring the database schema up to date with the collections',
    help: `Applies the config's pending migrations (its migrations option), each once and in name order,
then brings the database schema up to date with the collections, printing what it ran: what a
start of the app does. A change the collections alone cannot make safely (a type change, a
dropped field) is refused, naming every offending collection and field: a migration makes it
(docs/collections.md, "Changing your schema").

  --config file   the config module (.js, .mjs or .ts; default ./recordbase.config.js, .mjs, .ts)
  --dry-run       list the pending migrations and print the sync's DDL without running anything;
                  changes nothing (an embedded database that does not exist yet is not created:
                  the plan is against an empty one)

  recordbase migrate status         every migration, applied (when) or pending
  recordbase migrate create <name>  write a template migrations/YYYYMMDDHHMMSS_<name>.ts (or .js)
  recordbase migrate down           run the down of the migration applied last, and forget it

While an app holds the embedded database, the command says which process holds it and stops.`,
    run: migrate,
  },
  clean: {
    usage: 'recordbase clean --days N [--config file] [--dry-run]',
    summary: 'remove unreferenced stored files older than N days',
    help: `Removes stored files that no record references and that are older than N days, then prints
what it scanned, removed and skipped. Exit code 1 if a removal failed.

  --days N        minimum age in days; fractions allowed (--days 0.5 is 12 hours)
  --config file   the config module (default ./recordbase.config.js)
  --dry-run       only count what would be removed`,
    run: clean,
  },
  openapi: {
    usage: 'recordbase openapi [--config file] [--server url]',
    summary: 'print the OpenAPI 3.1 document of the collections',
    help: `Prints the OpenAPI 3.1 document (JSON) of every records and files path of the config's
collections, hidden fields left out. Same config, same bytes. With view collections declared,
their fields come from the config's database, read without changing it. See docs/openapi.md.

  --config file   the config module (default ./recordbase.config.js)
  --server url    servers[0].url: where the router is mounted, e.g. https://example.com/backend
                  (default /)`,
    run: openapi,
  },
  types: {
    usage: 'recordbase types [--config file]',
    summary: 'print TypeScript declarations of the collections for the pocketbase SDK',
    help: `Prints TypeScript declarations of the config's collections: a record interface per collection
(expand typed through relations), create and update bodies, and TypedPocketBase for the pocketbase
SDK. Same config, same bytes. With view collections declared, their fields come from the config's
database, read without changing it. See docs/openapi.md.

  recordbase types > src/pocketbase-types.ts

  --config file   the config module (default ./recordbase.config.js)`,
    run: types,
  },
  backup: BACKUP_COMMAND,
  restore: RESTORE_COMMAND,
};

/** The package version, read from the package.json beside dist/ (main.js is dist/lib/cli/main.js). */
function readVersion(): string {
  const manifest = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
  return manifest.version;
}

function formatUsage(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((name) => name.length));
  const lines = Object.entries(COMMANDS).map(([name, command]) => `  ${name.padEnd(width)}  ${command.summary}`);
  return `Usage: recordbase <command> [options]

Commands:
${lines.join('\n')}

recordbase <command> --help   the options of one command
recordbase --version          the version

${CONFIG_NOTE}`;
}

function isHelpFlag(arg: string | undefined): boolean {
  return arg === '--help' || arg === '-h';
}

/** The `recordbase` executable (docs/configuration.md#the-executable). Help goes to stdout, errors to stderr. */
async function main(argv: string[]): Promise<void> {
  const [name, ...rest] = argv;
  if (name === undefined || isHelpFlag(name) || name === 'help') {
    const topic = name === 'help' && rest[0] !== undefined ? COMMANDS[rest[0]] : undefined;
    console.log(topic ? `Usage: ${topic.usage}\n\n${topic.help}` : formatUsage());
    return;
  }
  if (name === '--version' || name === '-v') {
    console.log(readVersion());
    return;
  }
  const command = Object.prototype.hasOwnProperty.call(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (command === undefined) throw new UsageError(`unknown command "${name}"`);
  if (rest.some(isHelpFlag)) {
    console.log(`Usage: ${command.usage}\n\n${command.help}`);
    return;
  }
  try {
    await command.run(rest);
  } catch (err) {
    if (err instanceof UsageError) err.usage ??= `Usage: ${command.usage}\n(recordbase ${name} --help for the options)`;
    throw err;
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof UsageError) {
    console.error(`recordbase: ${err.message}\n\n${err.usage ?? formatUsage()}`);
    process.exitCode = 2;
    return;
  }
  console.error(`recordbase: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
});
