import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { importModuleFile } from '../migrations/import-module-file.js';
import { resolveOptions, type RecordsRouterOptions, type ResolvedOptions } from '../options.js';
import { compileCollections, type CompiledCollections } from '../records/compile-collections.js';

/** The files `recordbase` looks for, in this order, when no `--config` is given. */
export const DEFAULT_CONFIG_FILES = ['recordbase.config.js', 'recordbase.config.mjs', 'recordbase.config.ts'] as const;

/** The config file's absolute path: `file`, or the first of DEFAULT_CONFIG_FILES in the working directory. */
export function findConfigFile(file: string | undefined): string {
  if (file !== undefined) {
    const path = resolve(file);
    if (!existsSync(path)) throw new Error(`config file not found: ${path}`);
    return path;
  }
  const found = DEFAULT_CONFIG_FILES.map((name) => resolve(name)).find((path) => existsSync(path));
  if (found === undefined) throw new Error(`no --config given and no ${DEFAULT_CONFIG_FILES.join(', ')} in ${process.cwd()}; see docs/configuration.md`);
  return found;
}

/**
 * Loads a config module: a JavaScript or TypeScript file (`.ts` is loaded as it is, no compile
 * step) whose default export (or `options` export) is the options object of
 * createRecordsRouter, or a function returning it (possibly async).
 */
export async function loadConfig(file: string | undefined): Promise<RecordsRouterOptions> {
  const path = findConfigFile(file);
  const mod = (await importModuleFile(path)) as { default?: unknown; options?: unknown };
  let options = mod.default ?? mod.options;
  if (typeof options === 'function') options = await (options as () => unknown)();
  if (!options || typeof options !== 'object' || !Array.isArray((options as RecordsRouterOptions).collections)) {
    throw new Error(`${path} must export (default) the options object of createRecordsRouter, with a "collections" array`);
  }
  return options as RecordsRouterOptions;
}

/** A config as every command uses it: its options resolved and its collections compiled. */
export interface CheckedConfig {
  readonly options: ResolvedOptions;
  readonly compiled: CompiledCollections;
}

/**
 * Loads a config and makes the checks createRecordsRouter makes at creation (resolveOptions,
 * then compileCollections: options, hooks, definitions, rules), so that a command refuses what
 * the router would refuse to start with. On a failure the config's own Knex is closed (its pool
 * would keep the process alive).
 */
export async function loadCheckedConfig(file: string | undefined): Promise<CheckedConfig> {
  const options = resolveOptions(await loadConfig(file));
  try {
    return { options, compiled: compileCollections(options.collections) };
  } catch (error) {
    await options.database?.destroy();
    throw error;
  }
}
