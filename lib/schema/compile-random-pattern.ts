/**
 * Random strings from a regular expression, for a text field's `autogeneratePattern` (after
 * PocketBase's `security.RandomStringByRegex`): `[a-z0-9]{15}`, `post-[0-9]{4}`, `(ab|cd)+`.
 *
 * The pattern is the host's, checked once when the router is created; what it may produce is
 * bounded there (at most MAX_GENERATED_LENGTH characters, a pattern of at most
 * MAX_PATTERN_LENGTH characters nested at most MAX_PATTERN_DEPTH deep), so a write never builds
 * more than that. The syntax is the part of RE2/Perl syntax that describes text: literals and
 * escapes, `.`, classes (`[a-z_]`, `[^...]`, `\d`, `\w`, `\s`, `[[:alpha:]]`), groups (`(...)`,
 * `(?:...)`, `(?P<name>...)`), `|`, and the quantifiers `?`, `*`, `+`, `{n}`, `{n,}`, `{n,m}`
 * (lazy forms too). Anchors and word boundaries produce nothing. An unbounded quantifier repeats
 * up to 6 times (PocketBase's bound), or its minimum when that is larger; lengths are drawn
 * uniformly between the bounds, inclusive. `.` and negated classes draw from printable ASCII.
 * Randomness comes from `crypto.randomInt`.
 */
import { randomInt } from 'node:crypto';

/** The longest pattern accepted. */
export const MAX_PATTERN_LENGTH = 1000;
/** The most characters a pattern may produce. */
export const MAX_GENERATED_LENGTH = 5000;
/** The deepest nesting of groups. */
export const MAX_PATTERN_DEPTH = 50;
/** The largest count a quantifier may name (RE2's). */
const MAX_REPEAT = 1000;
/** How often an unbounded quantifier repeats at most (PocketBase's defaultMaxRepeat). */
const UNBOUNDED_REPEAT = 6;

/** Inclusive code point ranges. */
type Ranges = readonly (readonly [number, number])[];

type PatternNode =
  | { readonly kind: 'literal'; readonly text: string }
  | { readonly kind: 'class'; readonly ranges: Ranges; readonly size: number }
  | { readonly kind: 'concat'; readonly items: readonly PatternNode[] }
  | { readonly kind: 'alternate'; readonly options: readonly PatternNode[] }
  | { readonly kind: 'repeat'; readonly node: PatternNode; readonly min: number; readonly max: number };

/** A compiled pattern: what it may produce at most, and a fresh random match each call. */
export interface RandomPattern {
  readonly maxLength: number;
  generate(): string;
}

const DIGIT: Ranges = [[0x30, 0x39]];
const WORD: Ranges = [[0x30, 0x39], [0x41, 0x5a], [0x5f, 0x5f], [0x61, 0x7a]];
const SPACE: Ranges = [[0x09, 0x0a], [0x0c, 0x0d], [0x20, 0x20]];
/** `.` draws letters and digits, as PocketBase's generator does. */
const ANY: Ranges = [[0x30, 0x39], [0x41, 0x5a], [0x61, 0x7a]];
const PRINTABLE: readonly [number, number] = [0x20, 0x7e];
const POSIX_CLASSES: Readonly<Record<string, Ranges>> = {
  alnum: [[0x30, 0x39], [0x41, 0x5a], [0x61, 0x7a]],
  alpha: [[0x41, 0x5a], [0x61, 0x7a]],
  digit: DIGIT,
  lower: [[0x61, 0x7a]],
  upper: [[0x41, 0x5a]],
  xdigit: [[0x30, 0x39], [0x41, 0x46], [0x61, 0x66]],
  word: WORD,
  space: SPACE,
};
/** Escapes that stand for one control character. */
const CONTROL_ESCAPES: Readonly<Record<string, number>> = { n: 0x0a, t: 0x09, r: 0x0d, f: 0x0c, v: 0x0b, a: 0x07 };
/** Zero-width assertions: they match a position, so they produce nothing. */
const ZERO_WIDTH_ESCAPES = new Set(['b', 'B', 'A', 'z']);

