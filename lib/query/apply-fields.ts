import type { ExcerptOption, FieldSelection } from './parse-fields.js';
import { presentHighlight } from './search.js';

/**
 * Projects one record (or any JSON value) through a `fields` selection, returning a new value.
 * Arrays are projected item by item, which is how `expand.comments.title` reaches every expanded
 * comment; a list response applies this to each item and keeps its paging keys itself.
 */
export function applyFields<T>(value: T, selection: FieldSelection | undefined): T {
  if (!selection) return value;
  return project(value, selection) as T;
}

function project(value: unknown, node: FieldSelection): unknown {
  if (Array.isArray(value)) return value.map((item) => project(item, node));
  if (typeof value === 'string' && node.highlight) return presentHighlight(value);
  if (typeof value === 'string' && node.excerpt) return excerpt(value, node.excerpt);
  if (value === null || typeof value !== 'object' || value instanceof Date) return value;
  const includes = [...node.children.values()].some((child) => child.included);
  const showAll = node.star || node.leaf || !includes;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
    if (node.excluded.has(key)) continue;
    const child = node.children.get(key);
    if (child && (showAll || child.included)) setOwn(out, key, project(item, child));
    else if (showAll) setOwn(out, key, item);
  }
  return out;
}

/** Plain assignment would turn a `__proto__` key into a prototype change. */
function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * Most steps `:excerpt` takes through a value, a step being one character or one whole tag (its
 * `>` is found by a native search, however far); what lies beyond is ignored. Keeps one excerpt
 * around a millisecond at worst whatever the value, since a list may ask for one per record.
 */
export const MAX_EXCERPT_STEPS = 100_000;

/**
 * Plain-text excerpt: tags (`<` up to the next `>`) stripped, whitespace collapsed, cut to `max`
 * characters (code points, so no half emoji), with `...` appended when cut and asked for. A
 * single forward scan: each character is visited once (the search for a tag's `>` runs once per
 * tag and gives up for good when there is none, where a `<` stays as text), and the scan stops as
 * soon as `max + 1` characters are out, or after MAX_EXCERPT_STEPS, so neither `"<" x 100000`
 * nor a huge value costs more than a bounded walk.
 */
export function excerpt(text: string, option: ExcerptOption): string {
  const end = text.length;
  const out: string[] = [];
  let steps = 0;
  let tagsEnded = false; // no '>' is left after some '<': every later '<' is text
  let pendingSpace = false;
  let i = 0;
  while (i < end && out.length <= option.max && steps++ < MAX_EXCERPT_STEPS) {
    const code = text.charCodeAt(i);
    if (code === 0x3c /* < */ && !tagsEnded) {
      const close = text.indexOf('>', i + 1);
      if (close !== -1) {
        // A tag separates words like whitespace does.
        pendingSpace = out.length > 0;
        i = close + 1;
        continue;
      }
      tagsEnded = true;
    }
    if (isWhitespace(code)) {
      pendingSpace = out.length > 0;
      i++;
      continue;
    }
    if (pendingSpace) {
      out.push(' ');
      pendingSpace = false;
      if (out.length > option.max) break;
    }
    const point = text.codePointAt(i)!;
    const char = String.fromCodePoint(point);
    out.push(char);
    i += char.length;
  }
  if (out.length <= option.max) return out.join('');
  const cut = out.slice(0, option.max).join('').trimEnd();
  return option.ellipsis ? cut + '...' : cut;
}

/** The characters `\s` matches in a regular expression (ECMAScript WhiteSpace and LineTerminator). */
function isWhitespace(code: number): boolean {
  if (code <= 0x20) return code === 0x20 || (code >= 0x09 && code <= 0x0d);
  if (code < 0xa0) return false;
  return code === 0xa0 || code === 0x1680 || (code >= 0x2000 && code <= 0x200a) || code === 0x2028 || code === 0x2029
    || code === 0x202f || code === 0x205f || code === 0x3000 || code === 0xfeff;
}
