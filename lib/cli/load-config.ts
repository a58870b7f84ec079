import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { RecordsRouterOptions } from '../options.js';

/** The file `recordbase` reads when no `--config` is given. */
export const DEFAULT_CONFIG_FILE = 'recordbase.config.js';

/**
 * Loads a config module: a JavaScript file whose default export (or `options` export) is the
 * options object of createRecordsRouter, or a function returning it (possibly async).
 */
export async function loadConfig(file: string | undefined): Promise<RecordsRouterOptions> {
  const path = resolve(file ?? DEFAULT_CONFIG_FILE);
  if (!existsSync(path)) {
    throw new Error(
      file ? `config file not found: ${path}` : `no --config given and no ${DEFAULT_CONFIG_FILE} in ${process.cwd()}; see docs/configuration.md`,
    );
  }
  const mod = (await import(pathToFileURL(path).href)) as { default?: unknown; options?: unknown };
  let options = mod.default ?? mod.options;
  if (typeof options === 'function') options = await (options as () => unknown)();
  if (!options || typeof options !== 'object' || !Array.isArray((options as RecordsRouterOptions).collections)) {
    throw new Error(`${path} must export (default) the options object of createRecordsRouter, with a "collections" array`);
  }
  return options as RecordsRouterOptions;
}
