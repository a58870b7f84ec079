import { memoizePerObject } from '../../lib/memoize-per-object.js';

describe('memoizePerObject', () => {
  test('builds once per key object, and apart for each key', () => {
    let builds = 0;
    const lengthOf = memoizePerObject((list: string[]) => ({ length: list.length, build: ++builds }));
    const a = ['x'];
    const b = ['x', 'y'];
    expect(lengthOf(a)).toEqual({ length: 1, build: 1 });
    expect(lengthOf(a)).toBe(lengthOf(a));
    expect(lengthOf(b)).toEqual({ length: 2, build: 2 });
    expect(builds).toBe(2);
  });
});
