import { FILTER_FUNCTIONS, type CompareOperator, type ComparisonNode, type FilterFunctionName, type FilterNode, type FilterOperand, type FunctionArgument, type FunctionOperand } from './filter-ast.js';
import { createFilterError, quoteForMessage } from './filter-error.js';
import { tokenizeFilter, type FilterToken } from './filter-lexer.js';
import { LruCache } from './lru-cache.js';

/** Longest filter accepted, in characters (docs/query-language.md). */
export const MAX_FILTER_LENGTH = 3500;
/** Most comparisons one filter may hold. */
export const MAX_FILTER_COMPARISONS = 200;
/** Deepest parenthesis nesting; bounds recursion so no input can overflow the stack. */
export const MAX_FILTER_DEPTH = 50;

/**
 * Parses a filter (or rule) into its AST. Total: any string yields an AST or a BadRequestError
 * with code `invalid_filter`, in time linear in its length. `""` is an empty `and` (no condition);
 * text holding only whitespace or comments is refused as PocketBase refuses an empty expression:
 * whoever wrote `// only owners` meant a condition, and matching everything would betray it.
 */
export function parseFilter(input: string): FilterNode {
  if (typeof input !== 'string') throw createFilterError('the filter must be a string');
  if (input.length > MAX_FILTER_LENGTH) {
    throw createFilterError(`too long (${input.length} characters; at most ${MAX_FILTER_LENGTH})`);
  }
  const parser = new Parser(tokenizeFilter(input));
  if (parser.peek().kind === 'eof') {
    if (input === '') return { type: 'and', items: [], pos: 0 };
    throw createFilterError(BLANK_EXPRESSION);
  }
  const node = parser.parseOr(0);
  const rest = parser.peek();
  if (rest.kind !== 'eof') throw createFilterError(`unexpected ${describe(rest)}`, rest.pos);
  return node;
}

/** What a filter of only whitespace or comments is told (PocketBase: "empty filter expression"). */
const BLANK_EXPRESSION = 'empty expression (only whitespace or comments); send no filter at all to match every record';

/** Whether `input` is not `""` but holds only whitespace or comments: a filter parseFilter refuses, a rule checkCollectionRules refuses. */
export function isBlankFilter(input: string): boolean {
  if (input === '' || input.length > MAX_FILTER_LENGTH) return false;
  try {
    return tokenizeFilter(input)[0]!.kind === 'eof';
  } catch {
    return false;
  }
}

const cache = new LruCache<string, FilterNode>(500);

/**
 * parseFilter behind an LRU cache, so repeated filters and rules skip lexing and parsing.
 * Only successes are cached; the AST is shared, hence immutable.
 */
export function parseFilterCached(input: string): FilterNode {
  const hit = cache.get(input);
  if (hit) return hit;
  const node = parseFilter(input);
  cache.set(input, node);
  return node;
}

function describe(token: FilterToken): string {
  return token.kind === 'eof' ? 'end of filter' : quoteForMessage(token.text);
}

class Parser {
  private index = 0;
  private comparisons = 0;

  constructor(private readonly tokens: FilterToken[]) {}

  peek(): FilterToken {
    return this.tokens[this.index];
  }

  private next(): FilterToken {
    const token = this.tokens[this.index];
    if (token.kind !== 'eof') this.index++;
    return token;
  }

  parseOr(depth: number): FilterNode {
    const first = this.parseAnd(depth);
    const items = [first];
    while (this.peek().kind === 'or') {
      this.next();
      items.push(this.parseAnd(depth));
    }
    return items.length === 1 ? first : { type: 'or', items, pos: first.pos };
  }

  private parseAnd(depth: number): FilterNode {
    const first = this.parsePrimary(depth);
    const items = [first];
    while (this.peek().kind === 'and') {
      this.next();
      items.push(this.parsePrimary(depth));
    }
    return items.length === 1 ? first : { type: 'and', items, pos: first.pos };
  }

  private parsePrimary(depth: number): FilterNode {
    const token = this.peek();
    if (token.kind === 'lparen') {
      if (depth >= MAX_FILTER_DEPTH) throw createFilterError(`parentheses nested deeper than ${MAX_FILTER_DEPTH} levels`, token.pos);
      this.next();
      if (this.peek().kind === 'rparen') throw createFilterError('empty parentheses', token.pos);
      const inner = this.parseOr(depth + 1);
      const close = this.next();
      if (close.kind !== 'rparen') throw createFilterError(`expected ")" but found ${describe(close)}`, close.pos);
      return inner;
    }
    return this.parseComparison();
  }

