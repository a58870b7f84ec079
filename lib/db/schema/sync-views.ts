import { SchemaError } from '../../errors.js';
import { quoteIdent as q, rawSql } from '../../sql-fragment.js';
import type { CollectionSchema } from '../../schema/collection-schema.js';
import { inferViewCollection, viewSelectSql, wrapViewQuery, type ReadColumn, type ViewColumn } from '../../schema/view-schema.js';
import { readColumnOrigins, readsWholeRows } from '../realtime/read-query-origins.js';
import type { StatementRunner } from '../statements/statement-runner.js';

/**
 * The temporary view a query is asked about: temporary objects belong to the session, so this
 * name is never shared with another instance, and it is dropped before the sync's transaction ends.
 */
const PROBE_VIEW = '_rb_view_probe';

/** The view collections after a sync: each completed with its fields, and the DDL it ran. */
export interface ViewSync {
  readonly views: ReadonlyMap<string, CollectionSchema>;
  readonly statements: readonly string[];
}

/**
 * Creates or replaces the database views of the view collections, in declaration order, and
 * returns them with their fields (lib/schema/view-schema.ts). Run inside the schema sync's
 * transaction, after the tables. Each query is first asked about as a temporary view: its columns,
 * their types and origins give the fields, the fields give the view's SELECT. Where every view
 * already reads as that SELECT, nothing changes (a restart runs no DDL on them); otherwise all of
 * them are dropped in one statement and made again in order, since a view may read the views
 * declared before it. Other database objects that depend on one of them make the drop fail, and
 * the sync with it, naming the view: recordbase drops nothing it did not make.
 */
export async function syncViews(trx: StatementRunner, collections: readonly CollectionSchema[]): Promise<ViewSync> {
  const views = collections.filter((c) => c.type === 'view');
  if (views.length === 0) return { views: new Map(), statements: [] };
  const existing = await readExistingViews(trx, views);
  const unchanged = existing.size === views.length ? await inferViews(trx, { views, collections, create: false }) : undefined;
  if (unchanged) return unchanged;
  const statements: string[] = [];
  if (existing.size > 0) {
    const drop = `DROP VIEW IF EXISTS ${[...existing].map((name) => q(name)).join(', ')}`;
    await runOrExplain(trx, drop, (message) => `the view collections ${[...existing].join(', ')} must be replaced, but: ${message} (drop what depends on them, or read the tables instead)`);
    statements.push(drop);
  }
  const made = await inferViews(trx, { views, collections, create: true });
  return { views: made!.views, statements: [...statements, ...made!.statements] };
}

/** The declared views that exist as views; a declared view whose name a table (or anything else) holds is refused. */
async function readExistingViews(trx: StatementRunner, views: readonly CollectionSchema[]): Promise<Set<string>> {
  const rows = await trx.rows<{ relname: string; relkind: string }>({
    sql: `SELECT c.relname, c.relkind::text AS relkind FROM pg_class c WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND c.relname = ANY(?::text[])`,
    bindings: [views.map((v) => v.table)],
  });
  const existing = new Set<string>();
  for (const row of rows) {
    if (row.relkind !== 'v') {
      throw new SchemaError(`collection "${row.relname}": a view collection needs its name free, but a table (or other relation) "${row.relname}" exists; recordbase never drops it (rename or drop it in a migration)`);
    }
    existing.add(row.relname);
  }
  return existing;
}

/**
 * Infers each view in order. `create: false` compares each with the view in place and stops
 * (undefined) at the first that differs; `create: true` makes each (the old ones are gone).
 */
async function inferViews(trx: StatementRunner, options: { views: readonly CollectionSchema[]; collections: readonly CollectionSchema[]; create: boolean }): Promise<ViewSync | undefined> {
  const done = new Map<string, CollectionSchema>();
  const declared = new Map(options.collections.map((c) => [c.table, c]));
  const statements: string[] = [];
  for (const view of options.views) {
    const probe = await probeQuery(trx, view, wrapViewQuery(view.viewQuery ?? ''));
    const later = probe.relations.find((table) => declared.get(table)?.type === 'view' && !done.has(table));
    if (later !== undefined) {
      throw new SchemaError(`collection "${view.name}": its viewQuery reads the view collection "${later}", declared after it (or itself); declare "${later}" first`);
    }
    const sourceOf = (table: string) => done.get(table) ?? (declared.get(table)?.type === 'base' ? declared.get(table) : undefined);
    const complete = inferViewCollection({ view, columns: probe.columns, reads: probe.reads, sourceOf });
    const select = viewSelectSql(complete, probe.columns);
    if (options.create) {
      const statement = `CREATE VIEW ${q(view.table)} AS ${select}`;
      await runOrExplain(trx, statement, (message) => `collection "${view.name}": its view could not be made: ${message}`);
      statements.push(statement);
    } else if (!(await isSameView(trx, view, select))) {
      return undefined;
    }
    done.set(view.table, complete);
  }
  return { views: done, statements };
}

