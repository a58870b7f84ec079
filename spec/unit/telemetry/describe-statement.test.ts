import { describeStatement } from '../../../lib/telemetry/trace-statement.js';
import { linkToTraceparent } from '../../../lib/telemetry/start-span.js';
import { templateOfRoute } from '../../../lib/telemetry/trace-request.js';

/** What a statement's span says of it: only the operation and a table the text names, never anything after them. */
describe('describeStatement', () => {
  test.each([
    ['SELECT "posts".* FROM "posts" WHERE "title" = ? LIMIT ?', { operation: 'SELECT', table: 'posts' }],
    ['select count(*) from posts', { operation: 'SELECT', table: 'posts' }],
    ['INSERT INTO "posts" ("id", "title") VALUES (?, ?) RETURNING *', { operation: 'INSERT', table: 'posts' }],
    ['UPDATE "public"."posts" SET "title" = ? WHERE "id" = ?', { operation: 'UPDATE', table: 'public.posts' }],
    ['DELETE FROM "posts" WHERE "id" = ? RETURNING "id"', { operation: 'DELETE', table: 'posts' }],
    ['WITH x AS (SELECT 1) SELECT * FROM x', { operation: 'WITH' }],
    ['BEGIN; SET LOCAL statement_timeout = 5500', { operation: 'BEGIN' }],
    ['COMMIT;', { operation: 'COMMIT' }],
    ['  \n', { operation: 'SQL' }],
  ])('%s', (sql, expected) => {
    expect(describeStatement(sql)).toEqual(expected);
  });
});

describe('linkToTraceparent', () => {
  test('a W3C traceparent is a link to its span', () => {
    expect(linkToTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')).toEqual({
      context: { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: 1, isRemote: true },
    });
  });
  test.each([null, undefined, '', '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', '00-00000000000000000000000000000000-00f067aa0ba902b7-01', "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'; DROP"])('%p is none', (value) => {
    expect(linkToTraceparent(value)).toBeUndefined();
  });
});

describe('templateOfRoute', () => {
  test('writes parameters as OpenTelemetry does', () => {
    expect(templateOfRoute('/api/files/:collection/:recordId/:filename')).toBe('/api/files/{collection}/{recordId}/{filename}');
    expect(templateOfRoute('/api/health')).toBe('/api/health');
  });
});
