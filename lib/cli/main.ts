#!/usr/bin/env node
import { parseArgs } from 'node:util';
import express from 'express';
import type { Knex } from 'knex';
import { createRecordsRouter } from '../router.js';
import { embeddedDatabaseDir, openEmbeddedDatabase } from '../db/open-embedded-database.js';
import { resolveOptions, type ResolvedOptions } from '../options.js';
import { planDatabaseSync, syncDatabaseSchema } from '../db/sync-database-schema.js';
import { sweepUnreferencedFiles, type SweepReport } from '../files/sweep-files.js';
import { buildSchemaRegistry } from '../schema/collection-schema.js';
import { loadConfig } from './load-config.js';

const USAGE = `Usage:
  recordbase serve   [--config recordbase.config.js] [--port 8090]
  recordbase migrate [--config recordbase.config.js] [--dry-run]
  recordbase clean   --days N [--config recordbase.config.js] [--dry-run]

serve    runs a standalone server with the router mounted at /.
migrate  brings the database schema up to date (--dry-run prints the DDL instead).
clean    removes stored files that no record references and that are older than N days
         (fractions allowed: --days 0.5 is 12 hours); --dry-run only counts them.

The config file is a JavaScript module whose default export is the options object of
createRecordsRouter (see docs/configuration.md).`;

const DAY_MS = 24 * 60 * 60 * 1000;
/** Without a terminal, the progress line is printed once per this many files. */
const PROGRESS_LINE_EVERY = 1000;

/** A mistake in the command line: exit code 2 and the usage text, as opposed to a failure (1). */
class UsageError extends Error {}

/** Parses a command's arguments; an unknown or malformed option is a usage error, not a failure. */
function parseCommandArgs<T extends NonNullable<Parameters<typeof parseArgs>[0]>['options']>(args: string[], options: T) {
  try {
    return parseArgs({ args, options, strict: true, allowPositionals: false });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
}

/** The database the config names, or the embedded one under its dataDir: the same rule as the router. */
function openConfiguredDatabase(options: ResolvedOptions): Knex {
  return options.database ?? openEmbeddedDatabase(embeddedDatabaseDir(options.dataDir));
}

async function serve(args: string[]): Promise<void> {
  const { values } = parseCommandArgs(args, { config: { type: 'string' }, port: { type: 'string', default: process.env.PORT ?? '8090' } });
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`--port must be a port number, got "${values.port}"`);
  const router = createRecordsRouter(await loadConfig(values.config));
  await router.ready;
  const app = express();
  app.disable('x-powered-by');
  app.use('/', router);
  const server = app.listen(port, () => {
    const address = server.address();
    const actual = typeof address === 'object' && address ? address.port : port;
    console.log(`recordbase listening on http://127.0.0.1:${actual}/api/collections/{collection}/records`);
  });
  const stop = () => {
    server.close();
    void router.close().then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

async function migrate(args: string[]): Promise<void> {
  const { values } = parseCommandArgs(args, { config: { type: 'string' }, 'dry-run': { type: 'boolean', default: false } });
  const options = resolveOptions(await loadConfig(values.config));
  const collections = buildSchemaRegistry(options.collections).collections;
  const db = openConfiguredDatabase(options);
  try {
    const plan = values['dry-run'] ? await planDatabaseSync(db, collections) : await syncDatabaseSchema(db, collections);
    if (plan.statements.length === 0) console.log('-- the database is up to date');
    for (const statement of plan.statements) console.log(`${statement};`);
    if (!values['dry-run'] && plan.statements.length > 0) console.log(`-- applied ${plan.statements.length} statement(s)`);
  } finally {
    await db.destroy();
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
  const options = resolveOptions(await loadConfig(values.config));
  const registry = buildSchemaRegistry(options.collections);
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

/** The `recordbase` executable (DESIGN.md section 8). */
async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command === 'serve') return serve(rest);
  if (command === 'migrate') return migrate(rest);
  if (command === 'clean') return clean(rest);
  console.error(USAGE);
  process.exitCode = command === undefined || command === '--help' || command === '-h' ? 0 : 2;
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof UsageError) {
    console.error(`recordbase: ${err.message}\n\n${USAGE}`);
    process.exitCode = 2;
    return;
  }
  console.error(`recordbase: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
});