  private parseComparison(): ComparisonNode {
    const left = this.parseOperand();
    const opToken = this.next();
    if (opToken.kind !== 'operator') {
      throw createFilterError(`expected an operator after ${quoteForMessage(leftText(left))} but found ${describe(opToken)}`, opToken.pos);
    }
    const right = this.parseOperand();
    this.comparisons++;
    if (this.comparisons > MAX_FILTER_COMPARISONS) {
      throw createFilterError(`too many comparisons (at most ${MAX_FILTER_COMPARISONS})`, left.pos);
    }
    const anyOf = opToken.text.startsWith('?');
    const operator = (anyOf ? opToken.text.slice(1) : opToken.text) as CompareOperator;
    return { type: 'comparison', operator, anyOf, left, right, pos: left.pos };
  }

  private parseOperand(): FilterOperand {
    const token = this.peek();
    if (token.kind === 'identifier' && this.tokens[this.index + 1]?.kind === 'lparen') return this.parseFunctionCall();
    return this.parseValue();
  }

  /** A literal or a name: a comparison side, or a function's argument. */
  private parseValue(): FunctionArgument {
    const token = this.next();
    switch (token.kind) {
      case 'string':
        return { type: 'literal', value: token.value as string, pos: token.pos };
      case 'number':
        if (!Number.isFinite(token.value)) throw createFilterError(`number out of range ${quoteForMessage(token.text)}`, token.pos);
        return { type: 'literal', value: token.value as number, pos: token.pos };
      case 'identifier':
        if (this.peek().kind === 'lparen') throw createFilterError(`a function's argument cannot be a function call (${quoteForMessage(token.text)})`, token.pos);
        return parseIdentifier(token);
      default:
        throw createFilterError(`unexpected ${describe(token)}`, token.pos);
    }
  }

  /**
   * `name(arg, ...)`: a known function and its arguments, within its count (FILTER_FUNCTIONS), so
   * no argument list grows past what the function reads.
   */
  private parseFunctionCall(): FunctionOperand {
    const nameToken = this.next();
    if (!Object.hasOwn(FILTER_FUNCTIONS, nameToken.text)) {
      throw createFilterError(`unknown function ${quoteForMessage(nameToken.text)} (the functions are ${Object.keys(FILTER_FUNCTIONS).join(' and ')})`, nameToken.pos);
    }
    const name = nameToken.text as FilterFunctionName;
    const { minArgs, maxArgs }: { minArgs: number; maxArgs: number } = FILTER_FUNCTIONS[name];
    this.next(); // the "("
    const args: FunctionArgument[] = [];
    if (this.peek().kind !== 'rparen') {
      for (;;) {
        if (args.length === maxArgs) throw createFilterError(`${name}() takes at most ${maxArgs} argument${maxArgs === 1 ? '' : 's'}`, this.peek().pos);
        args.push(this.parseValue());
        const separator = this.next();
        if (separator.kind === 'rparen') break;
        if (separator.kind !== 'comma') throw createFilterError(`expected "," or ")" in ${name}() but found ${describe(separator)}`, separator.pos);
      }
    } else this.next();
    if (args.length < minArgs) throw createFilterError(`${name}() takes ${minArgs === maxArgs ? minArgs : `at least ${minArgs}`} argument${minArgs === 1 ? '' : 's'}, not ${args.length}`, nameToken.pos);
    return { type: 'function', name, args, pos: nameToken.pos };
  }
}

function leftText(operand: FilterOperand): string {
  if (operand.type === 'literal') return String(operand.value);
  if (operand.type === 'function') return `${operand.name}(...)`;
  return operand.modifier ? `${operand.name}:${operand.modifier}` : operand.name;
}

function parseIdentifier(token: FilterToken): FunctionArgument {
  const text = token.text;
  if (text === 'true' || text === 'false') return { type: 'literal', value: text === 'true', pos: token.pos };
  if (text === 'null') return { type: 'literal', value: null, pos: token.pos };
  const lastDot = text.lastIndexOf('.');
  const colon = text.indexOf(':', lastDot + 1);
  const name = colon === -1 ? text : text.slice(0, colon);
  const modifier = colon === -1 ? undefined : text.slice(colon + 1);
  if (modifier !== undefined && !/^[a-z]+$/.test(modifier)) {
    throw createFilterError(`invalid modifier in ${quoteForMessage(text)}`, token.pos + colon);
  }
  const segments = name.split('.');
  segments.forEach((segment, i) => {
    const okSegment = /^@?[A-Za-z_][A-Za-z0-9_]*$/.test(segment) || (i === 1 && segments[0] === '@collection' && /^[A-Za-z_][A-Za-z0-9_]*:[A-Za-z_][A-Za-z0-9_]*$/.test(segment));
    if (!okSegment || (i > 0 && segment.startsWith('@'))) {
      throw createFilterError(`invalid name ${quoteForMessage(text)}`, token.pos);
    }
  });
  return { type: 'identifier', name, segments, modifier, pos: token.pos };
}
