import { BadRequestError, UnavailableError } from '../../../../lib/errors.js';
import { QueueFullError, StatementInterruptedError } from '../../../../lib/db/statements/statement-interrupted-error.js';
import { isUnavailableError, translateDatabaseError } from '../../../../lib/db/statements/translate-database-error.js';

/** A driver error as Knex hands it over: its message prefixed with the statement (bindings inlined). */
function driverError(code: string | undefined, message: string): Error {
  return Object.assign(new Error(message), code === undefined ? {} : { code });
}

describe('translateDatabaseError', () => {
  test.each([
    ['a statement error (bind message of 70,000 parameters, protocol violation)', driverError('08P01', 'bind message has 4464 parameter formats but 0 parameters')],
    ['a statement error whose text mentions a lost connection', driverError('42P01', "select * from x where name = 'Connection terminated unexpectedly' - relation \"x\" does not exist")],
    ['a statement error naming the embedded worker in a value', driverError('22P02', "select 'the embedded database worker exited' - invalid input syntax")],
    ['a check violation', driverError('23514', 'new row violates check constraint')],
  ])('%s is never "database unavailable"', (_, error) => {
    expect(isUnavailableError(error)).toBe(false);
    expect(translateDatabaseError(error)).toBe(error);
  });

  test.each([
    ['a refused connection', driverError('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432')],
    ['a broken pipe (EPIPE has the shape of a SQLSTATE)', driverError('EPIPE', 'write EPIPE')],
    ['a server shutting down', driverError('57P01', 'terminating connection due to administrator command')],
    ['too many connections', driverError('53300', 'sorry, too many clients already')],
    ["PgBouncer's server connection lost under a transaction (08P01)", driverError('08P01', 'server conn crashed?')],
    ['a connection lost without a code', driverError(undefined, 'select 1 - Connection terminated unexpectedly')],
    ['an embedded worker gone', driverError(undefined, 'the embedded database worker exited (code 1)')],
    ['a statement that outlived its cancel', new StatementInterruptedError('unresponsive')],
  ])('%s is 503 database_unavailable', (_, error) => {
    const translated = translateDatabaseError(error);
    expect(translated).toBeInstanceOf(UnavailableError);
    expect(translated).toMatchObject({ status: 503, code: 'database_unavailable', message: 'The database is unavailable. Try again later.' });
  });

  test.each([
    ['does not exist (26000)', driverError('26000', 'prepared statement "rb_0123456789abcdef0123" does not exist')],
    ['already exists (42P05)', driverError('42P05', 'prepared statement "rb_0123456789abcdef0123" already exists')],
  ])('a named statement of ours a pooler lost (%s) is a 503 naming preparedStatements: false', (_, error) => {
    const translated = translateDatabaseError(error);
    expect(translated).toBeInstanceOf(UnavailableError);
    expect(translated).toMatchObject({ status: 503, code: 'prepared_statement_lost', cause: error });
    expect((translated as Error).message).toContain('`preparedStatements: false`');
  });

  test("a host's own prepared statement (another name) is left as it is", () => {
    const error = driverError('26000', 'prepared statement "mine" does not exist');
    expect(translateDatabaseError(error)).toBe(error);
  });

  test('a statement over the timeout is a 400 naming the limit and its option', () => {
    const translated = translateDatabaseError(new StatementInterruptedError('timeout', 1500));
    expect(translated).toBeInstanceOf(BadRequestError);
    expect(translated).toMatchObject({ status: 400, code: 'statement_timeout' });
    expect((translated as Error).message).toContain('statement timeout (1500 ms, limits.statementTimeoutMs)');
  });

  test("the server's own statement_timeout is the same 400; another cancel is not", () => {
    expect(translateDatabaseError(driverError('57014', 'select 1 - canceling statement due to statement timeout'))).toMatchObject({ status: 400, code: 'statement_timeout' });
    const byUser = driverError('57014', 'select 1 - canceling statement due to user request');
    expect(translateDatabaseError(byUser)).toBe(byUser);
  });

  test('no free connection within the acquire timeout is a 503 naming the limit', () => {
    const translated = translateDatabaseError(new StatementInterruptedError('busy', 3000));
    expect(translated).toMatchObject({ status: 503, code: 'database_busy' });
    expect((translated as Error).message).toContain('3000 ms (limits.acquireTimeoutMs)');
  });

  test("a unit refused at the fair gate is a 503 database_busy naming the queue's bound, even once Knex has prefixed its message", () => {
    const refused = new QueueFullError({ refused: 'client', limit: 32 });
    refused.message = `select 1 - ${refused.message}`;
    expect(translateDatabaseError(refused)).toMatchObject({
      status: 503,
      code: 'database_busy',
      message: 'The database is busy: 32 requests from this client already wait for a connection (limits.maxWaitingPerClient). Try again later.',
    });
    expect(translateDatabaseError(new QueueFullError({ refused: 'all', limit: 1000 }))).toMatchObject({
      status: 503,
      code: 'database_busy',
      message: 'The database is busy: 1000 requests already wait for a connection. Try again later.',
    });
    expect(refused.sent).toBe(false);
  });

  test('a request its client abandoned', () => {
    expect(translateDatabaseError(new StatementInterruptedError('aborted'))).toMatchObject({ status: 400, code: 'request_aborted' });
  });
});
