import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import { recordDateFromPostgresText } from '../schema/record-date.js';
import { memoizePerObject } from '../memoize-per-object.js';
import { acquireWithin, transactionBeginSql } from './bound-statements.js';
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

/** The parts of a Knex client this module uses besides acquireWithin: its query path, and giving the connection back. */
interface StatementClient {
  releaseConnection(connection: unknown): Promise<unknown>;
  query(connection: unknown, obj: { sql: string; bindings: unknown[]; options?: { name?: string; types?: TypeParsers } }): Promise<{ response: StatementResult }>;
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
 * Runs one statement through Knex's client without Knex's query builder or runner: a connection
 * from the pool (or the transaction's own), acquired within `context` so that the statement is
 * bounded by it (bound-statements.ts), `client.query` (which positions the bindings, emits
 * Knex's `query` event and goes through `_query`, where the bounds apply), then the connection
 * back. The builder and runner exist to write SQL text, and what recordbase sends is plain text
 * it assembled itself. With `held` (runTransaction's), on that connection, which stays held.
 */
export async function runStatement(db: Knex | Knex.Transaction, statement: Statement, context?: DatabaseContext, held?: HeldConnection): Promise<StatementResult> {
  const client = db.client as unknown as StatementClient;
  if (held !== undefined) return sendOn(client, held.connection, statement);
  const connection = await acquireWithin(db, context);
  try {
    return await sendOn(client, connection, statement);
  } finally {
    await client.releaseConnection(connection);
  }
}

async function sendOn(client: StatementClient, connection: unknown, statement: Statement): Promise<StatementResult> {
  const types = recordTypes(connection);
  const obj = { sql: statement.sql, bindings: statement.bindings as unknown[], options: statement.name === undefined ? { types } : { name: statement.name, types } };
  return (await client.query(connection, obj)).response;
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
  const client = db.client as unknown as StatementClient;
  const held: HeldConnection = { connection: await acquireWithin(db, context) };
  try {
    await sendOn(client, held.connection, { sql: transactionBeginSql(held.connection, context), bindings: [] });
    let result: T;
    try {
      result = await work(held);
    } catch (err) {
      await sendOn(client, held.connection, ROLLBACK);
      throw err;
    }
    await sendOn(client, held.connection, COMMIT);
    return result;
  } finally {
    await client.releaseConnection(held.connection);
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
