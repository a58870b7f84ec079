import { BadRequestError } from '../errors.js';

/** `:excerpt(n, ellipsis)`: plain text of an HTML-ish value, cut to `max` characters. */
export interface ExcerptOption {
  readonly max: number;
  readonly ellipsis: boolean;
}

/**
 * One level of a `fields` selection. A level shows every key when `star` is set, when it was
 * named whole (`leaf`), or when nothing below it was explicitly included (only exclusions);
 * otherwise only its included children.
 */
export interface FieldSelection {
  star: boolean;
  leaf: boolean;
  /** Whether an include path (not only an exclusion) reaches this node. */
  included: boolean;
  excerpt?: ExcerptOption;
  /** `:highlight` (docs/search.md): a list's search matches marked, the text HTML-escaped. Top-level fields only. */
  highlight?: boolean;
  readonly children: Map<string, FieldSelection>;
  readonly excluded: Set<string>;
}

/** Most comma-separated entries read from `fields`; the rest are ignored. */
export const MAX_FIELDS_ENTRIES = 100;
/** Deepest dotted path read (expand nesting is 6; this leaves room for `expand.` and the field). */
export const MAX_FIELDS_DEPTH = 16;

const EXCERPT = /^excerpt\(\s*(\d+)\s*(?:,\s*(true|false)\s*)?\)$/;

function createNode(): FieldSelection {
  return { star: false, leaf: false, included: false, children: new Map(), excluded: new Set() };
}

/**
 * Parses the `fields` parameter into a selection tree, or undefined when it selects everything
 * (absent or blank). Unknown names are kept and simply match nothing later; only a malformed
 * modifier is an error, since silently ignoring it would return something the caller did not ask for.
 */
export function parseFields(param: string | undefined | null): FieldSelection | undefined {
  if (typeof param !== 'string' || param.trim() === '') return undefined;
  const root = createNode();
  const entries = splitTopLevel(param).slice(0, MAX_FIELDS_ENTRIES);
  let any = false;
  for (const rawEntry of entries) {
    const entry = rawEntry.trim();
    if (entry === '' || entry === '-') continue;
    const exclude = entry.startsWith('-');
    const body = exclude ? entry.slice(1) : entry;
    const colon = body.indexOf(':');
    const path = colon === -1 ? body : body.slice(0, colon);
    const modifier = colon === -1 ? undefined : body.slice(colon + 1).trim();
    const segments = path.split('.').map((s) => s.trim());
    if (segments.length > MAX_FIELDS_DEPTH || segments.some((s) => s === '')) continue;
    any = true;
    let node = root;
    for (let i = 0; i < segments.length - 1; i++) {
      if (!exclude) node.included = true;
      let child = node.children.get(segments[i]);
      if (!child) {
        child = createNode();
        node.children.set(segments[i], child);
      }
      node = child;
    }
    const last = segments[segments.length - 1];
    if (exclude) {
      node.excluded.add(last);
      continue;
    }
    node.included = true;
    if (last === '*') {
      node.star = true;
      continue;
    }
    let leaf = node.children.get(last);
    if (!leaf) {
      leaf = createNode();
      node.children.set(last, leaf);
    }
    leaf.leaf = true;
    leaf.included = true;
    if (modifier === 'highlight') {
      // Only a list's own records are searched: a relation's field has nothing to mark.
      if (segments.length > 1) throw createFieldsError(`":highlight" applies to the listed records' own fields, not ${JSON.stringify(body.slice(0, 60))}`);
      leaf.highlight = true;
    } else if (modifier !== undefined) leaf.excerpt = parseExcerpt(modifier, body);
  }
  return any ? root : undefined;
}

/** Splits on commas outside parentheses, so `body:excerpt(200,true)` stays one entry. */
function splitTopLevel(param: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < param.length; i++) {
    const c = param[i];
    if (c === '(') depth++;
    else if (c === ')') depth = Math.max(0, depth - 1);
    else if (c === ',' && depth === 0) {
      out.push(param.slice(start, i));
      start = i + 1;
      if (out.length > MAX_FIELDS_ENTRIES) return out;
    }
  }
  out.push(param.slice(start));
  return out;
}

function createFieldsError(what: string): BadRequestError {
  return new BadRequestError(`Invalid fields: ${what}.`, 'invalid_fields');
}

function parseExcerpt(modifier: string, entry: string): ExcerptOption {
  const m = EXCERPT.exec(modifier);
  const max = m ? Number(m[1]) : NaN;
  if (!m || !Number.isSafeInteger(max) || max < 1) {
    throw createFieldsError(`unsupported modifier in ${JSON.stringify(entry.slice(0, 60))} (expected ":excerpt(n)", ":excerpt(n,true)" or ":highlight")`);
  }
  return { max, ellipsis: m[2] === 'true' };
}
