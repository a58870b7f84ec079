/**
 * One editor control per field type, each named by its field (its label), its help text and
 * any error tied to it with aria-describedby, and aria-invalid when the server refused it.
 */
import type { Api, CollectionInfo, FieldInfo, RecordData } from './api.js';
import type { Draft, FileDraft, PointDraft } from './field-drafts.js';
import { holdsList } from './field-drafts.js';
import { html } from './html.js';
import { isImageName } from './record-label.js';
import { RelationPicker } from './relation-picker.js';

export interface FieldControlProps {
  api: Api;
  collections: CollectionInfo[];
  field: FieldInfo;
  /** The record being edited (absent for a new one): where its files are. */
  record: RecordData | undefined;
  draft: Draft;
  error: string;
  readOnly: boolean;
  fileToken: string;
  onChange: (draft: Draft) => void;
}

const inputValue = (e: Event) => (e.target as HTMLInputElement).value;

/** The input types of the text-like fields. */
const TEXT_INPUTS: Record<string, string> = { text: 'text', email: 'email', url: 'url', date: 'text', number: 'number' };

function FileControl(props: FieldControlProps & { id: string; describedBy: string }) {
  const { field, record, api } = props;
  const draft = props.draft as FileDraft;
  const token = field.protected === true ? props.fileToken : '';
  const onFiles = (e: Event) => {
    const chosen = [...((e.target as HTMLInputElement).files ?? [])];
    // An upload to a single file field replaces its file.
    props.onChange(holdsList(field) ? { kept: draft.kept, added: [...draft.added, ...chosen] } : { kept: [], added: chosen.slice(0, 1) });
    (e.target as HTMLInputElement).value = '';
  };
  return html`<div class="files-control">
    <ul class="picked" aria-label=${`${field.name}: files`}>
      ${draft.kept.map(
        (name) => html`<li key=${name}>
          ${record && isImageName(name) ? html`<img class="thumb" src=${api.fileUrl(record, name, { thumb: '100x100', fileToken: token })} alt="" width="40" height="40" />` : null}
          <span>${name}</span>
          ${props.readOnly ? null : html`<button type="button" class="small" aria-label=${`Remove ${name}`} onClick=${() => props.onChange({ ...draft, kept: draft.kept.filter((n) => n !== name) })}>Remove</button>`}
        </li>`,
      )}
      ${draft.added.map(
        (file, i) => html`<li key=${`new-${i}`}>
          <span>${file.name} (new)</span>
          <button type="button" class="small" aria-label=${`Remove ${file.name}`} onClick=${() => props.onChange({ ...draft, added: draft.added.filter((f) => f !== file) })}>Remove</button>
        </li>`,
      )}
    </ul>
    ${props.readOnly
      ? null
      : html`<input id=${props.id} type="file" multiple=${holdsList(field)} aria-describedby=${props.describedBy} aria-invalid=${props.error ? 'true' : undefined} onChange=${onFiles} />`}
  </div>`;
}

function PointControl(props: FieldControlProps & { describedBy: string }) {
  const point = props.draft as PointDraft;
  const axis = (key: keyof PointDraft, label: string) =>
    html`<label class="inline">${label}
      <input type="number" step="any" aria-label=${`${props.field.name} ${label}`} aria-describedby=${props.describedBy} aria-invalid=${props.error ? 'true' : undefined} readOnly=${props.readOnly} value=${point[key]} onInput=${(e: Event) => props.onChange({ ...point, [key]: inputValue(e) })} />
    </label>`;
  return html`<div class="point">${axis('lon', 'longitude')} ${axis('lat', 'latitude')}</div>`;
}

/** The control proper, by type. */
function Control(props: FieldControlProps & { id: string; describedBy: string }) {
  const { field, draft, readOnly, id, describedBy } = props;
  const common = { id, 'aria-describedby': describedBy, 'aria-invalid': props.error ? 'true' : undefined };
  switch (field.type) {
    case 'bool':
      return html`<input ...${common} type="checkbox" disabled=${readOnly} checked=${draft as boolean} onChange=${(e: Event) => props.onChange((e.target as HTMLInputElement).checked)} />`;
    case 'select': {
      const values = (field.values as string[] | undefined) ?? [];
      if (holdsList(field)) {
        const onChange = (e: Event) => props.onChange([...(e.target as HTMLSelectElement).selectedOptions].map((o) => o.value));
        return html`<select ...${common} multiple disabled=${readOnly} onChange=${onChange}>
          ${values.map((v) => html`<option key=${v} value=${v} selected=${(draft as string[]).includes(v)}>${v}</option>`)}
        </select>`;
      }
      return html`<select ...${common} disabled=${readOnly} value=${draft as string} onChange=${(e: Event) => props.onChange(inputValue(e))}>
        <option value="">(none)</option>
        ${values.map((v) => html`<option key=${v} value=${v}>${v}</option>`)}
      </select>`;
    }
    case 'json':
    case 'editor':
      return html`<textarea ...${common} rows=${field.type === 'json' ? 5 : 6} readOnly=${readOnly} value=${draft as string} onInput=${(e: Event) => props.onChange(inputValue(e))} />`;
    case 'autodate':
      return html`<input ...${common} type="text" readOnly value=${draft as string} />`;
    case 'relation':
      return html`<${RelationPicker}
        api=${props.api}
        name=${field.name}
        target=${props.collections.find((c) => c.name === field.collection)}
        ids=${draft as string[]}
        multiple=${holdsList(field)}
        onChange=${props.onChange}
        describedBy=${describedBy}
        invalid=${Boolean(props.error)}
      />`;
    case 'file':
      return html`<${FileControl} ...${props} />`;
    case 'geoPoint':
      return html`<${PointControl} ...${props} />`;
    default:
      return html`<input
        ...${common}
        type=${TEXT_INPUTS[field.type] ?? 'text'}
        step=${field.type === 'number' ? 'any' : undefined}
        placeholder=${field.type === 'date' ? 'YYYY-MM-DD HH:MM:SS.sssZ' : undefined}
        readOnly=${readOnly}
        value=${draft as string}
        onInput=${(e: Event) => props.onChange(inputValue(e))}
      />`;
  }
}

/** A field of the editor: its label, control, help text and error. */
export function FieldControl(props: FieldControlProps) {
  const { field } = props;
  const id = `field-${field.name}`;
  const describedBy = [field.help ? `${id}-help` : '', props.error ? `${id}-error` : ''].filter(Boolean).join(' ') || undefined;
  // Controls named by aria-label (relation, geoPoint) or with a visible list (file) keep a plain heading.
  const labelled = field.type !== 'relation' && field.type !== 'geoPoint';
  return html`<div class=${`field${props.error ? ' invalid' : ''}`}>
    ${labelled ? html`<label for=${id}>${field.name}</label>` : html`<span class="label">${field.name}</span>`}
    ${field.required ? html`<span class="required" aria-hidden="true"> *</span>` : null}
    <span class="type">${field.type}</span>
    <${Control} ...${props} id=${id} describedBy=${describedBy} />
    ${field.help ? html`<p id=${`${id}-help`} class="help">${field.help}</p>` : null}
    ${props.error ? html`<p id=${`${id}-error`} class="error">${props.error}</p>` : null}
  </div>`;
}
