/**
 * Which table column each output column of a stored view copies, read from Postgres's own analysis
 * of the query: the view's rewrite rule (`pg_rewrite.ev_action`, a `pg_node_tree`) keeps, for each
 * entry of the query's target list, `resorigtbl` and `resorigcol`, the table and column a plain
 * column reference comes from, through joins, subqueries and CTEs (what the wire protocol reports
 * as a result column's table and column). An expression has none. Reading Postgres's answer, not
 * parsing the SQL ourselves, means every query the database accepts is understood as it is.
 */

/** One output column of a query: its position (1-based) and the column it copies (`table` 0: none). */
export interface ColumnOrigin {
  readonly position: number;
  /** The table's oid, 0 for an expression. */
  readonly table: number;
  /** The column's number in that table. */
  readonly column: number;
}

/** A node `{NAME :field value ...}`, a list `(...)`, or one token. */
type TreeValue = string | TreeNode | TreeValue[];

interface TreeNode {
  readonly type: string;
  readonly fields: Map<string, TreeValue>;
}

/**
 * The origins of the outer query's output columns (resjunk entries, which sort or group without
 * being output, left out), from a `pg_node_tree` text: its first node must be the QUERY.
 */
export function readColumnOrigins(tree: string): ColumnOrigin[] {
  const root = new TreeReader(tree).read();
  const query = Array.isArray(root) ? root[0] : root;
  if (typeof query !== 'object' || Array.isArray(query) || query.type !== 'QUERY') throw new Error('recordbase: a view rule that is not a QUERY');
  const targets = query.fields.get('targetList');
  if (!Array.isArray(targets)) return [];
  const origins: ColumnOrigin[] = [];
  for (const target of targets) {
    if (typeof target !== 'object' || Array.isArray(target) || target.type !== 'TARGETENTRY') continue;
    if (target.fields.get('resjunk') === 'true') continue;
    origins.push({ position: readInteger(target, 'resno'), table: readInteger(target, 'resorigtbl'), column: readInteger(target, 'resorigcol') });
  }
  return origins;
}

/**
 * Whether a query reads a whole row anywhere (`row_to_json(t)`, `to_jsonb(t)`, `(t).col`): a
 * Var of attribute 0, from a `pg_node_tree` text. Postgres records no column dependency for one
 * (pg_depend names the columns a view reads one by one, and a whole row as none of them), so a
 * caller counts it as reading every column of the relations the query reads.
 */
export function readsWholeRows(tree: string): boolean {
  return containsNode(new TreeReader(tree).read(), (node) => node.type === 'VAR' && node.fields.get('varattno') === '0');
}

function containsNode(value: TreeValue, test: (node: TreeNode) => boolean): boolean {
  if (typeof value === 'string') return false;
  if (Array.isArray(value)) return value.some((item) => containsNode(item, test));
  if (test(value)) return true;
  for (const field of value.fields.values()) if (containsNode(field, test)) return true;
  return false;
}

function readInteger(node: TreeNode, field: string): number {
  const value = node.fields.get(field);
  const number = typeof value === 'string' ? Number(value) : NaN;
  if (!Number.isInteger(number)) throw new Error(`recordbase: a view rule's ${node.type} has no integer "${field}"`);
  return number;
}

/**
 * Reads a `pg_node_tree` the way Postgres's own reader splits it (`pg_strtok`): tokens end at
 * whitespace and at `(` `)` `{` `}`, which are tokens of their own, and a backslash takes the next
 * character literally. A field's value is the token or structure after its `:name`; anything else
 * up to the next field (the bytes of a constant, `[ 1 0 0 0 ]`) is skipped.
 */
class TreeReader {
  private position = 0;

  constructor(private readonly text: string) {}

  read(): TreeValue {
    const token = this.next();
    if (token === undefined) throw new Error('recordbase: an empty pg_node_tree');
    return this.readFrom(token);
  }

  private readFrom(token: Token): TreeValue {
    if (token.structure === '(') return this.readList();
    if (token.structure === '{') return this.readNode();
    return token.text;
  }

  private readList(): TreeValue[] {
    const items: TreeValue[] = [];
    for (let token = this.next(); token?.structure !== ')'; token = this.next()) {
      if (token === undefined) throw new Error('recordbase: a pg_node_tree list without its end');
      items.push(this.readFrom(token));
    }
    return items;
  }

  private readNode(): TreeNode {
    const type = this.next();
    if (type === undefined || type.structure !== undefined) throw new Error('recordbase: a pg_node_tree node without its type');
    const fields = new Map<string, TreeValue>();
    let key: string | undefined;
    for (let token = this.next(); token?.structure !== '}'; token = this.next()) {
      if (token === undefined) throw new Error('recordbase: a pg_node_tree node without its end');
      if (token.structure === undefined && token.field) {
        key = token.text.slice(1);
        continue;
      }
      const value = this.readFrom(token);
      if (key !== undefined && !fields.has(key)) fields.set(key, value);
    }
    return { type: type.text, fields };
  }

  /** The next token, or undefined at the end. */
  private next(): Token | undefined {
    const text = this.text;
    while (this.position < text.length && isSpace(text[this.position]!)) this.position++;
    if (this.position >= text.length) return undefined;
    const first = text[this.position]!;
    if (first === '(' || first === ')' || first === '{' || first === '}') {
      this.position++;
      return { text: first, structure: first, field: false };
    }
    let token = '';
    let escaped = false;
    while (this.position < text.length) {
      const char = text[this.position]!;
      if (isSpace(char) || '(){}'.includes(char)) break;
      if (char === '\\' && this.position + 1 < text.length) {
        token += text[this.position + 1];
        escaped = true;
        this.position += 2;
        continue;
      }
      token += char;
      this.position++;
    }
    // A field name is written unescaped; an escaped `:` belongs to a value.
    return { text: token, field: !escaped && token.startsWith(':') && token.length > 1 };
  }
}

/** One token: a structural character, or text (a field name `:name`, or a value). */
interface Token {
  readonly text: string;
  readonly structure?: '(' | ')' | '{' | '}';
  readonly field: boolean;
}

function isSpace(char: string): boolean {
  return char === ' ' || char === '\n' || char === '\t' || char === '\r';
}