/** A pattern the generator cannot use, with the position (0-based) where it stopped. */
export class RandomPatternError extends Error {}

/** Merges overlapping ranges and counts their code points. */
function normalizeRanges(ranges: Ranges): { ranges: Ranges; size: number } {
  const sorted = [...ranges].sort((a, b) => a[0] - b[0]);
  const out: [number, number][] = [];
  for (const [lo, hi] of sorted) {
    const last = out[out.length - 1];
    if (last && lo <= last[1] + 1) last[1] = Math.max(last[1], hi);
    else out.push([lo, hi]);
  }
  return { ranges: out, size: out.reduce((n, [lo, hi]) => n + hi - lo + 1, 0) };
}

/** Printable ASCII minus `ranges`: what a negated class draws from. */
function complementPrintable(ranges: Ranges): Ranges {
  const out: [number, number][] = [];
  let next = PRINTABLE[0];
  for (const [lo, hi] of normalizeRanges(ranges).ranges) {
    if (hi < next) continue;
    if (lo > PRINTABLE[1]) break;
    if (lo > next) out.push([next, lo - 1]);
    next = Math.max(next, hi + 1);
  }
  if (next <= PRINTABLE[1]) out.push([next, PRINTABLE[1]]);
  return out;
}

function classNode(ranges: Ranges): PatternNode {
  return { kind: 'class', ...normalizeRanges(ranges) };
}

/** A recursive-descent reader of the pattern, by code point. */
class PatternParser {
  private pos = 0;
  private depth = 0;
  private readonly chars: string[];

  constructor(pattern: string) {
    this.chars = [...pattern];
  }

  parse(): PatternNode {
    const node = this.parseAlternation();
    if (this.pos < this.chars.length) throw this.fail(`unexpected "${this.chars[this.pos]}"`);
    return node;
  }

  private fail(what: string): RandomPatternError {
    return new RandomPatternError(`${what} at position ${this.pos}`);
  }

  private peek(): string | undefined {
    return this.chars[this.pos];
  }

  private parseAlternation(): PatternNode {
    const options = [this.parseConcat()];
    while (this.peek() === '|') {
      this.pos++;
      options.push(this.parseConcat());
    }
    return options.length === 1 ? options[0]! : { kind: 'alternate', options };
  }

  private parseConcat(): PatternNode {
    const items: PatternNode[] = [];
    for (let c = this.peek(); c !== undefined && c !== '|' && c !== ')'; c = this.peek()) {
      const atom = this.parseAtom();
      if (atom !== undefined) items.push(this.parseQuantifier(atom));
      else if (this.peek() !== undefined && '*+?'.includes(this.peek()!)) throw this.fail('a quantifier with nothing to repeat');
    }
    return items.length === 1 ? items[0]! : { kind: 'concat', items };
  }

  /** One atom, or undefined for an anchor (which produces nothing and takes no quantifier). */
  private parseAtom(): PatternNode | undefined {
    const c = this.chars[this.pos++]!;
    switch (c) {
      case '^':
      case '$':
        return undefined;
      case '.':
        return classNode(ANY);
      case '[':
        return this.parseClass();
      case '(':
        return this.parseGroup();
      case '\\': {
        const escaped = this.parseEscape(false);
        if (escaped === undefined) return undefined;
        return typeof escaped === 'number' ? { kind: 'literal', text: String.fromCodePoint(escaped) } : classNode(escaped);
      }
      case '*':
      case '+':
      case '?':
        this.pos--;
        throw this.fail('a quantifier with nothing to repeat');
      default:
        return { kind: 'literal', text: c };
    }
  }

