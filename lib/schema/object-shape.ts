/**
 * One property of an object made by `compileObjectShape`: its key, and where its value comes
 * from: a property of the input (`from`), passed through the shape's `read` function `via` when
 * given, or a fixed value (`value`).
 */
export type ShapeEntry = { readonly key: string } & ({ readonly from: string; readonly via?: string } | { readonly value: unknown });

/**
 * Compiles a function that turns one input object into a new object with exactly `entries`, in that
 * order, as a single object literal: every object it makes has the same hidden class, built in one
 * step. A loop of `out[field.name] = ...` over a collection's fields (what it replaces for rows and
 * response records) adds the properties one keyed store at a time, and those stores see every field
 * name of every collection (megamorphic), the slowest kind of property store in V8, paid for every
 * field of every record.
 *
 * Keys and input names only ever reach the generated source as JSON string literals (and
 * `__proto__` as a computed key, so it is an own property and never a prototype); values and
 * read functions are passed in, never printed. `read` names the functions entries may go through.
 */
export function compileObjectShape<In extends object>(
  entries: readonly ShapeEntry[],
  read: Readonly<Record<string, (value: unknown) => unknown>> = {},
): (input: In) => Record<string, unknown> {
  const fixed: unknown[] = [];
  const readers = Object.keys(read);
  const lines = entries.map((entry) => {
    const key = entry.key === '__proto__' ? `[${JSON.stringify(entry.key)}]` : JSON.stringify(entry.key);
    if ('value' in entry) {
      fixed.push(entry.value);
      return `${key}: fixed[${fixed.length - 1}]`;
    }
    const source = `input[${JSON.stringify(entry.from)}]`;
    if (entry.via === undefined) return `${key}: ${source}`;
    const index = readers.indexOf(entry.via);
    if (index < 0) throw new Error(`compileObjectShape: no read function named ${JSON.stringify(entry.via)}`);
    return `${key}: read${index}(${source})`;
  });
  const params = ['fixed', ...readers.map((_, index) => `read${index}`)];
  const body = `"use strict"; return function shape(input) { return {\n${lines.join(',\n')}\n}; };`;
  const factory = new Function(...params, body) as (...args: unknown[]) => (input: In) => Record<string, unknown>;
  return factory(fixed, ...readers.map((name) => read[name]));
}
