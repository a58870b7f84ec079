import { BadRequestError, ConflictError, UnavailableError, type RecordbaseError } from '../../errors.js';
import { QueueFullError, StatementInterruptedError } from './statement-interrupted-error.js';

/**
 * SQLSTATEs that mean "the database cannot serve us right now": the server shutting down or
 * starting, out of connections, or the connection broken (class 08; 08007: a transaction whose
 * outcome is unknown). Any other SQLSTATE is a statement the database refused, however its
 * message reads: never "unavailable" (but see POOLER_UNAVAILABLE).
 */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300', '53400', '08000', '08001', '08003', '08004', '08006', '08007']);
/**
 * PgBouncer's own errors, all under protocol_violation (08P01), which Postgres also gives a
 * statement it refuses (a bind message of too many parameters, the connection still fine): told
 * apart by PgBouncer's fixed messages, which begin the text (ours carry no statement text before
 * them). "server conn crashed?": the server connection under a client's transaction died.
 */
const PROTOCOL_VIOLATION = '08P01';
const POOLER_UNAVAILABLE = /^(server conn crashed\?|no more connections allowed|query_wait_timeout|pgbouncer cannot connect to server|server login has been failing)/;
/** query_canceled: a statement timeout (ours or the server's statement_timeout) or a cancel request. */
const QUERY_CANCELED = '57014';
/** Node socket errors seen when the server is down or the connection broke. */
const UNAVAILABLE_ERRNOS = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

interface DriverError {
  code?: unknown;
  errno?: unknown;
  name?: unknown;
  message?: unknown;
  constraint?: unknown;
}

/** A five-character SQLSTATE, as Postgres and PGlite report a statement's failure. */
function sqlState(err: DriverError): string | undefined {
  return typeof err.code === 'string' && /^[0-9A-Z]{5}$/.test(err.code) ? err.code : undefined;
}

/** True when the error says the database is unreachable (as opposed to a bad statement). */
export function isUnavailableError(err: unknown): boolean {
  if (!err || typeof err !== 'object') return false;
  const e = err as DriverError;
  // Socket errors first: EPIPE has the shape of a SQLSTATE.
  if (typeof e.code === 'string' && UNAVAILABLE_ERRNOS.has(e.code)) return true;
  const state = sqlState(e);
  if (state === PROTOCOL_VIOLATION) return typeof e.message === 'string' && POOLER_UNAVAILABLE.test(e.message);
  if (state !== undefined) return UNAVAILABLE_SQLSTATES.has(state);
  if (e.name === 'KnexTimeoutError') return true;
  // Without a SQLSTATE, the driver's own messages about the connection. (Knex prefixes the
  // statement to the message, so only errors without a SQLSTATE may be judged by their text.)
  const message = typeof e.message === 'string' ? e.message : '';
  return /Connection terminated|Client has encountered a connection error|connect ECONNREFUSED|Connection ended|the embedded database (worker|could not open|is closed)|in-memory embedded database|PGlite is closed/i.test(message);
}

const UNAVAILABLE_MESSAGE = 'The database is unavailable. Try again later.';

/** The client's error for a statement recordbase stopped or never started (statement-bounds.ts). */
function translateInterruption(err: StatementInterruptedError): RecordbaseError {
  switch (err.reason) {
    case 'timeout':
      return statementTimeout(err, `${err.limitMs} ms, limits.statementTimeoutMs`);
    case 'busy':
      return new UnavailableError(
        `The database is busy: no connection became free within ${err.limitMs} ms (limits.acquireTimeoutMs). Try again later.`,
        'database_busy',
        err,
      );
    case 'queue_full':
      return new UnavailableError(err instanceof QueueFullError ? err.clientMessage : 'The database is busy. Try again later.', 'database_busy', err);
    case 'aborted':
      return new BadRequestError('The request was abandoned by its client before it finished.', 'request_aborted', err);
    case 'unresponsive':
      return new UnavailableError(UNAVAILABLE_MESSAGE, 'database_unavailable', err);
  }
}

function statementTimeout(cause: unknown, limit: string): BadRequestError {
  return new BadRequestError(
    `The request needed a database statement that ran longer than the statement timeout (${limit}) and was cancelled. ` +
      'Narrow the filter, sort or expand, or ask for fewer records.',
    'statement_timeout',
    cause,
  );
}

/** The index (constraint) name of a unique violation, or undefined for any other error. */
export function uniqueViolationConstraint(err: unknown): string | undefined {
  if (!err || typeof err !== 'object') return undefined;
  const e = err as DriverError;
  if (e.code !== '23505') return undefined;
  if (typeof e.constraint === 'string') return e.constraint;
  const match = typeof e.message === 'string' ? /unique constraint "([^"]+)"/.exec(e.message) : null;
  return match?.[1] ?? '';
}

/**
 * Postgres text and jsonb cannot hold U+0000: a value carrying one fails with 22021 (text) or
 * 22P05 (jsonb escape). That is the client's input, wherever it came in (filter, body, query).
 */
const NUL_IN_TEXT_SQLSTATES = new Set(['22021', '22P05']);

/**
 * invalid_sql_statement_name ("prepared statement ... does not exist") and
 * duplicate_prepared_statement ("... already exists"): what a pooler in transaction mode answers
 * when one of recordbase's named statements (run-statement.ts's `preparedName`, always `rb_...`)
 * was prepared on another server connection than the one the statement reached now.
 */
const PREPARED_STATEMENT_SQLSTATES = new Set(['26000', '42P05']);
const OUR_PREPARED_STATEMENT = /prepared statement "rb_[0-9a-f]+"/;

/** The client's (and, as a 503, the logger's) error for a named statement a pooler lost: it names the fix. */
function preparedStatementLost(cause: unknown): UnavailableError {
  return new UnavailableError(
    'The database connection lost a prepared statement: a pooler in transaction mode (PgBouncer before 1.21 or without ' +
      "max_prepared_statements, Supavisor's or Neon's pooled URL) does not keep them. Give createRecordsRouter " +
      '`preparedStatements: false` (or set RECORDBASE_PREPARED_STATEMENTS=false), or connect in session mode.',
    'prepared_statement_lost',
    cause,
  );
}

/**
 * Maps a driver error that has a client-facing meaning to our error; anything else is returned
 * unchanged for the caller (and finally the error middleware, as a generic 500).
 */
export function translateDatabaseError(err: unknown): unknown {
  if (err instanceof StatementInterruptedError) return translateInterruption(err);
  if (isUnavailableError(err)) return new UnavailableError(UNAVAILABLE_MESSAGE, 'database_unavailable', err);
  const code = err && typeof err === 'object' ? sqlState(err as DriverError) : undefined;
  if (code === '40P01' || code === '40001') {
    return new ConflictError('The write conflicted with a concurrent one (a deadlock or serialization failure) and was undone; try again.', 'write_conflict', err);
  }
  if (code !== undefined && NUL_IN_TEXT_SQLSTATES.has(code)) {
    return new BadRequestError('Text values cannot contain NUL (U+0000) characters.', 'invalid_character', err);
  }
  if (code !== undefined && PREPARED_STATEMENT_SQLSTATES.has(code) && OUR_PREPARED_STATEMENT.test(String((err as DriverError).message))) return preparedStatementLost(err);
  // The server's own statement_timeout (set by the host on its connections) fired first.
  if (code === QUERY_CANCELED && /statement timeout/i.test(String((err as DriverError).message))) return statementTimeout(err, "the database's statement_timeout");
  return err;
}
