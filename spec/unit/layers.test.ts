import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const LIB = fileURLToPath(new URL('../../lib/', import.meta.url));

/**
 * The floors of lib/, lowest first (docs/contributing.md, "Where a change belongs"). A module may
 * import from its own unit or from a lower floor; units on one floor know nothing of each other.
 * An entry ending in `/` is a folder; any other is one file at the top of lib/.
 */
const FLOORS: readonly Readonly<Record<string, readonly string[]>>[] = [
  { base: ['errors.ts', 'logger.ts', 'memoize-per-object.ts', 'resolve-worker-file.ts', 'sql-fragment.ts'] },
  { telemetry: ['telemetry/'] },
  { schema: ['schema/'] },
  { db: ['db/'] },
  { auth: ['auth/'] },
  { query: ['query/'], files: ['files/'] },
  { records: ['records/'], openapi: ['openapi/'], backups: ['backups/'] },
  { migrations: ['migrations/'], realtime: ['realtime/'] },
  { options: ['options.ts'] },
  { http: ['http/'] },
  { router: ['router.ts'] },
  { cli: ['cli/'], index: ['index.ts'] },
];

/** What DESIGN 9 asks of the query compiler beyond its floor: pure, so no database, server or I/O module. */
const QUERY_MAY_NOT_IMPORT = /^(knex|pg|express|multer|node:(fs|net|http|https|child_process|worker_threads))(\/|$)/;

interface Placement {
  unit: string;
  floor: number;
}

/** The unit and floor of a path relative to lib/, or undefined for a file no floor names. */
function placeOf(file: string): Placement | undefined {
  for (const [floor, units] of FLOORS.entries()) {
    for (const [unit, entries] of Object.entries(units)) {
      if (entries.some((entry) => (entry.endsWith('/') ? file.startsWith(entry) : file === entry))) return { unit, floor };
    }
  }
  return undefined;
}

/** Every import of a module: relative ones as paths under lib/, packages as written. */
interface Imports {
  local: string[];
  packages: string[];
}

/** lib/'s modules and what each imports, read with TypeScript's own scanner (types, re-exports and `import()` included). */
function readImports(): Map<string, Imports> {
  const graph = new Map<string, Imports>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.ts')) {
        const file = path.relative(LIB, full).split(path.sep).join('/');
        const imports: Imports = { local: [], packages: [] };
        for (const { fileName } of ts.preProcessFile(readFileSync(full, 'utf8'), true, true).importedFiles) {
          if (fileName.startsWith('.')) imports.local.push(path.posix.normalize(path.posix.join(path.posix.dirname(file), fileName)).replace(/\.js$/, '.ts'));
          else imports.packages.push(fileName);
        }
        graph.set(file, imports);
      }
    }
  };
  walk(LIB);
  return graph;
}

/** Imports that go up a floor or across to another unit of the same floor, and files no floor places. */
function findUpwardImports(graph: ReadonlyMap<string, Imports>): string[] {
  const found: string[] = [];
  for (const [file, { local }] of graph) {
    const from = placeOf(file);
    if (!from) {
      found.push(`${file}: on no floor (add it to FLOORS and to docs/contributing.md)`);
      continue;
    }
    for (const target of local) {
      const to = placeOf(target);
      if (!to) found.push(`${file} -> ${target}: not a module of lib/`);
      else if (to.unit !== from.unit && to.floor >= from.floor) found.push(`${file} (${from.unit}) -> ${target} (${to.unit})`);
    }
  }
  return found;
}

/** Every import circle, each as the files around it (Tarjan's strongly connected components). */
function findCycles(graph: ReadonlyMap<string, Imports>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (file: string) => {
    index.set(file, index.size);
    low.set(file, index.get(file)!);
    stack.push(file);
    onStack.add(file);
    for (const next of graph.get(file)?.local ?? []) {
      if (!graph.has(next)) continue;
      if (!index.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(file, Math.min(low.get(file)!, index.get(next)!));
    }
    if (low.get(file) !== index.get(file)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1 || graph.get(file)!.local.includes(file)) cycles.push(component.sort());
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return cycles;
}

describe('the layers of lib/', () => {
  const graph = readImports();

  test('the checks find what they look for (an upward import, a crossing between units of one floor, a circle)', () => {
    const sample = new Map<string, Imports>([
      ['errors.ts', { local: ['http/logger.ts'], packages: [] }],
      ['http/logger.ts', { local: [], packages: [] }],
      ['query/a.ts', { local: ['files/b.ts'], packages: [] }],
      ['files/b.ts', { local: ['files/c.ts'], packages: [] }],
      ['files/c.ts', { local: ['files/b.ts'], packages: [] }],
      ['stray.ts', { local: [], packages: [] }],
    ]);
    expect(findUpwardImports(sample)).toEqual([
      'errors.ts (base) -> http/logger.ts (http)',
      'query/a.ts (query) -> files/b.ts (files)',
      'stray.ts: on no floor (add it to FLOORS and to docs/contributing.md)',
    ]);
    expect(findCycles(sample)).toEqual([['files/b.ts', 'files/c.ts']]);
  });

  test('every module is on a floor and imports only from its own unit or a lower floor', () => {
    expect(graph.size).toBeGreaterThan(100);
    expect(findUpwardImports(graph)).toEqual([]);
  });

  test('no import circle, inside a folder or across folders', () => {
    expect(findCycles(graph)).toEqual([]);
  });

  test('the query compiler is pure: no database, server or file-system module', () => {
    const impure = [...graph].filter(([file]) => file.startsWith('query/')).flatMap(([file, { packages }]) => packages.filter((name) => QUERY_MAY_NOT_IMPORT.test(name)).map((name) => `${file} -> ${name}`));
    expect(impure).toEqual([]);
  });

  test('a file over 500 lines says why in its first line', () => {
    const long = [...graph.keys()].filter((file) => {
      const lines = readFileSync(path.join(LIB, file), 'utf8').replace(/\n$/, '').split('\n');
      return lines.length > 500 && !/^\/\/ Over 500 lines: \S/.test(lines[0]);
    });
    expect(long).toEqual([]);
  });
});
