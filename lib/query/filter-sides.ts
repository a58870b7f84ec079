import type { StorageKind } from '../schema/storage-kinds.js';
import { naturalStorageOf } from './filter-values.js';
import type { PathSource } from './resolve-path.js';
import type { SqlFragment } from '../sql-fragment.js';

/**
 * The two sides of a comparison as the filter compiler (compile-filter.ts) resolves them: a value
 * known when the filter is compiled, or a SQL expression over the record, its relation paths and
 * function calls; and what the compiler asks of them.
 */

/** How a comparison over a multi-valued source holds: for some row, for every row, or none is joined. */
export type Quantifier = 'exists' | 'forall' | 'none';

/** A relation or array source a comparison reads, with its quantifier. */
export interface QuantifiedSource {
  readonly source: PathSource;
  readonly quantifier: Quantifier;
}

/** A value known at compile time: a literal (strict coercion) or an @request/macro value (lenient). */
export interface ValueSide {
  readonly kind: 'value';
  readonly value: unknown;
  readonly strict: boolean;
  readonly hint?: StorageKind;
  readonly pos: number;
  readonly label: string;
  /** A guest's `@request.auth.*`: never matches a record field or path (see compileComparison). */
  readonly guestAuth?: boolean;
  /** The macro this value is (`@now`), bound as a DeferredValue when the context defers macros. */
  readonly macro?: string;
}

/** A SQL expression (a column, a path, a bound array, a function call), possibly correlated with sources. */
export interface ExprSide {
  readonly kind: 'expr';
  readonly sql: SqlFragment;
  readonly storage: StorageKind;
  readonly sources: readonly PathSource[];
  readonly lower: boolean;
  readonly each: boolean;
  readonly pos: number;
  readonly label: string;
  /** A function call: its arguments, each of which counts one more towards the filter's cost. */
  readonly callArguments?: number;
  /** A call reading no record value (`strftime('%Y')`, of `@request` values only); any other expression reads one. */
  readonly readsRecord?: boolean;
  /** A call with a guest's `@request.auth.*` among its arguments (see compileComparison). */
  readonly guestAuth?: boolean;
  /** Its sources are "any of" whatever the operator (geoDistance, as PocketBase). */
  readonly anyOfSources?: boolean;
}

/** One side of a comparison. */
export type Side = ValueSide | ExprSide;

/** Whether a side is a guest's `@request.auth.*` (or a call reading one). */
export function isGuestAuth(side: Side): boolean {
  return side.guestAuth === true;
}

/** Whether a side reads the record: a column, a path, `@collection`, or a call with one of those among its arguments. */
export function readsRecord(side: Side): boolean {
  return side.kind === 'expr' && side.readsRecord !== false;
}

/** Whether a side is a `null` value of the filter. */
export function isNullValue(side: Side): boolean {
  return side.kind === 'value' && (side.value === null || side.value === undefined);
}

/** The type both sides are compared as. */
export function pickTarget(left: Side, right: Side, operator: string): StorageKind {
  if (operator === '~' || operator === '!~') return 'text';
  if ((left.kind === 'expr' && left.lower) || (right.kind === 'expr' && right.lower)) return 'text';
  if (left.kind === 'expr' && right.kind === 'expr') return left.storage === right.storage ? left.storage : 'text';
  if (left.kind === 'expr') return left.storage;
  if (right.kind === 'expr') return right.storage;
  const l = naturalStorage(left);
  const r = naturalStorage(right);
  if (l === 'date' || r === 'date') return 'date';
  if (l === undefined) return r ?? 'text';
  if (r === undefined || l === r) return l;
  return 'text';
}

/** The kind a value of the filter reads as by itself, when nothing else says. */
export function naturalStorage(side: ValueSide): StorageKind | undefined {
  return side.hint ?? naturalStorageOf(side.value);
}
