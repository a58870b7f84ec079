import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * Where the compiled JavaScript of a worker thread's entry point is, given the URL of the module
 * that starts it and the entry point's path relative to it (`./embedded-worker.js`). Normally it
 * is that `.js` sibling (in dist/ after `npm run build`, or in the installed package). Under Jest
 * the starting module runs from its TypeScript source, which has no `.js` sibling, and a worker
 * thread cannot load TypeScript; there the build in dist/ is used, and a missing build is said
 * in so many words rather than as a module-not-found from inside the thread.
 */
export function resolveWorkerFile(starterUrl: string, relativePath: string): URL {
  if (!starterUrl.endsWith('.ts')) return new URL(relativePath, starterUrl);
  const sourceDir = fileURLToPath(new URL('.', starterUrl));
  const libIndex = sourceDir.lastIndexOf('/lib/');
  if (libIndex === -1) throw new Error(`cannot locate the build of ${relativePath} for ${starterUrl}`);
  const compiled = new URL(relativePath, `file://${sourceDir.slice(0, libIndex)}/dist${sourceDir.slice(libIndex)}`);
  if (!existsSync(compiled)) throw new Error(`The worker ${fileURLToPath(compiled)} is not built (run npm run build).`);
  return compiled;
}
