/**
 * A statement to node-postgres without Knex's two copies of its settings, for the statement
 * bounds' client (bound-statements.ts), which keeps Knex's path for everything this does not take.
 */
import { createRequire } from 'node:module';

/** Knex's Postgres dialect's `_query`: sendToPostgres does its work for a client whose class inherits it unchanged. */
const postgresDialectQuery = (createRequire(import.meta.url)('knex/lib/dialects/postgres/index.js') as { prototype: { _query: unknown } }).prototype._query;

/** A statement as Knex's client hands it to `_query`; `options` are node-postgres query settings. */
interface KnexQueryObject {
  sql?: string;
  bindings?: unknown[];
  options?: Record<string, unknown>;
  response?: unknown;
}

/** node-postgres's `Query` (pg/lib/query.js) as sendToPostgres uses it. */
interface PostgresQuery {
  name?: string;
  types?: unknown;
  _result?: { _types?: unknown };
}
type PostgresQueryClass = new (text: string, values: unknown[], callback: (err: Error | null, response: unknown) => void) => PostgresQuery;

/** node-postgres's `Query` class when the client speaks through node-postgres (Postgres and the embedded engine). */
function postgresQueryClass(client: { driver?: unknown }): PostgresQueryClass | undefined {
  const Query = (client.driver as { Query?: unknown } | null | undefined)?.Query;
  return typeof Query === 'function' && (client as { driverName?: unknown }).driverName === 'pg' ? (Query as PostgresQueryClass) : undefined;
}

/**
 * What Knex's Postgres `_query` does (the statement to node-postgres; its answer as
 * `obj.response`, `obj` as the result) without copying the query's settings twice on the way:
 * Knex merges `options` into a new config object, which node-postgres then copies through its
 * property descriptors (`cloneQueryConfig`) on every statement, a copy that a plain
 * `pool.query(text, values)` never makes. The query is made from the text as that call makes
 * it, then given the statement's name and type parsers as node-postgres's constructor would
 * have. Undefined (the caller takes Knex's path) for settings other than those two, or a
 * node-postgres whose query is not built as this expects.
 */
function sendToPostgres(Query: PostgresQueryClass, connection: unknown, obj: KnexQueryObject): Promise<unknown> | undefined {
  const options = obj.options;
  let name: unknown;
  let types: unknown;
  if (options !== undefined) {
    for (const key in options) {
      if (key === 'name') name = options.name;
      else if (key === 'types') types = options.types;
      else return undefined;
    }
  }
  if (!obj.sql || typeof (connection as { query?: unknown } | null)?.query !== 'function') return undefined;
  let settle: (err: Error | null, response: unknown) => void = () => undefined;
  const query = new Query(obj.sql, obj.bindings ?? [], (err, response) => settle(err, response));
  if (types !== undefined) {
    if (query._result === undefined || query._result._types !== undefined) return undefined;
    query.types = types;
    query._result._types = types;
  }
  if (name !== undefined) query.name = name as string;
  return new Promise((resolve, reject) => {
    settle = (err, response) => {
      if (err) return reject(err);
      obj.response = response;
      resolve(obj);
    };
    (connection as { query(query: PostgresQuery): unknown }).query(query);
  });
}

/**
 * sendToPostgres for `client`, when its `_query` (`knexQuery`) is Knex's Postgres dialect's own
 * and its driver is node-postgres; undefined otherwise (the caller keeps Knex's path). The sender
 * itself answers undefined for a statement it does not take.
 */
export function directPostgresSender(client: { driver?: unknown }, knexQuery: unknown): ((connection: unknown, obj: unknown) => Promise<unknown> | undefined) | undefined {
  const Query = knexQuery === postgresDialectQuery ? postgresQueryClass(client) : undefined;
  return Query && ((connection, obj) => sendToPostgres(Query, connection, obj as KnexQueryObject));
}
