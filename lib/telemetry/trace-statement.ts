import { activeSpan, carriesTrace, endSpan, startChildSpan, traceparentOf, type TelemetrySpan } from './start-span.js';
import { rememberWrite } from './trace-delivery.js';

/** What a statement's span says of it: its operation and its table, both read from recordbase's own SQL text (values are bindings, never in the text). */
export interface StatementDescription {
  operation: string;
  table?: string;
}

const FIRST_WORD = /^\s*([A-Za-z]+)/;
const TABLE_AFTER: Readonly<Record<string, RegExp>> = {
  SELECT: /\bfrom\s+((?:"[^"]+"|\w+)(?:\.(?:"[^"]+"|\w+))?)/i,
  DELETE: /\bfrom\s+((?:"[^"]+"|\w+)(?:\.(?:"[^"]+"|\w+))?)/i,
  INSERT: /\binto\s+((?:"[^"]+"|\w+)(?:\.(?:"[^"]+"|\w+))?)/i,
  UPDATE: /^\s*update\s+((?:"[^"]+"|\w+)(?:\.(?:"[^"]+"|\w+))?)/i,
};

/**
 * The operation (`SELECT`, `INSERT`, `BEGIN`, ...) and the first table a statement names, for
 * its span: OpenTelemetry's `db.operation.name` and `db.collection.name`. Only identifiers of the
 * text are read; the text itself is never recorded (a filter's shape is in it).
 */
export function describeStatement(sql: string): StatementDescription {
  const operation = (FIRST_WORD.exec(sql)?.[1] ?? 'SQL').toUpperCase();
  const found = TABLE_AFTER[operation]?.exec(sql)?.[1];
  return found === undefined ? { operation } : { operation, table: found.replace(/"/g, '') };
}

/**
 * Runs one statement under a CLIENT span `OPERATION table` (`db.system.name` postgresql, the
 * operation and the table), a child of `explicitParent` (the request's span carried on its
 * database context) or, without one, of the active context's span; an error when it fails. A
 * statement with no traced parent gets no span (no SDK, or background work such as realtime's
 * heartbeat, which would otherwise be a root trace per statement): `send` then runs as it is.
 */
export function traceStatement<T>(sql: string, explicitParent: TelemetrySpan | undefined, send: () => Promise<T>): Promise<T> {
  const parent = explicitParent ?? activeSpan();
  if (!carriesTrace(parent)) return send();
  const { operation, table } = describeStatement(sql);
  const attributes: Record<string, string> = { 'db.system.name': 'postgresql', 'db.operation.name': operation };
  if (table !== undefined) attributes['db.collection.name'] = table;
  const span = startChildSpan(table === undefined ? operation : `${operation} ${table}`, { kind: 'client', parent, attributes });
  if (span === undefined) return send();
  return send().then(
    (result) => {
      endSpan(span);
      if (table !== undefined && WRITES.has(operation)) rememberWrittenRows(table, result, parent);
      return result;
    },
    (err: unknown) => {
      endSpan(span, true);
      throw err;
    },
  );
}

const WRITES = new Set(['INSERT', 'UPDATE', 'DELETE']);
/** Rows of one statement remembered at most (a bulk write's first ones; the rest deliver unlinked within this process). */
const MAX_ROWS_REMEMBERED = 100;

/** The ids a traced write returned, remembered for its realtime deliveries in this process (trace-delivery.ts). */
function rememberWrittenRows(table: string, result: unknown, span: TelemetrySpan): void {
  const rows = (result as { rows?: unknown } | undefined)?.rows;
  if (!Array.isArray(rows)) return;
  for (const row of rows.slice(0, MAX_ROWS_REMEMBERED)) {
    const id = (row as { id?: unknown } | null)?.id;
    if (typeof id === 'string') rememberWrite(table, id, span);
  }
}

const WRITE_TEXT = /^\s*(INSERT|UPDATE|DELETE|WITH)\b/i;

/**
 * The comment a traced write's text begins with, `/* traceparent='00-…' *\/ ` (the convention of
 * OpenTelemetry's sqlcommenter), or undefined for a statement of no traced request or one that
 * writes nothing. The realtime capture trigger reads it back from `current_query()` into the
 * outbox, so an autocommit write (no BEGIN to carry `SET LOCAL`) links its deliveries on every
 * instance too. The text then differs per request: the caller sends it unnamed.
 */
export function traceCommentOf(sql: string, span: TelemetrySpan | undefined): string | undefined {
  if (!carriesTrace(span) || !WRITE_TEXT.test(sql)) return undefined;
  return `/* traceparent='${traceparentOf(span)!}' */ `;
}
