import type { Knex } from 'knex';
import type { RateLimitSettings } from '../../db/rate-limits/rate-limit-settings.js';
import { rateLimitsSchema } from '../../db/rate-limits/rate-limit-sql.js';
import type { SchemaAddition } from '../../db/schema/sync-database-schema.js';
import { StatementRunner } from '../../db/statements/statement-runner.js';
import type { Logger } from '../../logger.js';
import type { Limits } from '../../options.js';
import type { CallerResolver } from '../resolve-caller.js';
import { createRateLimitGuard, type RateLimitGuard } from './rate-limit-guard.js';
import { RateLimiter, type CountedRule } from './rate-limiter.js';

/** A router's rate limits once started: the guard over its caller resolver, and the stop of its syncs. */
export interface RateLimits {
  readonly limiter: RateLimiter;
  /** The guard of the routes, over the router's caller resolver (it makes the resolver once per request). */
  guardWith(resolveCaller: CallerResolver): RateLimitGuard;
  close(): Promise<void>;
}

/** Whether `rateLimits` has rules: without, the router adds no check to any request (and no table). */
function hasRules(settings: RateLimitSettings | false): settings is RateLimitSettings {
  return settings !== false && settings.rules.length > 0;
}

/** The schema sync's part for rate limits: the shared table, on a database the host passed (several instances may share it). */
export function rateLimitsAdditions(settings: RateLimitSettings | false, database: Knex | undefined): SchemaAddition[] {
  return hasRules(settings) && database !== undefined ? [rateLimitsSchema()] : [];
}

/**
 * Starts the rate limits of a router (docs/limits.md, "Rate limits"), or none without rules. On
 * a database the host passed the counters are shared through it (several instances may use it),
 * with statements bounded as a request's; on the embedded engine, which one process owns, they
 * stay in memory.
 */
export function startRateLimits(options: { settings: RateLimitSettings | false; shared: Knex | undefined; limits: Pick<Limits, 'statementTimeoutMs' | 'acquireTimeoutMs'>; logger: Logger }): RateLimits | undefined {
  const { settings, shared, limits } = options;
  if (!hasRules(settings)) return undefined;
  const rules: CountedRule[] = settings.rules.map((rule, index) => ({ ...rule, index }));
  const runner = shared && new StatementRunner(shared, { statementTimeoutMs: limits.statementTimeoutMs, acquireTimeoutMs: limits.acquireTimeoutMs });
  const limiter = new RateLimiter({ rules, maxTrackedKeys: settings.maxTrackedKeys, runner, logger: options.logger });
  limiter.start();
  return {
    limiter,
    guardWith: (resolveCaller) => createRateLimitGuard({ settings, limiter, rules, resolveCaller }),
    close: () => limiter.close(),
  };
}