  private parseGroup(): PatternNode {
    if (++this.depth > MAX_PATTERN_DEPTH) throw this.fail(`groups nested more than ${MAX_PATTERN_DEPTH} deep`);
    if (this.peek() === '?') {
      this.pos++;
      const kind = this.chars[this.pos++];
      if (kind === 'P' || kind === '<') {
        if (kind === 'P' && this.chars[this.pos++] !== '<') throw this.fail('a group name must follow (?P<');
        while (this.peek() !== undefined && this.peek() !== '>') {
          if (!/\w/.test(this.peek()!)) throw this.fail('a group name may hold letters, digits and _ only');
          this.pos++;
        }
        if (this.chars[this.pos++] !== '>') throw this.fail('unterminated group name');
      } else if (kind !== ':') {
        this.pos--;
        throw this.fail('flags and look-around are not supported');
      }
    }
    const node = this.parseAlternation();
    if (this.chars[this.pos++] !== ')') throw this.fail('missing )');
    this.depth--;
    return node;
  }

  /**
   * After a `\`: a code point for a literal, ranges for a class escape, undefined for a
   * zero-width assertion (only outside a class).
   */
  private parseEscape(inClass: boolean): number | Ranges | undefined {
    const c = this.chars[this.pos++];
    if (c === undefined) throw this.fail('a pattern cannot end with \\');
    if (c === 'd') return DIGIT;
    if (c === 'w') return WORD;
    if (c === 's') return SPACE;
    if (c === 'D' || c === 'W' || c === 'S') return complementPrintable(c === 'D' ? DIGIT : c === 'W' ? WORD : SPACE);
    if (Object.hasOwn(CONTROL_ESCAPES, c)) return CONTROL_ESCAPES[c];
    if (!inClass && ZERO_WIDTH_ESCAPES.has(c)) return undefined;
    if (c === 'x') return this.parseHexEscape();
    if (/[A-Za-z0-9]/.test(c)) throw this.fail(`unsupported escape \\${c}`);
    return c.codePointAt(0)!;
  }

  private parseHexEscape(): number {
    let digits = '';
    if (this.peek() === '{') {
      this.pos++;
      while (this.peek() !== undefined && this.peek() !== '}' && digits.length <= 6) digits += this.chars[this.pos++];
      if (this.chars[this.pos++] !== '}') throw this.fail('unterminated \\x{...}');
    } else {
      digits = (this.chars[this.pos] ?? '') + (this.chars[this.pos + 1] ?? '');
      this.pos += 2;
    }
    const code = /^[0-9A-Fa-f]{1,6}$/.test(digits) ? parseInt(digits, 16) : NaN;
    if (!(code <= 0x10ffff) || (code >= 0xd800 && code <= 0xdfff)) throw this.fail('invalid \\x escape');
    return code;
  }

  private parseClass(): PatternNode {
    const negated = this.peek() === '^';
    if (negated) this.pos++;
    const ranges: [number, number][] = [];
    let first = true;
    for (;;) {
      const c = this.chars[this.pos++];
      if (c === undefined) throw this.fail('missing ]');
      if (c === ']' && !first) break;
      first = false;
      if (c === '[' && this.peek() === ':') {
        const end = this.chars.indexOf(']', this.pos);
        const name = end > 0 ? this.chars.slice(this.pos + 1, end).join('') : '';
        const match = /^(\^?)(\w+):$/.exec(name);
        const posix = match ? POSIX_CLASSES[match[2]!] : undefined;
        if (!match || !posix) throw this.fail(`unknown class [${name}]`);
        ranges.push(...(match[1] === '^' ? complementPrintable(posix) : posix).map(([lo, hi]) => [lo, hi] as [number, number]));
        this.pos = end + 1;
        continue;
      }
      let lo: number;
      if (c === '\\') {
        const escaped = this.parseEscape(true);
        if (typeof escaped !== 'number') {
          ranges.push(...(escaped ?? []).map(([a, b]) => [a, b] as [number, number]));
          continue;
        }
        lo = escaped;
      } else {
        lo = c.codePointAt(0)!;
      }
      let hi = lo;
      if (this.peek() === '-' && this.chars[this.pos + 1] !== undefined && this.chars[this.pos + 1] !== ']') {
        this.pos++;
        const d = this.chars[this.pos++]!;
        if (d === '\\') {
          const escaped = this.parseEscape(true);
          if (typeof escaped !== 'number') throw this.fail('a range cannot end with a class');
          hi = escaped;
        } else {
          hi = d.codePointAt(0)!;
        }
        if (hi < lo) throw this.fail('a range runs backwards');
      }
      ranges.push([lo, hi]);
    }
    const node = classNode(negated ? complementPrintable(ranges) : ranges);
    if (node.kind === 'class' && node.size === 0) throw this.fail('a class that matches nothing');
    return node;
  }

