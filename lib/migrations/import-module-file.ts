import { pathToFileURL } from 'node:url';
import { createJiti } from 'jiti';

/** TypeScript modules: loaded through jiti, which strips their types as it loads them. */
const TYPESCRIPT = /\.[mc]?ts$/;

let jiti: ReturnType<typeof createJiti> | undefined;

/**
 * Loads a module file by its absolute path: `.js`, `.mjs` and `.cjs` with Node's own `import()`,
 * `.ts` (`.mts`, `.cts`) through jiti, so a TypeScript project's config and migrations need no
 * compile step (Node 20 cannot load them itself). Answers the module's namespace.
 */
export async function importModuleFile(file: string): Promise<Record<string, unknown>> {
  if (!TYPESCRIPT.test(file)) return (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  jiti ??= createJiti(import.meta.url, { moduleCache: false, fsCache: false, interopDefault: false });
  return (await jiti.import(file)) as Record<string, unknown>;
}
