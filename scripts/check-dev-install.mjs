// prepack's first step: `npm pack` builds dist/ with the dev dependencies (tsc, esbuild), which a
// fresh clone does not have until `npm install`; say so instead of failing with `tsc: not found`.
import { existsSync } from 'node:fs';
import { join } from 'node:path';

const missing = ['typescript', 'esbuild'].filter((name) => !existsSync(join(process.cwd(), 'node_modules', name, 'package.json')));
if (missing.length > 0) {
  console.error(`recordbase: npm pack builds dist/ first, which needs the dev dependencies (${missing.join(', ')} missing from ./node_modules): run npm install first.`);
  process.exit(1);
}
