/**
 * The relation control: a search box over the target collection (its id and text fields, as
 * PocketBase's picker searches), its results to add, and the picked records, each with a
 * "Remove" button. Picking or removing a record puts the focus back in the search box, since the
 * button that had it is disabled or gone.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { quoteFilterText, type Api, type CollectionInfo, type FieldInfo, type RecordData } from './api.js';
import { html } from './html.js';
import { formatValue, labelField, recordLabel } from './record-label.js';

const RESULTS = 8;
/**
 * What one search sends at most, so that its filter stays within the filter's limits (3,500
 * characters, docs/limits.md): the fields searched, and the characters of the text searched for.
 */
const MAX_SEARCHED_FIELDS = 10;
const MAX_SEARCH_TEXT = 100;
/** The length of the text that names a record without a presentable field beside its id. */
const MAX_HINT = 60;

export interface RelationPickerProps {
  api: Api;
  name: string;
  target: CollectionInfo | undefined;
  /** The target's fields a search looks in (field-kinds.ts, `searchedFields`). */
  searched: FieldInfo[];
  ids: string[];
  /** A single relation holds one id: picking replaces it. */
  multiple: boolean;
  onChange: (ids: string[]) => void;
  describedBy: string;
  invalid: boolean;
}

/** The filter of a search: `text` contained in any searched field (nothing: every record). */
function searchFilter(searched: FieldInfo[], text: string): string {
  const wanted = text.trim().slice(0, MAX_SEARCH_TEXT);
  if (wanted === '') return '';
  return searched
    .slice(0, MAX_SEARCHED_FIELDS)
    .map((f) => `${f.name} ~ ${quoteFilterText(wanted)}`)
    .join(' || ');
}

/**
 * A record as the picker names it: its label; where the target has no presentable field (the
 * label is the id), also the searched text that holds `text`, else the first one not empty, so
 * that a record found by a name shows that name.
 */
function describeRecord(record: RecordData, props: RelationPickerProps, text: string): string {
  const label = recordLabel(record, props.target);
  if (!props.target || labelField(props.target).name !== 'id') return label;
  const values = props.searched.filter((f) => f.name !== 'id').flatMap((f) => {
    const value = formatValue(record[f.name]);
    return value === '' ? [] : [{ name: f.name, value }];
  });
  const wanted = text.trim().toLowerCase();
  const shown = values.find((v) => wanted !== '' && v.value.toLowerCase().includes(wanted)) ?? values[0];
  if (!shown) return label;
  const value = shown.value.length > MAX_HINT ? `${shown.value.slice(0, MAX_HINT)}…` : shown.value;
  return `${label} (${shown.name}: ${value})`;
}

export function RelationPicker(props: RelationPickerProps) {
  const { api, target, ids } = props;
  const [query, setQuery] = useState('');
  const [results, setResults] = useState<RecordData[]>([]);
  const [labels, setLabels] = useState<Record<string, string>>({});
  const [error, setError] = useState('');
  const input = useRef<HTMLInputElement>(null);
  // Answers may come back out of order while the user types: only the last search's is shown.
  const lastSearch = useRef(0);

  // The labels of the records already picked, fetched once per set of ids.
  useEffect(() => {
    const missing = ids.filter((id) => labels[id] === undefined);
    if (!target || missing.length === 0) return;
    const filter = missing.map((id) => `id = ${quoteFilterText(id)}`).join(' || ');
    api
      .list(target.name, { perPage: missing.length, filter })
      .then((page) => setLabels((known) => ({ ...known, ...Object.fromEntries(page.items.map((r) => [r.id, describeRecord(r, props, '')])) })))
      .catch(() => undefined);
  }, [ids.join(',')]);

  const search = async (text: string) => {
    setQuery(text);
    if (!target) return;
    const mine = ++lastSearch.current;
    try {
      const page = await api.list(target.name, { perPage: RESULTS, filter: searchFilter(props.searched, text) });
      if (mine !== lastSearch.current) return;
      setResults(page.items);
      setError('');
    } catch (err) {
      if (mine === lastSearch.current) setError((err as Error).message);
    }
  };
  const pick = (record: RecordData) => {
    setLabels((known) => ({ ...known, [record.id]: describeRecord(record, props, query) }));
    props.onChange(props.multiple ? [...ids.filter((id) => id !== record.id), record.id] : [record.id]);
    input.current?.focus();
  };
  const remove = (id: string) => {
    props.onChange(ids.filter((other) => other !== id));
    input.current?.focus();
  };

  return html`<div class="relation">
    <ul class="picked" aria-label=${`${props.name}: picked`}>
      ${ids.map(
        (id) => html`<li key=${id}>
          <span>${labels[id] ?? id}</span>
          <button type="button" class="small" aria-label=${`Remove ${labels[id] ?? id}`} onClick=${() => remove(id)}>Remove</button>
        </li>`,
      )}
    </ul>
    <input
      ref=${input}
      type="search"
      aria-label=${props.name}
      aria-describedby=${props.describedBy}
      aria-invalid=${props.invalid ? 'true' : undefined}
      placeholder=${`Search ${target?.name ?? ''}`}
      value=${query}
      onInput=${(e: Event) => void search((e.target as HTMLInputElement).value)}
      onFocus=${() => (results.length === 0 ? void search(query) : undefined)}
    />
    ${error && html`<p class="error">${error}</p>`}
    <ul class="results" aria-label=${`${props.name}: results`}>
      ${results.map(
        (record) => html`<li key=${record.id}>
          <button type="button" class="link" disabled=${ids.includes(record.id)} onClick=${() => pick(record)}>${describeRecord(record, props, query)}</button>
        </li>`,
      )}
    </ul>
  </div>`;
}
