import { compileObjectShape } from '../../../lib/schema/object-shape.js';

describe('compileObjectShape', () => {
  test('makes the entries in order: fixed values, input properties, and properties through a read function', () => {
    const shape = compileObjectShape<Record<string, unknown>>(
      [
        { key: 'kind', value: 'post' },
        { key: 'id', from: 'id' },
        { key: 'title', from: 'title_column', via: 'text' },
        { key: 'tags', from: 'tags', via: 'list' },
      ],
      { text: (value) => value ?? '', list: (value) => value ?? [] },
    );
    const out = shape({ id: 'a1', title_column: null, tags: undefined, other: 'left out' });
    expect(Object.keys(out)).toEqual(['kind', 'id', 'title', 'tags']);
    expect(out).toEqual({ kind: 'post', id: 'a1', title: '', tags: [] });
    // A fresh object (and a fresh [] from the read function) every time.
    const again = shape({ id: 'a2' });
    expect(again).not.toBe(out);
    expect(again.tags).not.toBe(out.tags);
  });

  test('keys and input names are data, never code: quotes, backslashes, newlines and __proto__', () => {
    const names = ['a"b', 'c\\d', 'e\nf', '__proto__', 'constructor', '"); process.exit(1); ("'];
    const shape = compileObjectShape<Record<string, unknown>>(names.map((name) => ({ key: name, from: name })));
    const input = Object.fromEntries(names.map((name, index) => [name, index]));
    Object.defineProperty(input, '__proto__', { value: 3, enumerable: true });
    const out = shape(input);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.keys(out)).toEqual(names);
    expect(Object.getOwnPropertyDescriptor(out, '__proto__')?.value).toBe(3);
    expect(JSON.parse(JSON.stringify(out))).toEqual(JSON.parse(JSON.stringify(input)));
  });

  test('a read function that is not given is a mistake at compile time', () => {
    expect(() => compileObjectShape([{ key: 'a', from: 'a', via: 'missing' }], {})).toThrow(/no read function named "missing"/);
  });
});
