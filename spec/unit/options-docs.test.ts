import { readFileSync } from 'node:fs';
import os from 'node:os';
import knexFactory from 'knex';
import { DEFAULT_STATEMENT_TIMEOUT_MS, EMBEDDED_STATEMENT_TIMEOUT_MS } from '../../lib/db/statements/statement-bounds.js';
import { OPTION_TABLE, resolveOptions, type OptionContext, type OptionEntry } from '../../lib/options.js';
import { DEFAULT_PER_PAGE } from '../../lib/query/default-per-page.js';

/**
 * docs/limits.md and the option tables of docs/configuration.md quote the defaults of
 * lib/options.ts's table; this holds them equal, as spec/unit/errors.test.ts does for codes.
 */

const read = (name: string) => readFileSync(new URL(`../../docs/${name}`, import.meta.url), 'utf8');

/** Every entry of the table by its path (`limits.maxPerPage`, `thumbnailWorkers`). */
const ENTRIES = new Map<string, OptionEntry<unknown>>([
  ...Object.entries(OPTION_TABLE.options).map(([key, entry]): [string, OptionEntry<unknown>] => [key, entry as OptionEntry<unknown>]),
  ...Object.entries(OPTION_TABLE.groups).flatMap(([group, { entries }]) =>
    Object.entries(entries).map(([key, entry]): [string, OptionEntry<unknown>] => [`${group}.${key}`, entry as OptionEntry<unknown>]),
  ),
]);

const UNITS: Record<string, number> = { MiB: 1024 * 1024, ms: 1, s: 1000, minutes: 60_000, hours: 3_600_000 };

/** The quantities a default cell states, in bytes or milliseconds: "5 s; 250 ms on ..." is [5000, 250]. */
function readQuantities(cell: string): number[] {
  return [...cell.matchAll(/(\d[\d,]*)(?:\s*(MiB|ms|s|minutes|hours)\b)?/g)].map(([, digits, unit]) => Number(digits!.replace(/,/g, '')) * (unit ? UNITS[unit]! : 1));
}

/** The rows of every markdown table under each `##` heading, as cells keyed by the header's names. */
function readTables(markdown: string): { heading: string; row: Record<string, string> }[] {
  const rows: { heading: string; row: Record<string, string> }[] = [];
  let heading = '';
  let header: string[] | undefined;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('## ')) heading = line.slice(3).trim();
    if (!line.startsWith('|')) {
      header = undefined;
      continue;
    }
    const cells = line.split('|').slice(1, -1).map((cell) => cell.trim());
    if (header === undefined) header = cells;
    else if (!cells.every((cell) => /^-+$/.test(cell))) rows.push({ heading, row: Object.fromEntries(header.map((name, i) => [name, cells[i] ?? ''])) });
  }
  return rows;
}

/** What the table says a default is, for an entry whose default depends on nothing given. */
function tableDefault(path: string): unknown {
  const entry = ENTRIES.get(path)!;
  const resolved = resolveOptions({ collections: [] }, {});
  return entry.derive ? entry.derive({ given: { collections: [] }, resolved }) : entry.default;
}

