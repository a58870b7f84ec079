import type { Knex } from 'knex';
import type { SqlFragment } from '../../sql-fragment.js';
import type { DatabaseContext } from './database-context.js';
import { runStatement, runTransaction, type HeldConnection, type Statement, type StatementResult } from './run-statement.js';

/**
 * Where a sequence of recordbase's own statements goes: realtime's, the schema sync's, the
 * migrations' and their helpers'. Each statement takes recordbase's send path (run-statement.ts):
 * on a pooled connection bounded by `context` (none: unbounded, as at start-up), or on the held
 * connection of one transaction. A module that writes SQL takes a runner, not a Knex, so none of
 * its statements goes through the host's Knex instance; the Knex is only the pool.
 */
export class StatementRunner {
  constructor(
    /** The Knex whose pool the connections come from. */
    readonly db: Knex,
    /** What bounds every statement (lib/db/statements/database-context.ts); none: unbounded. */
    readonly context?: DatabaseContext,
    /** Set on a transaction's runner: every statement runs on that connection. */
    readonly held?: HeldConnection,
  ) {}

  /** Whether this runner's statements run inside one transaction. */
  get inTransaction(): boolean {
    return this.held !== undefined;
  }

  /** Runs one statement (SQL with `?` placeholders and its bindings). */
  query(statement: SqlFragment | Statement): Promise<StatementResult> {
    return runStatement(this.db, statement, this.context, this.held);
  }

  /** The rows of one statement. */
  async rows<Row extends object = Record<string, unknown>>(statement: SqlFragment | Statement): Promise<Row[]> {
    return (await this.query(statement)).rows as Row[];
  }

  /**
   * Runs `work` in one transaction on one connection: it commits when `work` resolves and rolls
   * back when it throws (then its error). Inside a transaction already, `work` runs under a
   * savepoint of it, released when `work` resolves and rolled back to when it throws, so that a
   * failing part leaves what came before it in place.
   */
  async transaction<T>(work: (runner: StatementRunner) => Promise<T>): Promise<T> {
    if (this.held === undefined) return runTransaction(this.db, this.context, (held) => work(new StatementRunner(this.db, this.context, held)));
    const name = `rb_savepoint_${++savepoints}`;
    await this.query({ sql: `SAVEPOINT ${name}`, bindings: [] });
    let result: T;
    try {
      result = await work(this);
    } catch (err) {
      await this.query({ sql: `ROLLBACK TO SAVEPOINT ${name}`, bindings: [] });
      await this.query({ sql: `RELEASE SAVEPOINT ${name}`, bindings: [] });
      throw err;
    }
    await this.query({ sql: `RELEASE SAVEPOINT ${name}`, bindings: [] });
    return result;
  }
}

/** Savepoint names made so far (unique within the process, so nested ones never collide). */
let savepoints = 0;
