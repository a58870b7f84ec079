import { readFileSync } from 'node:fs';
import { ERROR_CODES, FIELD_ERROR_CODES } from '../../lib/errors.js';
import * as exported from '../../lib/index.js';

/** The rows of one markdown section's table whose first cell is a code in backticks. */
function tableRows(page: string, heading: string): string[][] {
  const start = page.indexOf(`## ${heading}`);
  expect(start).toBeGreaterThanOrEqual(0);
  const end = page.indexOf('\n## ', start + 1);
  return page
    .slice(start, end === -1 ? undefined : end)
    .split('\n')
    .filter((line) => /^\| `[a-z_]+` \|/.test(line))
    .map((line) => line.split('|').slice(1, -1).map((cell) => cell.trim()));
}

const page = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');

describe('docs/errors.md and the code agree', () => {
  const rows = tableRows(page, 'Error codes');
  const documented = new Map(rows.map(([code, status, className]) => [code!.replace(/`/g, ''), { status: Number(status), className: className!.replace(/`/g, '') }]));

  test('every code in ERROR_CODES is documented once, with its status', () => {
    expect(rows.length).toBe(documented.size);
    for (const [code, entry] of Object.entries(ERROR_CODES)) {
      expect({ code, status: documented.get(code)?.status }).toEqual({ code, status: entry.status });
    }
  });

  test('every documented code exists', () => {
    expect([...documented.keys()].sort()).toEqual(Object.keys(ERROR_CODES).sort());
  });

  test('every class a row names is exported, and an instance of it carries that code and status', () => {
    for (const [code, { status, className }] of documented) {
      const ErrorClass = (exported as Record<string, unknown>)[className];
      expect({ className, exported: typeof ErrorClass }).toEqual({ className, exported: 'function' });
      const instance = constructFor(className, code);
      expect({ code, status: instance.status, name: instance.name }).toEqual({ code, status, name: className });
    }
  });

  test('every field code of a 422 is documented, and every documented one exists', () => {
    const fieldCodes = tableRows(page, 'Validation codes (422)').map(([code]) => code!.replace(/`/g, ''));
    expect([...fieldCodes].sort()).toEqual([...FIELD_ERROR_CODES].sort());
  });
});

/** Builds an error of the named class for `code`, the way the library does. */
function constructFor(className: string, code: string): { status: number; code: string; name: string } {
  const e = exported as unknown as Record<string, new (...args: unknown[]) => { status: number; code: string; name: string }>;
  switch (className) {
    case 'ValidationError':
      return new e.ValidationError!({});
    case 'InternalError':
      return new e.InternalError!();
    case 'StorageNotFoundError':
      return new e.StorageNotFoundError!('k');
    case 'InvalidStorageKeyError':
      return new e.InvalidStorageKeyError!('k', 'reason');
    case 'BatchError':
      return new e.BatchError!({ code });
    case 'RangeNotSatisfiableError':
      return new e.RangeNotSatisfiableError!();
    default:
      return new e[className]!('message', code);
  }
}
