import { BadRequestError } from '../../../lib/errors.js';
import { readPageSize, readPaging, type PagingInput } from '../../../lib/records/read-paging.js';

const MAX = 1000;
const SAFE = Number.MAX_SAFE_INTEGER;

/** Each input as the server API passes it; the same case is also read as HTTP's text, String(value). */
const PAGES: [unknown, number | 'error'][] = [
  [undefined, 1],
  [null, 1],
  ['', 1],
  [1, 1],
  [7, 7],
  ['+7', 7],
  ['007', 7],
  [0, 1],
  [-0, 1],
  [-5, 1],
  [-SAFE, 1],
  [SAFE, 'error'], // the records before it are past 2^53 - 1 at 30 a page
  [2.5, 'error'],
  [NaN, 'error'],
  [Infinity, 'error'],
  [-Infinity, 'error'],
  [1e21, 'error'],
  [2 ** 53, 'error'],
  [' 7', 'error'],
  ['7 ', 'error'],
  ['1e3', 'error'],
  ['0x10', 'error'],
  ['abc', 'error'],
  ['99999999999999999999', 'error'],
  [true, 'error'],
  [{}, 'error'],
];

const PER_PAGES: [unknown, number | 'error'][] = [
  [undefined, 30],
  ['', 30],
  [1, 1],
  [30, 30],
  [MAX, MAX],
  [MAX + 1, MAX],
  [SAFE, MAX],
  ['99999999999', MAX],
  [0, 30],
  [-5, 30],
  ['-5', 30],
  [2.5, 'error'],
  ['2.5', 'error'],
  [NaN, 'error'],
  [Infinity, 'error'],
  [2 ** 53, 'error'],
  ['-99999999999999999999', 'error'],
  ['%00', 'error'],
];

const SKIP_TOTALS: [unknown, boolean | 'error'][] = [
  [undefined, false],
  ['', false],
  [true, true],
  [false, false],
  ...['1', 't', 'T', 'true', 'TRUE', 'True'].map((word): [string, boolean] => [word, true]),
  ...['0', 'f', 'F', 'false', 'FALSE', 'False'].map((word): [string, boolean] => [word, false]),
  ['yes', 'error'],
  ['tRUE', 'error'],
  [' true', 'error'],
  [1, 'error'],
];

/** What readPaging answers for `input`: its paging, or the message of its 400. */
function outcomeOf(input: PagingInput): unknown {
  try {
    return readPaging(input, { maxPerPage: MAX });
  } catch (err) {
    expect(err).toBeInstanceOf(BadRequestError);
    expect(err).toMatchObject({ status: 400, code: 'invalid_parameter' });
    return { error: (err as Error).message };
  }
}

/** The same input as HTTP sends it: every value as text. */
const asText = (value: unknown) => (value === undefined || value === null ? undefined : String(value));

describe('readPaging', () => {
  test.each(PAGES)('page %p is %p', (page, expected) => {
    const outcome = outcomeOf({ page });
    if (expected === 'error') expect(outcome).toEqual({ error: expect.stringContaining('"page"') });
    else expect(outcome).toEqual({ page: expected, perPage: 30, skipTotal: false });
  });

  test.each(PER_PAGES)('perPage %p is %p', (perPage, expected) => {
    const outcome = outcomeOf({ perPage });
    if (expected === 'error') expect(outcome).toEqual({ error: expect.stringContaining('"perPage"') });
    else expect(outcome).toEqual({ page: 1, perPage: expected, skipTotal: false });
  });

  test.each(SKIP_TOTALS)('skipTotal %p is %p', (skipTotal, expected) => {
    const outcome = outcomeOf({ skipTotal });
    if (expected === 'error') expect(outcome).toEqual({ error: expect.stringContaining('"skipTotal"') });
    else expect(outcome).toEqual({ page: 1, perPage: 30, skipTotal: expected });
  });

  test('a number and its text read the same, for every page and perPage of the tables', () => {
    const values = [...PAGES, ...PER_PAGES].map(([value]) => value).filter((value) => typeof value === 'number' || value === undefined);
    for (const page of values) {
      for (const perPage of values) expect(outcomeOf({ page: asText(page), perPage: asText(perPage) })).toEqual(outcomeOf({ page, perPage }));
    }
  });

  test('the default page size is capped too, when maxPerPage is under it', () => {
    expect(readPaging({}, { maxPerPage: 10 })).toEqual({ page: 1, perPage: 10, skipTotal: false });
    expect(readPaging({ perPage: -1 }, { maxPerPage: 10 })).toEqual({ page: 1, perPage: 10, skipTotal: false });
  });

  test('a page is refused only once the records before it pass 2^53 - 1', () => {
    const lastPage = Math.floor(SAFE / MAX) + 1;
    expect(outcomeOf({ page: lastPage, perPage: MAX })).toEqual({ page: lastPage, perPage: MAX, skipTotal: false });
    expect(outcomeOf({ page: lastPage + 1, perPage: MAX })).toEqual({ error: expect.stringContaining('"page" parameter is too large') });
  });
});

describe('readPageSize', () => {
  test("takes its own name, default and cap (getFullList's batch)", () => {
    const batch = (value: unknown) => readPageSize(value, { name: 'batch', fallback: 1000, max: 200 });
    expect(batch(undefined)).toBe(200);
    expect(batch(-1)).toBe(200);
    expect(batch(50)).toBe(50);
    expect(batch(5000)).toBe(200);
    expect(() => batch(NaN)).toThrow(/^The "batch" parameter must be an integer/);
    expect(() => batch(2.5)).toThrow(BadRequestError);
  });
});