/** Documented defaults that are not one constant, each with how the table must agree. */
const DERIVED: Record<string, (cell: string) => Promise<void> | void> = {
  // limits.md also gives the page size of a list that names none: "30 when absent, at most 1000".
  'limits.maxPerPage': (cell) => {
    const cap = ENTRIES.get('limits.maxPerPage')!.default;
    expect(readQuantities(cell)).toEqual(cell.includes('when absent') ? [DEFAULT_PER_PAGE, cap] : [cap]);
  },
  'limits.statementTimeoutMs': async (cell) => {
    const postgres = knexFactory({ client: 'pg', connection: 'postgres://nobody@127.0.0.1:1/none', pool: { min: 0, max: 1 } });
    try {
      const entry = ENTRIES.get('limits.statementTimeoutMs')!;
      const derive = (given: OptionContext['given']) => entry.derive!({ given, resolved: {} });
      expect([derive({ collections: [], database: postgres }), derive({ collections: [] })]).toEqual([DEFAULT_STATEMENT_TIMEOUT_MS, EMBEDDED_STATEMENT_TIMEOUT_MS]);
      expect(readQuantities(cell)).toEqual([DEFAULT_STATEMENT_TIMEOUT_MS, EMBEDDED_STATEMENT_TIMEOUT_MS]);
    } finally {
      await postgres.destroy();
    }
  },
  // Absent, the pool decides (half its max): the table has no default.
  'limits.maxConnectionsPerClient': (cell) => {
    expect(cell).toMatch(/^half the pool's `max`, at least 1/);
    expect(ENTRIES.get('limits.maxConnectionsPerClient')).not.toHaveProperty('default');
    expect(ENTRIES.get('limits.maxConnectionsPerClient')).not.toHaveProperty('derive');
  },
  // 500 ms, or the statement timeout when lower (the embedded engine on disk: 250 ms).
  'realtime.checkTimeoutMs': (cell) => {
    expect(readQuantities(cell)).toEqual([500, EMBEDDED_STATEMENT_TIMEOUT_MS]);
    expect(resolveOptions({ collections: [], limits: { statementTimeoutMs: 5_000 } }, {}).realtime).toMatchObject({ checkTimeoutMs: 500 });
    expect(resolveOptions({ collections: [], limits: { statementTimeoutMs: 100 } }, {}).realtime).toMatchObject({ checkTimeoutMs: 100 });
  },
  // Absent, the listener connects with the Knex's own settings: the table has no default.
  'realtime.listen': (cell) => {
    expect(cell).toMatch(/^the Knex's own connection/);
    expect(ENTRIES.get('realtime.listen')).not.toHaveProperty('default');
    expect(ENTRIES.get('realtime.listen')).not.toHaveProperty('derive');
  },
  // No rules and no exclusions: empty lists, made afresh for each router.
  'rateLimits.rules': (cell) => {
    expect(cell).toBe('none');
    expect(tableDefault('rateLimits.rules')).toEqual([]);
  },
  'rateLimits.excludedIps': (cell) => {
    expect(cell).toBe('none');
    expect(tableDefault('rateLimits.excludedIps')).toEqual([]);
  },
  'batch.maxBodySize': (cell) => {
    expect(cell).toContain('limits.maxBodySize');
    expect(resolveOptions({ collections: [], limits: { maxBodySize: 1234 } }, {}).batch).toMatchObject({ maxBodySize: 1234 });
  },
  'thumbnailWorkers': (cell) => {
    expect(cell).toMatch(/cores?, at most 4$/);
    expect(tableDefault('thumbnailWorkers')).toBe(Math.min(os.availableParallelism(), 4));
  },
};

/** Checks one documented default of the options at `paths` (several: one quantity each, in order). */
async function expectDocumentedDefault(paths: string[], cell: string): Promise<void> {
  if (paths.length === 1 && DERIVED[paths[0]!]) return DERIVED[paths[0]!]!(cell);
  const only = paths.length === 1 ? ENTRIES.get(paths[0]!) : undefined;
  // A switch, not a quantity: the cell is its default as code writes it.
  if (typeof only?.default === 'boolean') {
    expect({ paths, cell }).toEqual({ paths, cell: `\`${only.default}\`` });
    return;
  }
  for (const path of paths) expect({ path, derived: ENTRIES.get(path)!.derive !== undefined }).toEqual({ path, derived: false });
  expect({ paths, cell: readQuantities(cell) }).toEqual({ paths, cell: paths.map((path) => ENTRIES.get(path)!.default) });
}

describe('docs/limits.md', () => {
  // Each row whose option column names options of the table, with those options' paths.
  const rows = readTables(read('limits.md'))
    .filter(({ row }) => row.option !== undefined)
    .map(({ row }) => ({ row, paths: [...row.option!.matchAll(/`([\w.]+)`/g)].map(([, path]) => path!).filter((path) => ENTRIES.has(path)) }))
    .filter(({ paths }) => paths.length > 0);

  test('every default it gives for an option is the table\'s, and every environment variable it names is the option\'s', async () => {
    expect(rows.length).toBeGreaterThan(20);
    for (const { row, paths } of rows) {
      await expectDocumentedDefault(paths, row.default!);
      for (const [, name] of row.option!.matchAll(/env `(\w+)`/g)) expect({ paths, env: ENTRIES.get(paths[0]!)!.env }).toEqual({ paths, env: name });
    }
  });

  test('the other way round: every limit, batch and realtime bound of the table is on the page', () => {
    const documented = new Set(rows.flatMap(({ paths }) => paths));
    // The two heartbeats are intervals, a switch and a connection (realtime.listen) are no bounds: configuration.md has them.
    const isSwitch = (path: string) => typeof ENTRIES.get(path)!.default === 'boolean';
    const bounds = [...ENTRIES.keys()].filter((path) => /^(limits|batch)\./.test(path) || (path.startsWith('realtime.') && !/heartbeat/i.test(path) && !isSwitch(path) && path !== 'realtime.listen'));
    expect(bounds.filter((path) => !documented.has(path))).toEqual([]);
    expect(documented.has('thumbnailWorkers')).toBe(true);
  });
});

describe('docs/configuration.md', () => {
  const sections: Record<string, string> = { '`limits`': 'limits', '`realtime`': 'realtime', '`fileSweep`': 'fileSweep', '`rateLimits`': 'rateLimits' };
  const rows = readTables(read('configuration.md')).filter(({ heading }) => sections[heading] !== undefined);

  test.each(Object.values(sections))('the table of %s lists every setting of the group, with the table\'s default', async (group) => {
    const listed: string[] = [];
    for (const { heading, row } of rows.filter((r) => sections[r.heading] === group)) {
      const name = Object.values(row)[0]!.replace(/`/g, '');
      const path = `${sections[heading]}.${name}`;
      expect({ path, known: ENTRIES.has(path) }).toEqual({ path, known: true });
      listed.push(path);
      await expectDocumentedDefault([path], row.default!);
      if (row['environment variable']) expect(row['environment variable']).toContain(ENTRIES.get(path)!.env!);
    }
    expect(listed.sort()).toEqual([...ENTRIES.keys()].filter((path) => path.startsWith(`${group}.`)).sort());
  });

  test('the batch defaults quoted in its prose are the table\'s', () => {
    const prose = /`\{ maxRequests: (\d+), timeoutMs: (\d+), maxBodySize: limits\.maxBodySize \}` by default/.exec(read('configuration.md'));
    expect(prose?.slice(1).map(Number)).toEqual([ENTRIES.get('batch.maxRequests')!.default, ENTRIES.get('batch.timeoutMs')!.default]);
  });
});
