import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runNode } from '../support/node-process.js';

/**
 * The README's claims about Node's EventSource (issue 45, point 2: it said Node 22 and later have
 * one, which Node 24.21 has not), checked on the Node this suite runs on: CI runs it on Node 20
 * and again on Node 24 (.ci/run), so each claim is tested on each version CI runs. A child `node`
 * process is asked, as a user's script would be, with and without `--experimental-eventsource`.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

/** What the README says of each Node major CI runs: `typeof EventSource` plain, and with the flag ('refused': Node does not know the flag). */
const CLAIMS: Record<string, { plain: string; flag: string }> = {
  '20': { plain: 'undefined', flag: 'function' },
  '24': { plain: 'undefined', flag: 'function' },
};

async function typeofEventSource(flags: string[]): Promise<string> {
  const { code, stdout, stderr } = await runNode([...flags, '-e', 'process.stdout.write(typeof EventSource)'], { cwd: ROOT, timeoutMs: 30_000 });
  if (code === 0) return stdout;
  return /bad option|unknown|not allowed/i.test(stderr) ? 'refused' : `failed: ${stderr}`;
}

describe(`the README's EventSource claims on Node ${process.versions.node}`, () => {
  const major = process.versions.node.split('.')[0]!;

  test('the README says what this test checks: none without the flag on Node 20, 22 and 24, the flag, eventsource@4 as the fix', () => {
    expect(README).toContain('Node 20, 22 and 24 have no global `EventSource`');
    expect(README).toContain('`typeof EventSource` is `"undefined"`');
    expect(README).toMatch(/`node --experimental-eventsource` \(an experimental flag of Node 22\.3 and later and of recent\s+Node 20 releases\)/);
    expect(README).toMatch(/install\s+`eventsource@4`/);
    expect(README).not.toMatch(/Node 22 and later have one/);
  });

  test('a child node process on this version answers as the README says', async () => {
    const claim = CLAIMS[major];
    if (claim === undefined) throw new Error(`CI runs Node ${major}, of which the README's EventSource paragraph says nothing: check it there and add it to CLAIMS`);
    expect({ major, plain: await typeofEventSource([]), flag: await typeofEventSource(['--experimental-eventsource']) }).toEqual({ major, ...claim });
  });

  test('the README\'s fix is the eventsource package of major version 4, which exports EventSource on this Node', async () => {
    const manifest = JSON.parse(readFileSync(join(ROOT, 'node_modules', 'eventsource', 'package.json'), 'utf8')) as { version: string };
    expect(manifest.version).toMatch(/^4\./);
    const { EventSource } = (await import('eventsource')) as { EventSource: unknown };
    expect(typeof EventSource).toBe('function');
  });
});

describe('the README\'s test commands', () => {
  test('a bare `npx jest <file>` (jest without --experimental-vm-modules) stops at once saying to run `npm test -- <file>`', async () => {
    const run = await runNode([join(ROOT, 'node_modules/jest/bin/jest.js'), 'spec/unit/memoize-per-object.test.ts'], { cwd: ROOT, env: { NODE_OPTIONS: '' }, timeoutMs: 60_000 });
    const outcome = { code: run.code, output: run.stdout + run.stderr };
    expect(outcome.code).not.toBe(0);
    expect(outcome.output).toContain('run `npm test -- <file>`');
    expect(outcome.output).not.toContain('Cannot use import statement outside a module');
    expect(README).toContain('npm test -- spec/integration/records-crud.test.ts');
  }, 60_000);
});
