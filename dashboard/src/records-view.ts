/**
 * The records of one collection: a table with paging, sort by a column header, the filter box
 * (the filter language; the server's message when it refuses one), the search box where the
 * collection has a search index, a choice of columns, bulk delete by the filter, the editor on a
 * row, and live updates.
 */
import { useEffect, useMemo, useState } from 'preact/hooks';
import type { Api, CollectionInfo, FieldInfo, RecordPage } from './api.js';
import type { CellContext } from './cells.js';
import { ConfirmDialog } from './dialogs.js';
import { Editor } from './editor.js';
import { fieldKind } from './field-kinds.js';
import { formatCount } from './format-count.js';
import { html } from './html.js';
import { labelField } from './record-label.js';
import { watchCollection } from './realtime.js';

const PER_PAGE = 20;
/** How long live updates wait for more changes before reloading the page of records. */
const LIVE_DELAY_MS = 150;

export interface RecordsViewProps {
  api: Api;
  collection: CollectionInfo;
  collections: CollectionInfo[];
  /** A record was created, changed or deleted (the sidebar's counts follow). */
  onChanged: () => void;
  onShowSchema: () => void;
}

/** The columns shown at first: the label, then every declared field that is not hidden. */
function defaultColumns(collection: CollectionInfo): string[] {
  const label = labelField(collection).name;
  return [label, ...collection.fields.filter((f) => !f.system && !f.hidden && f.name !== label).map((f) => f.name)];
}

/** `expand` for the shown relations whose target has a presentable field (its label is then one join away). */
function expandFor(columns: FieldInfo[], collections: CollectionInfo[]): string {
  return columns
    .filter((f) => f.type === 'relation' && collections.find((c) => c.name === f.collection)?.fields.some((t) => t.presentable))
    .map((f) => f.name)
    .join(',');
}

type Editing = { record?: RecordPage['items'][number] } | undefined;

