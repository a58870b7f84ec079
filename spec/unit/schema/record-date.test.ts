import { formatRecordDate, hasRecordDateShape, parseDateInput, recordDateFromPostgresText } from '../../../lib/schema/record-date.js';

/** The formatter as it was written before: Date getters and padded numbers. */
function reference(d: Date): string {
  const pad = (n: number, w: number) => String(n).padStart(w, '0');
  return `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1, 2)}-${pad(d.getUTCDate(), 2)} ${pad(d.getUTCHours(), 2)}:${pad(d.getUTCMinutes(), 2)}:${pad(d.getUTCSeconds(), 2)}.${pad(d.getUTCMilliseconds(), 3)}Z`;
}

const MIN = new Date('0001-01-01T00:00:00.000Z').getTime();
const MAX = new Date('9999-12-31T23:59:59.999Z').getTime();

describe('formatRecordDate', () => {
  test('matches the getter-based formatter at the edges and on 200,000 random instants of 0001-9999', () => {
    const edges = [MIN, MAX, 0, -1, 951_782_400_000, Date.UTC(2000, 1, 29, 23, 59, 59, 999), new Date('0099-12-31T23:59:59.999Z').getTime(), new Date('1000-01-01T00:00:00.000Z').getTime()];
    for (const ms of edges) expect(formatRecordDate(new Date(ms))).toBe(reference(new Date(ms)));
    for (let i = 0; i < 200_000; i++) {
      const d = new Date(Math.floor(MIN + Math.random() * (MAX - MIN)));
      if (formatRecordDate(d) !== reference(d)) expect(formatRecordDate(d)).toBe(reference(d));
    }
  });

  test('throws RangeError for an invalid date and outside 0001-9999', () => {
    expect(() => formatRecordDate(new Date(NaN))).toThrow(RangeError);
    expect(() => formatRecordDate(new Date(MIN - 1))).toThrow(/outside 0001-9999/);
    expect(() => formatRecordDate(new Date(MAX + 1))).toThrow(/outside 0001-9999/);
  });
});

describe('recordDateFromPostgresText', () => {
  test('a UTC timestamptz with no, short or long fraction becomes the record format, truncated to milliseconds', () => {
    expect(recordDateFromPostgresText('2024-02-29 23:59:59+00')).toBe('2024-02-29 23:59:59.000Z');
    expect(recordDateFromPostgresText('2024-02-29 23:59:59.5+00')).toBe('2024-02-29 23:59:59.500Z');
    expect(recordDateFromPostgresText('2024-02-29 23:59:59.123+00')).toBe('2024-02-29 23:59:59.123Z');
    expect(recordDateFromPostgresText('2024-02-29 23:59:59.123999+00')).toBe('2024-02-29 23:59:59.123Z');
    expect(recordDateFromPostgresText('0001-01-01 00:00:00+00')).toBe('0001-01-01 00:00:00.000Z');
  });

  test('anything else is left to the usual parser (undefined)', () => {
    for (const text of [
      '2024-02-29 23:59:59+05:30',
      '2024-02-29 23:59:59.1-03',
      '2024-02-29 23:59:59+01',
      '0044-03-15 12:00:00+00 BC',
      'Thu Feb 29 23:59:59 2024 UTC',
      '2024-02-29T23:59:59+00',
      '2024-02-29 23:59:59.+00',
      '2024-02-29 23:59:59.1234567+00',
      '12024-02-29 23:59:59+00',
      '2024-2-29 23:59:59+00',
      'infinity',
      '',
    ]) {
      expect(recordDateFromPostgresText(text)).toBeUndefined();
    }
  });

  test('hasRecordDateShape recognises only the exact record format', () => {
    expect(hasRecordDateShape('2024-02-29 23:59:59.123Z')).toBe(true);
    for (const text of ['2024-02-29T23:59:59.123Z', '2024-02-29 23:59:59.123+00', '2024-02-29 23:59:59Z', '2024-02-29 23:59:59.12xZ', '2024-02-29 23:59:59.1234Z']) {
      expect(hasRecordDateShape(text)).toBe(false);
    }
  });
});

describe('formatRecordDate and parseDateInput', () => {
  test('formatRecordDate pads every part', () => {
    expect(formatRecordDate(new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 6)))).toBe('2024-01-02 03:04:05.006Z');
  });

  test('formatRecordDate refuses invalid and unrepresentable dates', () => {
    expect(() => formatRecordDate(new Date(Number.NaN))).toThrow(RangeError);
    expect(() => formatRecordDate(new Date(Date.UTC(10000, 0, 1)))).toThrow(RangeError);
  });

  test('parseDateInput round-trips the record format', () => {
    expect(parseDateInput('1999-12-31 23:59:59.999Z')).toBe('1999-12-31 23:59:59.999Z');
  });

  test('parseDateInput returns null for junk and overlong input', () => {
    expect(parseDateInput('nope')).toBeNull();
    expect(parseDateInput('2024-05-01' + '0'.repeat(100))).toBeNull();
  });
});
