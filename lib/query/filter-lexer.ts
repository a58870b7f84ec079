import { createFilterError, quoteForMessage } from './filter-error.js';

/** Token kinds of the filter language. */
export type FilterTokenKind = 'identifier' | 'string' | 'number' | 'operator' | 'and' | 'or' | 'lparen' | 'rparen' | 'comma' | 'eof';

/** One token; `text` is the source text, `value` the decoded value of strings and numbers. */
export interface FilterToken {
  readonly kind: FilterTokenKind;
  readonly text: string;
  readonly value?: string | number;
  readonly pos: number;
}

const OPERATORS = ['?!=', '?>=', '?<=', '?!~', '!=', '>=', '<=', '!~', '?=', '?>', '?<', '?~', '=', '>', '<', '~'];
const IDENT_START = /[A-Za-z_@]/;
const IDENT_PART = /[A-Za-z0-9_.:@]/;
const NUMBER = /-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?/y;
const SIMPLE_ESCAPES: Record<string, string> = { n: '\n', t: '\t', r: '\r', b: '\b', f: '\f', '/': '/', '\\': '\\', '"': '"', "'": "'" };

/**
 * Splits a filter into tokens in one linear pass. Strings decode JSON-style escapes because the
 * pocketbase SDK's pb.filter() writes them with JSON.stringify; an unknown escape is kept as
 * written so Windows-like paths survive. `//` starts a comment that runs to the end of its line,
 * as in PocketBase, so rules copied from it keep their comments; inside a string it is text.
 * Throws only BadRequestError.
 */
export function tokenizeFilter(input: string): FilterToken[] {
  const tokens: FilterToken[] = [];
  let i = 0;
  while (i < input.length) {
    const c = input[i];
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      i++;
      continue;
    }
    if (c === '(' || c === ')' || c === ',') {
      tokens.push({ kind: c === '(' ? 'lparen' : c === ')' ? 'rparen' : 'comma', text: c, pos: i });
      i++;
      continue;
    }
    if (input.startsWith('//', i)) {
      const end = input.indexOf('\n', i);
      i = end === -1 ? input.length : end + 1;
      continue;
    }
    if (input.startsWith('&&', i) || input.startsWith('||', i)) {
      tokens.push({ kind: c === '&' ? 'and' : 'or', text: input.slice(i, i + 2), pos: i });
      i += 2;
      continue;
    }
    if (c === "'" || c === '"') {
      const { value, end } = readString(input, i);
      tokens.push({ kind: 'string', text: input.slice(i, end), value, pos: i });
      i = end;
      continue;
    }
    NUMBER.lastIndex = i;
    const num = (c === '-' || c === '.' || (c >= '0' && c <= '9')) && NUMBER.exec(input);
    if (num) {
      const end = i + num[0].length;
      if (end < input.length && IDENT_PART.test(input[end]) && input[end] !== ':') {
        throw createFilterError(`invalid number ${quoteForMessage(input.slice(i, end + 1))}`, i);
      }
      tokens.push({ kind: 'number', text: num[0], value: Number(num[0]), pos: i });
      i = end;
      continue;
    }
    const op = OPERATORS.find((o) => input.startsWith(o, i));
    if (op) {
      tokens.push({ kind: 'operator', text: op, pos: i });
      i += op.length;
      continue;
    }
    if (IDENT_START.test(c)) {
      let end = i + 1;
      while (end < input.length && IDENT_PART.test(input[end])) end++;
      tokens.push({ kind: 'identifier', text: input.slice(i, end), pos: i });
      i = end;
      continue;
    }
    throw createFilterError(`unexpected character ${quoteForMessage(String.fromCodePoint(input.codePointAt(i) ?? 0))}`, i);
  }
  tokens.push({ kind: 'eof', text: '', pos: input.length });
  return tokens;
}

function readString(input: string, start: number): { value: string; end: number } {
  const quote = input[start];
  let out = '';
  let i = start + 1;
  while (i < input.length) {
    const c = input[i];
    if (c === quote) return { value: out, end: i + 1 };
    if (c !== '\\') {
      out += c;
      i++;
      continue;
    }
    const next = input[i + 1];
    if (next === undefined) break;
    if (next === 'u' && /^[0-9a-fA-F]{4}$/.test(input.slice(i + 2, i + 6))) {
      out += String.fromCharCode(parseInt(input.slice(i + 2, i + 6), 16));
      i += 6;
    } else if (Object.hasOwn(SIMPLE_ESCAPES, next)) {
      out += SIMPLE_ESCAPES[next];
      i += 2;
    } else {
      out += c + next;
      i += 2;
    }
  }
  throw createFilterError('unterminated string', start);
}
