/**
 * The relation control: a search box over the target collection (by its presentable field or
 * id), its results to add, and the picked records, each with a "Remove" button.
 */
import { useEffect, useState } from 'preact/hooks';
import { quoteFilterText, type Api, type CollectionInfo, type RecordData } from './api.js';
import { html } from './html.js';
import { labelField, recordLabel } from './record-label.js';

const RESULTS = 8;

export interface RelationPickerProps {
  api: Api;
  name: string;
  target: CollectionInfo | undefined;
  ids: string[];
  /** A single relation holds one id: picking replaces it. */
  multiple: boolean;
  onChange: (ids: string[]) => void;
  describedBy: string;
  invalid: boolean;
}

export function RelationPicker(props: RelationPickerProps) {
  const { api, target, ids } = props;
  const [query, setQuery] = useState('');
  const [results, setResults] = useState<RecordData[]>([]);
  const [labels, setLabels] = useState<Record<string, string>>({});
  const [error, setError] = useState('');

  // The labels of the records already picked, fetched once per set of ids.
  useEffect(() => {
    const missing = ids.filter((id) => labels[id] === undefined);
    if (!target || missing.length === 0) return;
    const filter = missing.map((id) => `id = ${quoteFilterText(id)}`).join(' || ');
    api
      .list(target.name, { perPage: missing.length, filter })
      .then((page) => setLabels((known) => ({ ...known, ...Object.fromEntries(page.items.map((r) => [r.id, recordLabel(r, target)])) })))
      .catch(() => undefined);
  }, [ids.join(',')]);

  const search = async (text: string) => {
    setQuery(text);
    if (!target) return;
    const label = labelField(target).name;
    const filter = text === '' ? '' : label === 'id' ? `id ~ ${quoteFilterText(text)}` : `${label} ~ ${quoteFilterText(text)} || id ~ ${quoteFilterText(text)}`;
    try {
      const page = await api.list(target.name, { perPage: RESULTS, filter });
      setResults(page.items);
      setError('');
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const pick = (record: RecordData) => {
    setLabels((known) => ({ ...known, [record.id]: recordLabel(record, target) }));
    props.onChange(props.multiple ? [...ids.filter((id) => id !== record.id), record.id] : [record.id]);
  };

  return html`<div class="relation">
    <ul class="picked" aria-label=${`${props.name}: picked`}>
      ${ids.map(
        (id) => html`<li key=${id}>
          <span>${labels[id] ?? id}</span>
          <button type="button" class="small" aria-label=${`Remove ${labels[id] ?? id}`} onClick=${() => props.onChange(ids.filter((other) => other !== id))}>Remove</button>
        </li>`,
      )}
    </ul>
    <input
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
          <button type="button" class="link" disabled=${ids.includes(record.id)} onClick=${() => pick(record)}>${recordLabel(record, target)}</button>
        </li>`,
      )}
    </ul>
  </div>`;
}
