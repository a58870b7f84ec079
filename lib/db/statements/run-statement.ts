import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import { recordDateFromPostgresText } from '../../schema/record-date.js';
import { memoizePerObject } from '../../memoize-per-object.js';
import { traceCommentOf, traceStatement } from '../../telemetry/trace-statement.js';
import { acquireWithin, releaseWithin, sendsPreparedStatements, sendWithin, transactionBeginSql, type SentStatement } from './statement-bounds.js';
import type { DatabaseContext } from './database-context.js';

/**
 * A statement ready to send: SQL text with `?` placeholders (Knex positions them as `$n`), its
 * bindings, and for a statement whose text is fixed per collection, a prepared-statement name.
 */
export interface Statement {
  readonly sql: string;
  readonly bindings: readonly unknown[];
  /** Set only for texts made once per collection and shape (see `preparedName`): the count of names per connection stays bounded. */
  readonly name?: string;
}

/** What node-postgres answers (both engines speak through it). */
export interface StatementResult {
  rows: Record<string, unknown>[];
  rowCount: number | null;
}

/** node-postgres's per-query type parsers (QueryConfig `types`), and its connection's own. */
interface TypeParsers {
  getTypeParser(oid: number, format: string): (text: string) => unknown;
}

const TIMESTAMPTZ_OID = 1184;

/**
 * The type parsers of record statements on one connection: a timestamptz in UTC arrives as its
 * record-format text, made from Postgres's text without a Date in between (readRow passes it
 * through); any other timestamptz text, and every other type, as the connection parses it.
 * Every row of every read has two or more dates, and parsing them into Dates only to format them
 * back would be work thrown away on every one.
 */
function recordTypes(connection: unknown): TypeParsers | undefined {
  if (typeof connection !== 'object' || connection === null || typeof (connection as Partial<TypeParsers>).getTypeParser !== 'function') return undefined;
  return recordTypesOf(connection as TypeParsers);
}

const recordTypesOf = memoizePerObject((own: TypeParsers): TypeParsers => {
  const parseTimestamp = own.getTypeParser(TIMESTAMPTZ_OID, 'text');
  const readTimestamp = (text: string) => recordDateFromPostgresText(text) ?? parseTimestamp(text);
  return { getTypeParser: (oid, format) => (oid === TIMESTAMPTZ_OID && format === 'text' ? readTimestamp : own.getTypeParser(oid, format)) };
});

/**
 * Runs one statement on recordbase's own send path: a connection from the pool (or the
 * transaction's own), acquired within `context` so that the statement is bounded by it
 * (statement-bounds.ts), sent with node-postgres's public `query` (bindings positioned as `$n`,
 * the record types below), then the connection back. Knex is the pool and nothing more: its
 * query builder and runner are not used, and nothing of the host's Knex is changed. With `held`
 * (runTransaction's), on that connection, which stays held.
 */
export async function runStatement(db: Knex, statement: Statement, context?: DatabaseContext, held?: HeldConnection): Promise<StatementResult> {
  if (held !== undefined) return sendOn(db, held.connection, statement, context);
  const connection = await acquireWithin(db, context);
  try {
    return await sendOn(db, connection, statement, context);
  } finally {
    await releaseWithin(db, connection);
  }
}

/**
 * Sends `statement` on `connection`: named when it has a name and the pool sends names
 * (`preparedStatements`, configureSendPath), else unnamed, so no name ever reaches a pooler that
 * cannot keep it.
 */
function sendOn(db: Knex, connection: unknown, statement: Statement, context: DatabaseContext | undefined): Promise<StatementResult> {
  const types = recordTypes(connection);
  // A traced write carries its traceparent in a comment, for realtime's outbox (sent unnamed: its text is the request's own).
  const comment = traceCommentOf(statement.sql, context?.span);
  const sql = comment === undefined ? statement.sql : comment + statement.sql;
  const name = comment === undefined && statement.name !== undefined && sendsPreparedStatements(db) ? statement.name : undefined;
  const config: SentStatement['config'] =
    name === undefined
      ? { text: positionBindings(sql), values: statement.bindings as unknown[], types }
      : { text: positionedNamed(name, sql), values: statement.bindings as unknown[], name, types };
  // Its span (a child of the request's) names the operation and table, never a value.
  return traceStatement(statement.sql, context?.span, () => sendWithin(db, connection, { sql, bindings: statement.bindings, config }, context) as Promise<StatementResult>);
}

/**
 * `?` placeholders as Postgres's `$1`, `$2`, ...; an escaped `\?` stays a question mark (the jsonb
 * `?` operator). The same rule as Knex's Postgres client, so text written for `knex.raw` reads the same.
 */
export function positionBindings(sql: string): string {
  let position = 0;
  return sql.replace(/(\\*)(\?)/g, (_match, escapes: string) => (escapes.length % 2 === 1 ? '?' : `$${++position}`));
}

/** Positioned texts of named statements (a few per collection: see preparedName), made once each. */
const positionedByName = new Map<string, string>();

function positionedNamed(name: string, sql: string): string {
  let text = positionedByName.get(name);
  if (text === undefined) positionedByName.set(name, (text = positionBindings(sql)));
  return text;
}

/** The connection a transaction of runTransaction holds from its BEGIN to its COMMIT or ROLLBACK. */
export interface HeldConnection {
  readonly connection: unknown;
}

/**
 * Runs `work` in a transaction on one connection acquired within `context`, so that its BEGIN,
 * every statement of `work` (runStatement with the held connection) and its COMMIT are bounded by
 * it: COMMIT when `work` resolves; ROLLBACK when it throws, then its error (or the ROLLBACK's,
 * when that fails, as Knex's transaction reports); then the connection goes back. The same
 * statements as Knex's transaction sends, without the Knex instance it builds for every
 * transaction (makeKnex): recordbase's statements need only the connection.
 */
export async function runTransaction<T>(db: Knex, context: DatabaseContext | undefined, work: (held: HeldConnection) => Promise<T>): Promise<T> {
  const held: HeldConnection = { connection: await acquireWithin(db, context) };
  try {
    await sendOn(db, held.connection, { sql: transactionBeginSql(held.connection, context), bindings: [] }, context);
    let result: T;
    try {
      result = await work(held);
    } catch (err) {
      await sendOn(db, held.connection, ROLLBACK, context);
      throw err;
    }
    await sendOn(db, held.connection, COMMIT, context);
    return result;
  } finally {
    await releaseWithin(db, held.connection);
  }
}

/** Knex's own texts, so logs and statement counts read as before (BEGIN: see transactionBeginSql). */
const COMMIT: Statement = { sql: 'COMMIT;', bindings: [] };
const ROLLBACK: Statement = { sql: 'ROLLBACK', bindings: [] };

/**
 * The prepared-statement name of a fixed SQL text: derived from the text, so two texts never
 * share a name (node-postgres refuses that) and the same text always gets the same one. Only
 * texts made once per collection and statement shape are named, so a connection holds at most a
 * few per collection (see CollectionSql in record-store.ts).
 */
export function preparedName(sql: string): string {
  return `rb_${createHash('sha1').update(sql).digest('hex').slice(0, 20)}`;
}