export function RecordsView(props: RecordsViewProps) {
  const { api, collection, collections } = props;
  const [page, setPage] = useState(1);
  const [sort, setSort] = useState('');
  const [filterText, setFilterText] = useState('');
  const [filter, setFilter] = useState('');
  const [searchText, setSearchText] = useState('');
  const [search, setSearch] = useState('');
  const [columnNames, setColumnNames] = useState(() => defaultColumns(collection));
  const [showColumns, setShowColumns] = useState(false);
  const [result, setResult] = useState<RecordPage | undefined>();
  const [error, setError] = useState('');
  const [status, setStatus] = useState('');
  const [editing, setEditing] = useState<Editing>();
  const [bulk, setBulk] = useState<{ count: number; busy: boolean } | undefined>();
  const [fileToken, setFileToken] = useState('');
  const [version, setVersion] = useState(0);

  const columns = columnNames.map((name) => collection.fields.find((f) => f.name === name)!).filter(Boolean);
  const expand = expandFor(columns, collections);
  const hasProtectedFiles = collection.fields.some((f) => f.type === 'file' && f.protected === true);
  const reload = () => setVersion((v) => v + 1);

  useEffect(() => {
    if (!hasProtectedFiles) return;
    api.fileToken().then(setFileToken, () => undefined);
  }, [collection.name, version]);

  useEffect(() => {
    let current = true;
    // A search without a column sort lists the most relevant first.
    api.list(collection.name, { page, perPage: PER_PAGE, sort: sort || (search ? '-@rank' : ''), filter, search, expand }).then(
      (answer) => {
        if (!current) return;
        setResult(answer);
        setError('');
      },
      (err: Error) => current && setError(err.message),
    );
    return () => {
      current = false;
    };
  }, [collection.name, page, sort, filter, search, expand, version]);

  useEffect(() => {
    if (collection.type === 'view') return undefined;
    // A burst of changes (a bulk delete, a batch) reloads once.
    let pending: ReturnType<typeof setTimeout> | undefined;
    const stop = watchCollection(api, collection.name, () => {
      clearTimeout(pending);
      pending = setTimeout(() => {
        reload();
        props.onChanged();
      }, LIVE_DELAY_MS);
    });
    return () => {
      clearTimeout(pending);
      stop();
    };
  }, [collection.name]);

  const context: CellContext = useMemo(() => ({ api, collections, fileToken }), [api, collections, fileToken]);

  const toggleSort = (name: string) => {
    setSort(sort === name ? `-${name}` : name);
    setPage(1);
  };
  const sortOf = (name: string) => (sort === name ? 'ascending' : sort === `-${name}` ? 'descending' : 'none');
  const applyFilter = (e: KeyboardEvent) => {
    if (e.key !== 'Enter') return;
    e.preventDefault();
    setFilter(filterText.trim());
    setPage(1);
  };
  const applySearch = (e: KeyboardEvent) => {
    if (e.key !== 'Enter') return;
    e.preventDefault();
    setSearch(searchText.trim());
    setPage(1);
  };
  const toggleColumn = (name: string) => setColumnNames(columnNames.includes(name) ? columnNames.filter((n) => n !== name) : [...columnNames, name]);
  const finish = (message: string) => {
    setEditing(undefined);
    setStatus(message);
    reload();
    props.onChanged();
  };
  const askBulkDelete = async () => {
    try {
      setBulk({ count: await api.count(collection.name, filter), busy: false });
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const bulkDelete = async () => {
    setBulk((b) => b && { ...b, busy: true });
    try {
      // No filter: every record the list shows, which the count said.
      const { deleted } = await api.removeMatching(collection.name, filter || 'id != ""');
      finish(`Deleted ${formatCount(deleted, 'record')}.`);
    } catch (err) {
      setError((err as Error).message);
    }
    setBulk(undefined);
  };
  const openOnEnter = (e: KeyboardEvent, record: RecordPage['items'][number]) => {
    if (e.key === 'Enter') setEditing({ record });
  };
  const writable = collection.type !== 'view';
  const label = labelField(collection).name;

  return html`<section class="records" aria-labelledby="records-title">
    <div class="toolbar">
      <h2 id="records-title">${collection.name}</h2>
      <div class="buttons">
        ${writable ? html`<button type="button" class="primary" onClick=${() => setEditing({})}>New record</button>` : null}
        <button type="button" aria-expanded=${showColumns} onClick=${() => setShowColumns(!showColumns)}>Columns</button>
        <button type="button" onClick=${props.onShowSchema}>Schema</button>
        ${writable
          ? html`<button type="button" class="danger" disabled=${search !== ''} title=${search ? 'Deletes by the filter alone: clear the search first.' : undefined} onClick=${askBulkDelete}>Delete matching</button>`
          : null}
      </div>
    </div>
    <input
      type="search"
      class="filter"
      aria-label="Filter"
      placeholder="Filter, e.g. title ~ 'hello' && created > '2024-01-01' (Enter applies)"
      value=${filterText}
      onInput=${(e: Event) => setFilterText((e.target as HTMLInputElement).value)}
      onKeyDown=${applyFilter}
    />
    ${collection.search
      ? html`<input
          type="search"
          class="filter"
          aria-label="Search"
          placeholder=${`Search ${collection.search.fields.join(', ')}: words, "a phrase", -excluded (Enter applies)`}
          value=${searchText}
          onInput=${(e: Event) => setSearchText((e.target as HTMLInputElement).value)}
          onKeyDown=${applySearch}
        />`
      : null}
    ${showColumns
      ? html`<fieldset class="columns">
          <legend>Columns</legend>
          ${collection.fields
            .filter((f) => f.name !== label)
            .map(
              (f) => html`<label key=${f.name} class="inline">
                <input type="checkbox" checked=${columnNames.includes(f.name)} onChange=${() => toggleColumn(f.name)} />${f.name}${f.hidden ? ' (hidden)' : ''}
              </label>`,
            )}
        </fieldset>`
      : null}
    ${error ? html`<p role="alert" class="error">${error}</p>` : null}
    <p role="status" class="status">${status}</p>
    <div class="table-wrap">
      <table aria-label=${`${collection.name} records`}>
        <thead>
          <tr>
            ${columns.map(
              (f) => html`<th key=${f.name} scope="col" aria-sort=${sortOf(f.name)}>
                <button type="button" class="sort" onClick=${() => toggleSort(f.name)}>${f.name}<span class="arrow" aria-hidden="true"></span></button>
              </th>`,
            )}
          </tr>
        </thead>
        <tbody>
          ${result?.items.map(
            (record) => html`<tr key=${record.id} tabindex="0" onClick=${() => setEditing({ record })} onKeyDown=${(e: KeyboardEvent) => openOnEnter(e, record)}>
              ${columns.map((f) => html`<td key=${f.name}><${fieldKind(f).Cell} record=${record} field=${f} context=${context} /></td>`)}
            </tr>`,
          )}
        </tbody>
      </table>
      ${result && result.items.length === 0 ? html`<p class="empty">No records${filter || search ? ` match the ${filter && search ? 'filter and search' : filter ? 'filter' : 'search'}` : ''}.</p>` : null}
    </div>
    <div class="pager">
      <button type="button" disabled=${page <= 1} onClick=${() => setPage(page - 1)}>Previous page</button>
      <span>Page ${result?.page ?? page} of ${Math.max(result?.totalPages ?? 1, 1)} · ${formatCount(result?.totalItems ?? 0, 'record')}</span>
      <button type="button" disabled=${!result || page >= result.totalPages} onClick=${() => setPage(page + 1)}>Next page</button>
    </div>
    ${editing
      ? html`<${Editor} api=${api} collection=${collection} collections=${collections} record=${editing.record} fileToken=${fileToken} onClose=${() => setEditing(undefined)} onDone=${finish} />`
      : null}
    ${bulk ? html`<${ConfirmDialog} question=${`Delete ${formatCount(bulk.count, 'record')}?`} busy=${bulk.busy} onConfirm=${bulkDelete} onCancel=${() => setBulk(undefined)} />` : null}
  </section>`;
}
