import { bindHostSql, timestamptzAsDate } from '../../../../lib/db/statements/run-host-sql.js';

describe("bindHostSql (m.sql's text and bindings, read as Knex's raw read them)", () => {
  test('without bindings the text goes as it is, its `?` included', () => {
    expect(bindHostSql(`SELECT '{}'::jsonb \\? 'a', ?`, undefined)).toEqual({ sql: `SELECT '{}'::jsonb \\? 'a', ?`, bindings: [] });
  });

  test('each `?` takes the next value; `\\?` stays a question mark; a `\\??` is one value, its backslash dropped', () => {
    expect(bindHostSql(`SELECT ?::int, "data" \\? 'k', ?::text`, [1, 'x'])).toEqual({ sql: `SELECT ?::int, "data" \\? 'k', ?::text`, bindings: [1, 'x'] });
    expect(bindHostSql('SELECT \\??::int', [2])).toEqual({ sql: 'SELECT ?::int', bindings: [2] });
  });

  test('a count that does not match is refused, with the message Knex gave', () => {
    expect(() => bindHostSql('SELECT ?', [])).toThrow('Expected 0 bindings, saw 1');
    expect(() => bindHostSql('SELECT ?', [1, 2])).toThrow('Expected 2 bindings, saw 1');
    expect(() => bindHostSql('SELECT 1', [1])).toThrow('Expected 1 bindings, saw 0');
  });

  test('an undefined value, alone or inside an array or object, is refused (null is NULL)', () => {
    expect(() => bindHostSql('SELECT ?, ?', [1, undefined])).toThrow('Undefined binding(s) detected for keys [1]');
    expect(() => bindHostSql('SELECT ?', [[1, undefined]])).toThrow('Undefined binding(s) detected for keys [0]');
    expect(() => bindHostSql('SELECT ?', [{ a: undefined }])).toThrow('Undefined binding(s) detected for keys [0]');
    expect(bindHostSql('SELECT ?', [null])).toEqual({ sql: 'SELECT ?', bindings: [null] });
  });

  test("Knex's identifier binding `??` is refused, naming what to write instead", () => {
    expect(() => bindHostSql('SELECT * FROM ??', ['notes'])).toThrow(/not identifiers as \?\?: write the quoted name in the text/);
  });
});

describe('timestamptzAsDate (a timestamptz as the send path read it, as node-postgres would give it)', () => {
  test('record-format text is the same instant as a Date; anything else as it came', () => {
    expect(timestamptzAsDate('2024-01-02 03:04:05.678Z')).toEqual(new Date('2024-01-02T03:04:05.678Z'));
    const date = new Date(0);
    expect(timestamptzAsDate(date)).toBe(date);
    expect(timestamptzAsDate(null)).toBeNull();
    expect(timestamptzAsDate('not a date')).toBe('not a date');
  });
});
