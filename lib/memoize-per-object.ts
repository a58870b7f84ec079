/**
 * `build(key)`, computed once per key object and kept as long as that object lives (a WeakMap):
 * what recordbase derives once per collection, per connection or per conditions array.
 */
export function memoizePerObject<K extends object, V>(build: (key: K) => V): (key: K) => V {
  const values = new WeakMap<K, V>();
  return (key) => {
    let value = values.get(key);
    if (value === undefined) {
      value = build(key);
      values.set(key, value);
    }
    return value;
  };
}