  private parseQuantifier(atom: PatternNode): PatternNode {
    let node = atom;
    for (;;) {
      const c = this.peek();
      let bounds: [number, number] | undefined;
      if (c === '*') bounds = [0, -1];
      else if (c === '+') bounds = [1, -1];
      else if (c === '?') bounds = [0, 1];
      else if (c === '{') bounds = this.readBraces();
      if (bounds === undefined) return node;
      if (c !== '{') this.pos++;
      if (this.peek() === '?') this.pos++; // lazy: the same strings
      const [min, max] = bounds;
      node = { kind: 'repeat', node, min, max: max < 0 ? Math.max(UNBOUNDED_REPEAT, min) : max };
      if (this.peek() !== undefined && '*+?'.includes(this.peek()!)) throw this.fail('a quantifier cannot follow another');
    }
  }

  /** `{n}`, `{n,}`, `{n,m}`; undefined when the brace is a literal (RE2 reads `{x` so). */
  private readBraces(): [number, number] | undefined {
    const rest = this.chars.slice(this.pos, this.pos + 16).join('');
    const match = /^\{(\d+)(,(\d*))?\}/.exec(rest);
    if (!match) return undefined;
    const min = Number(match[1]);
    const max = match[2] === undefined ? min : match[3] === '' ? -1 : Number(match[3]);
    if (min > MAX_REPEAT || max > MAX_REPEAT) throw this.fail(`a count over ${MAX_REPEAT}`);
    if (max >= 0 && max < min) throw this.fail('a count range runs backwards');
    this.pos += match[0].length;
    return [min, max];
  }
}

/** The most characters a node may produce. */
function measure(node: PatternNode): number {
  switch (node.kind) {
    case 'literal':
      return [...node.text].length;
    case 'class':
      return 1;
    case 'concat':
      return node.items.reduce((n, item) => n + measure(item), 0);
    case 'alternate':
      return Math.max(...node.options.map(measure));
    case 'repeat':
      return node.max * measure(node.node);
  }
}

function pickFromRanges(ranges: Ranges, size: number): string {
  let index = randomInt(size);
  for (const [lo, hi] of ranges) {
    const span = hi - lo + 1;
    if (index < span) return String.fromCodePoint(lo + index);
    index -= span;
  }
  return '';
}

function write(node: PatternNode, out: string[]): void {
  switch (node.kind) {
    case 'literal':
      out.push(node.text);
      return;
    case 'class':
      out.push(pickFromRanges(node.ranges, node.size));
      return;
    case 'concat':
      for (const item of node.items) write(item, out);
      return;
    case 'alternate':
      write(node.options[randomInt(node.options.length)]!, out);
      return;
    case 'repeat': {
      const count = node.min === node.max ? node.min : node.min + randomInt(node.max - node.min + 1);
      for (let i = 0; i < count; i++) write(node.node, out);
      return;
    }
  }
}

/**
 * Compiles a pattern, or throws RandomPatternError saying what and where. Call it once (when the
 * router is created); `generate()` then only walks the compiled tree.
 */
export function compileRandomPattern(pattern: string): RandomPattern {
  if (pattern.length > MAX_PATTERN_LENGTH) throw new RandomPatternError(`longer than ${MAX_PATTERN_LENGTH} characters`);
  const root = new PatternParser(pattern).parse();
  const maxLength = measure(root);
  if (maxLength > MAX_GENERATED_LENGTH) throw new RandomPatternError(`may produce up to ${maxLength} characters, more than ${MAX_GENERATED_LENGTH}`);
  return {
    maxLength,
    generate() {
      const out: string[] = [];
      write(root, out);
      return out.join('');
    },
  };
}
