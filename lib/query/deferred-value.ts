import { computeMacro } from './filter-macros.js';

/**
 * A binding whose value is known only when its statement runs: a date or time macro (`@now`,
 * `@todayStart`, `@hour`, ...) in a condition compiled once and evaluated many times, such as a
 * realtime subscription's rule checked on every change. The compiler decides the macro's type and
 * coercion once; `resolve(now)` applies them to the instant of the check.
 */
export class DeferredValue {
  private constructor(private readonly compute: (now: Date) => unknown) {}

  /** The macro `name` (with its `@`) at check time, read through `coerce` as the comparison's type. */
  static ofMacro(name: string, coerce: (value: unknown) => unknown): DeferredValue {
    return new DeferredValue((now) => coerce(computeMacro(name, now)));
  }

  /** The value at `now`. */
  resolve(now: Date): unknown {
    return this.compute(now);
  }

  /** A deferred value transformed once it is known (a LIKE pattern made of a macro's text). */
  map(transform: (value: unknown) => unknown): DeferredValue {
    return new DeferredValue((now) => transform(this.compute(now)));
  }
}

/** `value` transformed now, or once known when it is deferred. */
export function mapValue(value: unknown, transform: (value: unknown) => unknown): unknown {
  return value instanceof DeferredValue ? value.map(transform) : transform(value);
}

/** Whether any of `bindings` is deferred (so the fragment must be resolved before it runs). */
export function hasDeferredValues(bindings: readonly unknown[]): boolean {
  return bindings.some((binding) => binding instanceof DeferredValue);
}

/** `bindings` with every deferred value resolved at `now`. */
export function resolveBindings(bindings: readonly unknown[], now: Date): unknown[] {
  return bindings.map((binding) => (binding instanceof DeferredValue ? binding.resolve(now) : binding));
}
