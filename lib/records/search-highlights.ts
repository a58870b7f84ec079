import { RECORD_ALIAS, type RecordStore, type RecordValues } from '../db/record-store.js';
import { excerpt } from '../query/apply-fields.js';
import { highlightColumnSql, MAX_HIGHLIGHT_CHARACTERS, renderHighlight, cutText } from '../query/search.js';
import type { CollectionSchema } from '../schema/collection-schema.js';
import { joinSql, rawSql, type SqlFragment } from '../sql-fragment.js';

/** An editor field's text as `:excerpt` reads it (tags out, whitespace collapsed), never longer than it was. */
function stripTags(text: string): string {
  return excerpt(text, { max: MAX_HIGHLIGHT_CHARACTERS, ellipsis: false });
}

const KEEP_TAGS = (text: string) => text;

/**
 * Replaces, on the page's records, each field of `fields` that the search index covers by its
 * highlighted text (lib/query/search.ts renderHighlight): ts_headline in one statement over the
 * page's ids when there is a search (`query`), the text as it is otherwise. Only the search
 * index's fields: none is hidden or guarded by a view rule (the schema check refuses it), so a
 * highlight never reads what the caller could not; other fields are escaped by apply-fields.
 */
export async function highlightRecords(options: { store: RecordStore; collection: CollectionSchema; items: RecordValues[]; fields: readonly string[]; query: SqlFragment | undefined }): Promise<void> {
  const { collection, items } = options;
  const searched = new Set(collection.search?.columns ?? []);
  const fields = options.fields.map((name) => collection.field(name)).filter((f) => f !== undefined && searched.has(f.column));
  if (fields.length === 0 || items.length === 0) return;
  let marked: Map<string, Record<string, unknown>> | undefined;
  if (options.query) {
    const columns = joinSql(
      fields.map((f, i) => {
        const column = highlightColumnSql(collection, f!.column, options.query!, RECORD_ALIAS);
        return { sql: `${column.sql} AS ${rawSql(`"h${i}"`).sql}`, bindings: column.bindings };
      }),
      ', ',
    );
    const rows = await options.store.selectColumnsByIds(collection, items.map((item) => String(item.id)), columns);
    marked = new Map(rows.map((row) => [String(row.id), row]));
  }
  for (const item of items) {
    fields.forEach((f, i) => {
      const value = item[f!.name];
      if (typeof value !== 'string') return;
      const text = marked ? marked.get(String(item.id))?.[`h${i}`] : cutText(value, MAX_HIGHLIGHT_CHARACTERS);
      if (typeof text !== 'string') return;
      item[f!.name] = renderHighlight(text, { stripTags: f!.type === 'editor' ? stripTags : KEEP_TAGS });
    });
  }
}
