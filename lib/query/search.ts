import { BadRequestError } from '../errors.js';
import type { CollectionSchema } from '../schema/collection-schema.js';
import { searchColumnSql } from '../schema/plan-migration.js';
import { quoteIdent, sql, type SqlFragment } from '../sql-fragment.js';
import type { FieldSelection } from './parse-fields.js';

/** Most characters of a `search` parameter (docs/search.md): a longer one is a 400. */
export const MAX_SEARCH_LENGTH = 1000;

/**
 * Characters of a field that `:highlight` marks and returns (docs/search.md): ts_headline reads
 * the whole text it is given, once per record of the page, so its input is cut to this.
 */
export const MAX_HIGHLIGHT_CHARACTERS = 2_000;

/** A list's search, compiled: the condition a record must meet, and its relevance for `@rank`. */
export interface CompiledSearch {
  readonly match: SqlFragment;
  readonly rank: SqlFragment;
  /** The tsquery alone, for ts_headline. */
  readonly query: SqlFragment;
}

/**
 * Reads a `search` parameter: undefined when absent or blank (no search), a 400 past
 * MAX_SEARCH_LENGTH. NUL, which Postgres text cannot hold, separates words like a space.
 */
export function readSearchParam(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new BadRequestError('Invalid search: expected a string.', 'invalid_search');
  if (value.length > MAX_SEARCH_LENGTH) throw new BadRequestError(`Invalid search: at most ${MAX_SEARCH_LENGTH} characters.`, 'invalid_search');
  const text = value.replaceAll('\u0000', ' ');
  return text.trim() === '' ? undefined : text;
}

/**
 * Compiles a search over the collection's search index: `websearch_to_tsquery`, which reads any
 * text (quotes, `or`, `-word`; other punctuation separates words), so no input is a syntax error.
 * The language is the index's, never the request's; the text is a bound value.
 */
export function compileSearch(collection: CollectionSchema, text: string, alias: string): CompiledSearch {
  const search = collection.search;
  if (!search) {
    throw new BadRequestError(`Invalid search: the collection "${collection.name}" has no search index (docs/search.md).`, 'invalid_search');
  }
  const query = sql`websearch_to_tsquery('${search.language}'::regconfig, ${{ sql: '?::text', bindings: [text] }})`;
  const column = searchColumnSql(search, alias);
  return { match: sql`${column} @@ ${query}`, rank: sql`ts_rank(${column}, ${query})`, query };
}

/** The top-level fields a `fields` selection asks `:highlight` of. */
export function readHighlightedFields(selection: FieldSelection | undefined): string[] {
  if (!selection) return [];
  return [...selection.children].filter(([, node]) => node.highlight === true).map(([name]) => name);
}

/** Where ts_headline puts a match's start and end: private-use characters, removed from the text first, so the text cannot forge a mark. */
export const MARK_START = '\uE000';
export const MARK_END = '\uE001';

/**
 * Starts a value the list already highlighted (renderHighlight): Postgres text cannot hold NUL,
 * so a stored value never starts with it, and apply-fields knows not to escape it twice.
 */
const HIGHLIGHTED = '\u0000';

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}

/** The first `max` characters of `text`, never half of a surrogate pair. */
export function cutText(text: string, max: number): string {
  if (text.length <= max) return text;
  const code = text.charCodeAt(max - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? max - 1 : max);
}

/**
 * A highlighted value as the response gives it: HTML-escaped, each match (between MARK_START and
 * MARK_END) in `<mark>`, marked as done for apply-fields. `stripTags` first takes an editor
 * field's tags out (its text, as `:excerpt` reads it), since escaped tags are not what a reader sees.
 */
export function renderHighlight(marked: string, options: { stripTags: (text: string) => string }): string {
  return HIGHLIGHTED + escapeHtml(options.stripTags(marked)).replaceAll(MARK_START, '<mark>').replaceAll(MARK_END, '</mark>');
}

/**
 * What `:highlight` shows of a value: the list's rendering as it is, or else (a field outside
 * the search index, a single record) the value's first MAX_HIGHLIGHT_CHARACTERS, HTML-escaped.
 */
export function presentHighlight(value: string): string {
  if (value.startsWith(HIGHLIGHTED)) return value.slice(HIGHLIGHTED.length);
  return escapeHtml(cutText(value, MAX_HIGHLIGHT_CHARACTERS));
}

/**
 * The highlighted text of a search index's field, for the page's records only: ts_headline over
 * the field's first MAX_HIGHLIGHT_CHARACTERS, markers taken out of the text before it runs.
 */
export function highlightColumnSql(collection: CollectionSchema, column: string, query: SqlFragment, alias: string): SqlFragment {
  const language = collection.search!.language;
  const text = `translate(left(coalesce(${quoteIdent(alias)}.${quoteIdent(column)}, ''), ${MAX_HIGHLIGHT_CHARACTERS}), '${MARK_START}${MARK_END}', '')`;
  const options = { sql: '?::text', bindings: [`HighlightAll=true, StartSel="${MARK_START}", StopSel="${MARK_END}"`] };
  return sql`ts_headline('${language}'::regconfig, ${text}, ${query}, ${options})`;
}
