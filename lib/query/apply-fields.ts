import type { ExcerptOption, FieldSelection } from './parse-fields.js';

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
 * Plain-text excerpt: tags stripped, whitespace collapsed, cut to `max` characters (code
 * points, so no half emoji), with `...` appended when cut and asked for.
 */
export function excerpt(text: string, option: ExcerptOption): string {
  const plain = text
    .replace(/<[^>]*>/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  const chars = Array.from(plain);
  if (chars.length <= option.max) return plain;
  const cut = chars.slice(0, option.max).join('').trimEnd();
  return option.ellipsis ? cut + '...' : cut;
}
