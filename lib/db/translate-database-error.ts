import { BadRequestError, ConflictError, UnavailableError } from '../errors.js';

/** SQLSTATE classes and codes that mean "the database cannot serve us right now". */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300', '53400', '08000', '08001', '08003', '08004', '08006', '08P01']);
/** Node socket errors seen when the server is down or the connection broke. */
const UNAVAILABLE_ERRNOS = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

interface DriverError {
  code?: unknown;
  errno?: unknown;
  name?: unknown;
  message?: unknown;
  constraint?: unknown;
}

/** True when the error says the database is unreachable (as opposed to a bad statement). */
export function isUnavailableError(err: unknown): boolean {
  if (!err || typeof err !== 'object') return false;
  const e = err as DriverError;
  if (typeof e.code === 'string' && (UNAVAILABLE_SQLSTATES.has(e.code) || UNAVAILABLE_ERRNOS.has(e.code))) return true;
  if (e.name === 'KnexTimeoutError') return true;
  const message = typeof e.message === 'string' ? e.message : '';
  return /Connection terminated|Client has encountered a connection error|connect ECONNREFUSED|Connection ended|terminating connection|the database system is (starting up|shutting down)|PGlite is closed/i.test(message);
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
 * Maps a driver error that has a client-facing meaning to our error; anything else is returned
 * unchanged for the caller (and finally the error middleware, as a generic 500).
 */
export function translateDatabaseError(err: unknown): unknown {
  if (isUnavailableError(err)) return new UnavailableError('The database is unavailable. Try again later.', 'database_unavailable', err);
  const code = err && typeof err === 'object' ? (err as DriverError).code : undefined;
  if (code === '40P01' || code === '40001') {
    return new ConflictError('The write conflicted with a concurrent one (a deadlock or serialization failure) and was undone; try again.', 'write_conflict', err);
  }
  if (typeof code === 'string' && NUL_IN_TEXT_SQLSTATES.has(code)) {
    return new BadRequestError('Text values cannot contain NUL (U+0000) characters.', 'invalid_character', err);
  }
  return err;
}