/** What the database says of a query: its columns (name, type, origin), the relations of this schema it reads, and their columns it reads. */
interface ProbedQuery {
  readonly columns: ViewColumn[];
  readonly relations: string[];
  readonly reads: ReadColumn[];
}

/**
 * Makes `select` a temporary view, reads what Postgres knows of it, and drops it. A query that
 * does not run is the view collection's SchemaError, with Postgres's message.
 */
async function probeQuery(trx: StatementRunner, view: CollectionSchema, select: string): Promise<ProbedQuery> {
  await runOrExplain(trx, `CREATE TEMPORARY VIEW ${q(PROBE_VIEW)} AS ${select}`, (message) => `collection "${view.name}": its viewQuery does not run: ${message}`);
  const oid = `to_regclass('pg_temp.${PROBE_VIEW}')`;
  const columns = await trx.rows<{ name: string; type: string; position: number }>(
    rawSql(`SELECT a.attname AS name, format_type(CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE a.atttypid END, NULL) AS type, a.attnum::int AS position
     FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
     WHERE a.attrelid = ${oid} AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`),
  );
  const rule = await trx.rows<{ tree: string }>(rawSql(`SELECT ev_action::text AS tree FROM pg_rewrite WHERE ev_class = ${oid} AND rulename = '_RETURN'`));
  const origins = readColumnOrigins(rule[0]?.tree ?? '()').filter((o) => o.table !== 0);
  const named = await trx.rows<{ position: number; relname: string; attname: string }>({
    sql: `SELECT o.position::int AS position, c.relname, a.attname
     FROM unnest(?::int[], ?::oid[], ?::int[]) AS o(position, tbl, col)
     JOIN pg_class c ON c.oid = o.tbl JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = o.col
     WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())`,
    bindings: [origins.map((o) => o.position), origins.map((o) => o.table), origins.map((o) => o.column)],
  });
  // The rule depends on each relation it reads, and on each of their columns it reads anywhere in the query (refobjsubid).
  const depends = await trx.rows<{ relname: string; attname: string | null }>(
    rawSql(`SELECT DISTINCT c.relname, a.attname FROM pg_rewrite r
     JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid AND d.refclassid = 'pg_class'::regclass
     JOIN pg_class c ON c.oid = d.refobjid
     LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = d.refobjsubid AND d.refobjsubid > 0
     WHERE r.ev_class = ${oid} AND c.oid <> ${oid} AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())`),
  );
  await trx.query(rawSql(`DROP VIEW ${q(PROBE_VIEW)}`));
  const sources = new Map(named.map((row) => [row.position, { table: row.relname, column: row.attname }]));
  const relations = [...new Set(depends.map((row) => row.relname))];
  const wholeRows = readsWholeRows(rule[0]?.tree ?? '()');
  return {
    columns: columns.map((row) => ({ name: row.name, dataType: row.type, ...(sources.has(row.position) ? { source: sources.get(row.position)! } : {}) })),
    relations,
    reads: wholeRows ? relations.map((table) => ({ table })) : depends.flatMap((row) => (row.attname === null ? [] : [{ table: row.relname, column: row.attname }])),
  };
}

/** Whether the view in place reads exactly as `select` would (both as Postgres prints them back). */
async function isSameView(trx: StatementRunner, view: CollectionSchema, select: string): Promise<boolean> {
  await executeDdl(trx, `CREATE TEMPORARY VIEW ${q(PROBE_VIEW)} AS ${select}`);
  const same = await trx.rows<{ same: boolean }>({
    sql: `SELECT pg_get_viewdef(to_regclass('pg_temp.${PROBE_VIEW}')) = pg_get_viewdef(to_regclass(format('%I.%I', current_schema(), ?::text))) AS same`,
    bindings: [view.table],
  });
  await trx.query(rawSql(`DROP VIEW ${q(PROBE_VIEW)}`));
  return same[0]?.same === true;
}

/** Runs DDL whose failure is the definition's fault: the database's message becomes a SchemaError. */
async function runOrExplain(trx: StatementRunner, statement: string, explain: (message: string) => string): Promise<void> {
  try {
    await executeDdl(trx, statement);
  } catch (err) {
    // node-postgres's error: its message is the database's own (the send path adds no statement text to it).
    throw new SchemaError(explain(err instanceof Error ? err.message : String(err)));
  }
}

/**
 * Runs a statement that holds the host's SQL as a bound value, executed by the database: the send
 * path rewrites every `?` of a statement's text into a parameter (and a backslash before one
 * away), so a view reading a jsonb `?` operator or a `'\\?'` pattern would not reach Postgres as
 * written.
 */
async function executeDdl(trx: StatementRunner, statement: string): Promise<void> {
  await trx.query({ sql: `SELECT set_config('recordbase.view_statement', ?, true)`, bindings: [statement] });
  await trx.query(rawSql(`DO $do$ BEGIN EXECUTE current_setting('recordbase.view_statement'); END $do$`));
}
