/** A collection's fields, indexes and rules, read-only: collections are declared in the host's code. */
import type { CollectionInfo, FieldInfo, IndexInfo } from './api.js';
import { html } from './html.js';

/** The keys every field has, shown in their own columns. */
const BASE_KEYS = new Set(['name', 'type', 'system', 'required', 'hidden', 'multiple', 'presentable', 'help', 'id', 'rules']);

function settingsOf(field: FieldInfo): string {
  return Object.entries(field)
    .filter(([key]) => !BASE_KEYS.has(key))
    .map(([key, value]) => `${key}: ${JSON.stringify(value)}`)
    .join(', ');
}

function flagsOf(field: FieldInfo): string {
  return (['system', 'required', 'hidden', 'presentable'] as const).filter((flag) => field[flag]).join(', ');
}

function describeRule(rule: string | null): string {
  if (rule === null) return 'superusers only';
  return rule === '' ? 'everyone' : rule;
}

/** A field's own rules (docs/collections.md, "Field rules"), each action as the collection's rules read: "view: id = @request.auth.id; update: superusers only". */
function fieldRulesOf(field: FieldInfo): string {
  return Object.entries(field.rules ?? {})
    .map(([action, rule]) => `${action}: ${describeRule(rule)}`)
    .join('; ');
}

/** An index as its kind and columns: "unique (slug)", "(created, id), automatic", "gin (tags), automatic". */
function describeIndex(index: IndexInfo & { method?: string; automatic: boolean }): string {
  const columns = `(${index.columns.map((c) => `${c.column}${c.descending ? ' desc' : ''}`).join(', ')})`;
  const kind = [index.unique ? 'unique' : '', index.method === 'gin' ? 'gin' : ''].filter(Boolean).join(' ');
  return `${kind ? `${kind} ` : ''}${columns}${index.automatic ? ', automatic' : ''}`;
}

export function SchemaView(props: { collection: CollectionInfo; onBack: () => void }) {
  const { collection } = props;
  const indexes = [...collection.automaticIndexes.map((i) => ({ ...i, automatic: true })), ...collection.indexes.map((i) => ({ ...i, automatic: false }))];
  const search = collection.search;
  return html`<section class="schema" aria-labelledby="schema-title">
    <div class="toolbar">
      <h2 id="schema-title">${collection.name}: schema</h2>
      <button type="button" onClick=${props.onBack}>Records</button>
    </div>
    <p class="note">Read-only: collections are declared in code (the <code>collections</code> option of <code>createRecordsRouter</code>); change them there.</p>
    <p>Type <code>${collection.type}</code>, id <code>${collection.id}</code></p>
    ${collection.viewQuery ? html`<pre class="code">${collection.viewQuery}</pre>` : null}
    <h3>Fields</h3>
    <div class="table-wrap">
      <table aria-label=${`${collection.name} fields`}>
        <thead><tr><th scope="col">name</th><th scope="col">type</th><th scope="col">flags</th><th scope="col">settings</th><th scope="col">rules</th><th scope="col">help</th></tr></thead>
        <tbody>
          ${collection.fields.map(
            (f) => html`<tr key=${f.name}><td>${f.name}</td><td>${f.type}</td><td>${flagsOf(f)}</td><td>${settingsOf(f)}</td><td>${fieldRulesOf(f)}</td><td>${f.help}</td></tr>`,
          )}
        </tbody>
      </table>
    </div>
    <h3>Indexes</h3>
    ${indexes.length === 0 && !search
      ? html`<p>None.</p>`
      : html`<ul aria-label=${`${collection.name} indexes`}>
          ${indexes.map((index) => html`<li key=${index.name}><code>${index.name}</code>: ${describeIndex(index)}</li>`)}
          ${search ? html`<li key=${search.index}><code>${search.index}</code>: search (${search.fields.join(', ')}), ${search.language}</li>` : null}
        </ul>`}
    <h3>Rules</h3>
    <dl class="rules">
      ${Object.entries(collection.rules).map(([name, rule]) => html`<div key=${name}><dt>${name}</dt><dd><code>${describeRule(rule)}</code></dd></div>`)}
    </dl>
  </section>`;
}
