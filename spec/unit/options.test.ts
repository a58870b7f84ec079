import { resolveOptions } from '../../lib/options.js';

const DAY = 24 * 60 * 60 * 1000;
const base = { collections: [{ name: 'notes', fields: [] }] };

describe('durations that become timers are bounded by the timer limit', () => {
  // Node fires a timer of more than 2^31-1 ms after 1 ms: a sweep every 30 days would run back to back.
  test.each([
    [{ fileSweep: { intervalMs: 30 * DAY } }, 'fileSweep.intervalMs must be at most 2147483647 milliseconds'],
    [{ batch: { timeoutMs: 30 * DAY } }, 'batch.timeoutMs must be at most 2147483647 milliseconds'],
    [{ limits: { statementTimeoutMs: 2 ** 31 } }, 'limits.statementTimeoutMs must be at most 2147483647 milliseconds'],
    [{ realtime: { heartbeatMs: 2 ** 31 } }, 'realtime.heartbeatMs must be at most 2147483647 milliseconds'],
  ])('%j throws', (options, message) => {
    expect(() => resolveOptions({ ...base, ...options }, {})).toThrow(message);
  });

  test('the longest timer is accepted; a file age is not a timer, so 30 days is a fair grace period', () => {
    const resolved = resolveOptions({ ...base, fileSweep: { intervalMs: 2 ** 31 - 1, minAgeMs: 30 * DAY }, batch: { timeoutMs: 2 ** 31 - 1 } }, {});
    expect(resolved.fileSweep).toEqual({ intervalMs: 2 ** 31 - 1, minAgeMs: 30 * DAY });
    expect(resolved.batch).toMatchObject({ timeoutMs: 2 ** 31 - 1 });
  });
});

describe('hooks are checked with the other options', () => {
  test.each([
    [{ nots: {} }, 'hooks: "nots" is not a declared collection (nor "*")'],
    [{ notes: { beforeCreat() {} } }, 'hooks.notes: unknown hook "beforeCreat"'],
    [{ '*': { afterDelete: 'audit' } }, 'hooks.*.afterDelete must be a function'],
    [[], 'hooks must be an object'],
  ])('%j throws', (hooks, message) => {
    expect(() => resolveOptions({ ...base, hooks: hooks as never }, {})).toThrow(message);
  });

  test('resolved: the hooks given, or none', () => {
    const hooks = { notes: { beforeCreate() {} }, '*': { afterDelete() {} } };
    expect(resolveOptions({ ...base, hooks }, {}).hooks).toBe(hooks);
    expect(resolveOptions(base, {}).hooks).toEqual({});
  });
});

describe('every option has its check', () => {
  test.each([
    [{ limits: 5 }, 'limits must be an object of limits'],
    [{ fileSweep: 'daily' }, 'fileSweep must be an object of settings or false'],
    [{ batch: null }, 'batch must be an object of limits or false'],
    [{ dataDir: 42 }, 'dataDir must be a string'],
    [{ logger: { error() {} } }, 'logger must be an object with error, warn and info functions'],
    [{ storage: 'disk' }, 'storage must be a Storage object'],
    [{ auth: { token: 'x' } }, 'auth must be a function'],
    [{ multipartUpdate: 'patch' }, 'multipartUpdate must be "replace" or "merge", got "patch"'],
    [{ fileTokenSecret: 'x'.repeat(31) }, 'fileTokenSecret must be a string of at least 32 characters'],
    [{ openapi: 'yes' }, 'openapi must be true or false'],
    [{ thumbnailWorkers: 2.5 }, 'thumbnailWorkers must be a positive integer'],
    // A setting of a group it does not belong to, misspelt, or of another version: never silently ignored.
    [{ limits: { statmentTimeoutMs: 1000 } }, 'limits.statmentTimeoutMs is not an option (limits takes '],
    [{ realtime: { subscriptionHeader: false } }, 'realtime.subscriptionHeader is not an option (realtime takes '],
    [{ batch: { maxRequest: 10 } }, 'batch.maxRequest is not an option'],
    [{ fileSweep: { interval: 1000 } }, 'fileSweep.interval is not an option'],
    [{ backups: { directory: '/x' } }, 'backups.directory is not an option'],
  ])('%j throws', (options, message) => {
    const resolve = () => resolveOptions({ ...base, ...(options as object) }, {});
    expect(resolve).toThrow(TypeError);
    expect(resolve).toThrow(message);
  });

  test('an environment size is read only when the option is absent, and a malformed one throws', () => {
    expect(resolveOptions(base, { SERVICE_MAX_FILE_SIZE: ' 100 ' }).limits.maxFileSize).toBe(100);
    expect(resolveOptions(base, { SERVICE_MAX_FILE_SIZE: '' }).limits.maxFileSize).toBe(5 * 1024 * 1024);
    expect(() => resolveOptions(base, { SERVICE_MAX_BODY_SIZE: '-1' })).toThrow('SERVICE_MAX_BODY_SIZE must be a positive number of bytes, got "-1"');
  });

  test('preparedStatements: true by default, the environment only when the option is absent, a malformed switch throws', () => {
    expect(resolveOptions(base, {}).preparedStatements).toBe(true);
    expect(resolveOptions(base, { RECORDBASE_PREPARED_STATEMENTS: 'false' }).preparedStatements).toBe(false);
    expect(resolveOptions(base, { RECORDBASE_PREPARED_STATEMENTS: ' 0 ' }).preparedStatements).toBe(false);
    expect(resolveOptions(base, { RECORDBASE_PREPARED_STATEMENTS: 'TRUE' }).preparedStatements).toBe(true);
    expect(resolveOptions(base, { RECORDBASE_PREPARED_STATEMENTS: '' }).preparedStatements).toBe(true);
    expect(resolveOptions({ ...base, preparedStatements: true }, { RECORDBASE_PREPARED_STATEMENTS: 'false' }).preparedStatements).toBe(true);
    expect(() => resolveOptions(base, { RECORDBASE_PREPARED_STATEMENTS: 'no' })).toThrow('RECORDBASE_PREPARED_STATEMENTS must be true or false, got "no"');
    expect(() => resolveOptions({ ...base, preparedStatements: 'false' as unknown as boolean }, {})).toThrow('preparedStatements must be true or false');
  });

  test('derived defaults: storage under dataDir, the upload spool beside it, the batch body from limits.maxBodySize', () => {
    const resolved = resolveOptions({ ...base, dataDir: '/srv/rb', limits: { maxBodySize: 2048 } }, {});
    expect(resolved.storage).toMatchObject({ root: '/srv/rb/storage' });
    expect(resolved.uploadTempDir).toBe('/srv/rb/uploads-tmp');
    expect(resolved.batch).toEqual({ maxRequests: 50, timeoutMs: 3000, maxBodySize: 2048 });
  });
});
