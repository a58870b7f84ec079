/**
 * The one way recordbase builds SQL (the filter compiler, the store, the planner, realtime's
 * statements): text that only ever holds identifiers and fixed keywords, plus an ordered list of
 * bindings. Keeping text and values in one object means the `?` placeholders and their bindings
 * can never drift apart, whatever order fragments are composed in. It sits on the lowest floor
 * because every floor above writes SQL.
 */

/** A piece of SQL for knex.raw/whereRaw: `?` per binding, values only in `bindings`. */
export interface SqlFragment {
  readonly sql: string;
  readonly bindings: readonly unknown[];
}

/** Postgres types a bound value is cast to, so the server never has to guess a parameter's type. */
export type BindCast = 'text' | 'double precision' | 'boolean' | 'timestamptz' | 'jsonb';

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Double-quotes a schema identifier. Identifiers come only from the checked schema or from the
 * compiler's own aliases; the check is a last line of defence, so a violation is a bug (plain Error).
 */
export function quoteIdent(name: string): string {
  if (!IDENTIFIER.test(name)) throw new Error(`recordbase: refusing to quote identifier ${JSON.stringify(name)}`);
  return `"${name}"`;
}

/** A bound value with an explicit cast: the only path by which a value enters SQL. */
export function bindValue(value: unknown, cast: BindCast): SqlFragment {
  return { sql: `?::${cast}`, bindings: [value] };
}

/** Raw SQL text without values (keywords, quoted identifiers, constants we write ourselves). */
export function rawSql(text: string): SqlFragment {
  return { sql: text, bindings: [] };
}

/**
 * Template tag composing fragments: interpolated fragments bring their bindings along in text
 * order; interpolated strings are raw SQL text and must never carry user values.
 */
export function sql(strings: TemplateStringsArray, ...parts: (SqlFragment | string)[]): SqlFragment {
  let text = strings[0];
  const bindings: unknown[] = [];
  parts.forEach((part, i) => {
    if (typeof part === 'string') text += part;
    else {
      text += part.sql;
      bindings.push(...part.bindings);
    }
    text += strings[i + 1];
  });
  return { sql: text, bindings };
}

/** Joins fragments with a separator, keeping binding order. */
export function joinSql(parts: readonly SqlFragment[], separator: string): SqlFragment {
  return {
    sql: parts.map((p) => p.sql).join(separator),
    bindings: parts.flatMap((p) => p.bindings),
  };
}
