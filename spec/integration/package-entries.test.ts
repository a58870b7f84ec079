import { beforeAll, describe, expect, test } from '@jest/globals';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { ensureBuilt } from '../support/built-package.js';

const run = promisify(execFile);

/**
 * Module hooks that make every `@aws-sdk/*` package unresolvable, as on a host that did not
 * install the optional peer dependencies.
 */
const BLOCK_AWS_HOOKS = `
export async function resolve(specifier, context, next) {
  if (specifier.startsWith('@aws-sdk/')) {
    const error = new Error('Cannot find package ' + specifier + ' (blocked by the test)');
    error.code = 'ERR_MODULE_NOT_FOUND';
    throw error;
  }
  return next(specifier, context);
}`;

/** Imports the package's entries by name (the package refers to itself through its `exports`) with the AWS SDK blocked. */
const PROBE = `
import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(BLOCK_AWS_HOOKS)}));
const main = await import('recordbase');
const contract = await import('recordbase/storage-contract');
const jwt = await import('recordbase/jwt');
const outcome = { main: Object.keys(main).sort(), contract: Object.keys(contract).sort(), jwt: Object.keys(jwt).sort() };
try {
  await import('recordbase/s3');
  outcome.s3 = 'loaded';
} catch (error) {
  outcome.s3 = error.code + ': ' + error.message;
}
process.stdout.write(JSON.stringify(outcome));
`;

describe('package entries', () => {
  let root: string;

  beforeAll(async () => {
    root = await ensureBuilt();
  }, 120_000);

  test('recordbase, recordbase/jwt and recordbase/storage-contract load without the AWS SDK; recordbase/s3 needs it', async () => {
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', PROBE], { cwd: root });
    const outcome = JSON.parse(stdout) as { main: string[]; contract: string[]; jwt: string[]; s3: string };
    expect(outcome.main).toEqual(expect.arrayContaining(['createRecordsRouter', 'diskStorage', 'assertStorageKey']));
    expect(outcome.main).not.toContain('s3Storage');
    expect(outcome.jwt).toEqual(['jwtAuth']);
    expect(outcome.contract).toEqual(expect.arrayContaining(['describeStorageContract', 'UNSAFE_KEYS', 'readAll', 'collectList']));
    // The block is real: the S3 entry, which does import the SDK, fails under it.
    expect(outcome.s3).toMatch(/^ERR_MODULE_NOT_FOUND: Cannot find package @aws-sdk\/client-s3/);
  }, 60_000);

  test('recordbase/s3 loads with the SDK installed and builds a storage', async () => {
    const probe = `
      import { s3Storage } from 'recordbase/s3';
      const storage = s3Storage({ bucket: 'b', client: { endpoint: 'http://127.0.0.1:9', forcePathStyle: true, credentials: { accessKeyId: 'a', secretAccessKey: 'b' } } });
      process.stdout.write(JSON.stringify({ methods: ['write', 'read', 'stat', 'delete', 'deletePrefix', 'list'].filter((m) => typeof storage[m] === 'function'), bucket: storage.bucket }));
      storage.client.destroy();`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', probe], { cwd: root });
    expect(JSON.parse(stdout)).toEqual({ methods: ['write', 'read', 'stat', 'delete', 'deletePrefix', 'list'], bucket: 'b' });
  }, 60_000);
});
