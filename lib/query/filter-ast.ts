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

/** Either side of a comparison. */
export type FilterOperand = LiteralOperand | IdentifierOperand;

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
