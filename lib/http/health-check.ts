import type { Response } from 'express';
import type { Knex } from 'knex';
import { checkDatabaseAnswers } from '../db/statements/check-database-answers.js';
import type { DatabaseContext } from '../db/statements/database-context.js';
import { UnavailableError, type RecordbaseError } from '../errors.js';
import type { Logger } from '../logger.js';

/** How long an answer of the database serves every probe: a probe flood costs one statement a second. */
const HEALTH_CHECK_MAX_AGE_MS = 1000;
/** Longest one check may take (a connection, then `SELECT 1`); past it the database does not answer. */
const HEALTH_CHECK_TIMEOUT_MS = 1000;

/** The fair gate's key of the checks: they never queue behind one client's requests. */
const HEALTH_CLIENT = 'recordbase:health';

/**
 * Whether the database answers, as `GET /api/health` reports it (docs/deployment.md, "Rolling
 * restarts: readiness and drain"). A check is one `SELECT 1` on recordbase's own send path,
 * bounded by HEALTH_CHECK_TIMEOUT_MS; its answer serves every probe for HEALTH_CHECK_MAX_AGE_MS,
 * and probes that arrive while a check runs share it. The change of state is logged, once each
 * way, never per probe.
 */
export class DatabaseHealth {
  private answeredAt = -Infinity;
  private healthy = true;
  private running: Promise<boolean> | undefined;
  private readonly context: DatabaseContext;

  constructor(private readonly options: { database: Knex; logger: Logger; limits: { statementTimeoutMs: number; acquireTimeoutMs: number } }) {
    this.context = {
      statementTimeoutMs: Math.min(HEALTH_CHECK_TIMEOUT_MS, options.limits.statementTimeoutMs),
      acquireTimeoutMs: Math.min(HEALTH_CHECK_TIMEOUT_MS, options.limits.acquireTimeoutMs),
      client: HEALTH_CLIENT,
    };
  }

  /** Whether the database answered its latest check: at once while that is fresh, else after the (shared) next one. */
  answers(): boolean | Promise<boolean> {
    if (performance.now() - this.answeredAt < HEALTH_CHECK_MAX_AGE_MS) return this.healthy;
    return (this.running ??= this.check().finally(() => (this.running = undefined)));
  }

  private async check(): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${HEALTH_CHECK_TIMEOUT_MS} ms`)), HEALTH_CHECK_TIMEOUT_MS);
    });
    let healthy = true;
    let cause: unknown;
    try {
      await Promise.race([checkDatabaseAnswers(this.options.database, this.context), late]);
    } catch (err) {
      healthy = false;
      cause = err;
    } finally {
      clearTimeout(timer);
    }
    if (healthy !== this.healthy) {
      if (healthy) this.options.logger.info('health: the database answers again');
      else this.options.logger.warn(`health: the database does not answer (${cause instanceof Error ? cause.message : String(cause)}); GET /api/health answers 503`);
    }
    this.healthy = healthy;
    this.answeredAt = performance.now();
    return healthy;
  }
}

/** The 503 of a health check whose database did not answer. */
export function describeUnhealthy(): UnavailableError {
  return new UnavailableError('API is not healthy: the database does not answer.', 'database_unavailable');
}

/**
 * Sends the health check's answer in PocketBase's shape: `code` as the SDK's
 * `HealthCheckResponse` reads it, and `status` as every other body of this API carries it; with
 * `error`, its status and message (503: not ready, draining, database down).
 */
export function sendHealth(res: Response, error?: RecordbaseError): void {
  if (!error) {
    res.json({ code: 200, status: 200, message: 'API is healthy.', data: {} });
    return;
  }
  res.status(error.status).json({ code: error.status, status: error.status, message: error.message, data: {} });
}

/** Whether `path` (below the router's mount) is the health check's, compared as the route table compares (case-insensitively). */
export function isHealthPath(path: string): boolean {
  return path.length === 11 && path.toLowerCase() === '/api/health';
}
