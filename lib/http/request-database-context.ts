import type { Request } from 'express';
import { StatementBudget, type DatabaseContext } from '../db/statements/database-context.js';
import type { OperationContext } from '../records/record-service.js';

const requestContext = Symbol('recordbase.databaseContext');

type WithDatabaseContext = Request & { [requestContext]?: DatabaseContext };

/**
 * Gives `req` the context its statements run under (the router does, for every request it
 * serves). A request's statements share one budget of `statementTimeoutMs` (DatabaseContext's
 * `budget`): what one client's request costs the database is one statement timeout, however many
 * statements it needs.
 */
export function setRequestDatabaseContext(req: Request, context: DatabaseContext): void {
  context.budget ??= new StatementBudget();
  (req as WithDatabaseContext)[requestContext] = context;
}

/** Where a request's operation runs: the pool, every statement bounded by the request's context. */
export function operationContextOf(req: Request): OperationContext {
  return { database: (req as WithDatabaseContext)[requestContext] };
}
