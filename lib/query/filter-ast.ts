/**
 * The parsed form of a filter or rule. It is schema-free (names are resolved at compile time),
 * immutable once built, and shared through the parse cache, so nothing may mutate it.
 * Every node carries `pos`, the 0-based character offset in the source string, for error messages.
 */

/** The six comparison operators; `~` and `!~` are "contains" / "does not contain". */
export type CompareOperator = '=' | '!=' | '>' | '>=' | '<' | '<=' | '~' | '!~';

/** A literal written in the filter. */
export interface LiteralOperand {
  readonly type: 'literal';
  readonly value: string | number | boolean | null;
  readonly pos: number;
}

/** A name: a field path, `@request.*`, `@collection.*` or a macro, with an optional `:modifier`. */
export interface IdentifierOperand {
  readonly type: 'identifier';
  /** The path without the modifier, e.g. `author.name` or `@request.auth.id`. */
  readonly name: string;
  readonly segments: readonly string[];
  readonly modifier?: string;
  readonly pos: number;
}

/** The functions of the filter language (PocketBase's), with how many arguments each takes. */
export const FILTER_FUNCTIONS = {
  /** `strftime(format[, time[, modifier...]])`: SQLite's, at most 10 arguments as in PocketBase. */
  strftime: { minArgs: 1, maxArgs: 10 },
  /** `geoDistance(lonA, latA, lonB, latB)`: kilometres between two points. */
  geoDistance: { minArgs: 4, maxArgs: 4 },
} as const;

/** A function's name. */
export type FilterFunctionName = keyof typeof FILTER_FUNCTIONS;

/** What a function takes as an argument: a literal or a name, never another call. */
export type FunctionArgument = LiteralOperand | IdentifierOperand;

/** A function call, `strftime('%Y', created)`; `pos` is the position of its name. */
export interface FunctionOperand {
  readonly type: 'function';
  readonly name: FilterFunctionName;
  readonly args: readonly FunctionArgument[];
  readonly pos: number;
}

/** Either side of a comparison. */
export type FilterOperand = LiteralOperand | IdentifierOperand | FunctionOperand;

/**
 * The names an operand reads: itself, or a function call's name arguments. Whoever decides from
 * the names of a filter (what it may reuse, whether it reads the body, which rows it touches)
 * reads them through this, so a name inside a call is never overlooked.
 */
export function listOperandNames(operand: FilterOperand): readonly IdentifierOperand[] {
  if (operand.type === 'identifier') return [operand];
  if (operand.type === 'function') return operand.args.filter((arg): arg is IdentifierOperand => arg.type === 'identifier');
  return [];
}

/** `left op right`; `anyOf` is true for the `?` forms (`?=`, `?~`, ...). */
export interface ComparisonNode {
  readonly type: 'comparison';
  readonly operator: CompareOperator;
  readonly anyOf: boolean;
  readonly left: FilterOperand;
  readonly right: FilterOperand;
  readonly pos: number;
}

/** `&&` / `||` over two or more items (flattened so long chains stay shallow). */
export interface LogicalNode {
  readonly type: 'and' | 'or';
  readonly items: readonly FilterNode[];
  readonly pos: number;
}

/** A whole filter; an empty `and` (no items) is the blank filter and matches everything. */
export type FilterNode = ComparisonNode | LogicalNode;
