// Builds the dashboard (docs/dashboard.md) into dist/dashboard: one script and one stylesheet,
// minified, named by their content hash so the router can serve them as immutable, and an
// index.html that loads them with no inline script or style (the page's CSP forbids both).
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
const source = path.join(root, 'dashboard');
const out = path.join(root, 'dist', 'dashboard');

rmSync(out, { recursive: true, force: true });
mkdirSync(path.join(out, 'assets'), { recursive: true });

const result = await build({
  entryPoints: { dashboard: path.join(source, 'src', 'main.ts'), styles: path.join(source, 'styles.css') },
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['es2022', 'chrome111', 'firefox115', 'safari16'],
  outdir: path.join(out, 'assets'),
  entryNames: '[name]-[hash]',
  metafile: true,
  legalComments: 'none',
  logLevel: 'warning',
});

/** The built file of an entry point, as a URL relative to the page. */
function assetOf(entry) {
  const [file] = Object.entries(result.metafile.outputs).find(([, output]) => output.entryPoint?.endsWith(entry)) ?? [];
  if (!file) throw new Error(`build-dashboard: no output for ${entry}`);
  return `assets/${path.basename(file)}`;
}

const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>recordbase</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${assetOf('styles.css')}">
<script type="module" src="${assetOf('main.ts')}"></script>
</head>
<body>
<noscript>The recordbase dashboard needs JavaScript.</noscript>
</body>
</html>
`;
writeFileSync(path.join(out, 'index.html'), page);
console.log(`dashboard built into ${path.relative(root, out)}`);
