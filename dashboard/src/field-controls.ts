/**
 * The editor's controls, one per shape of field (the table in field-kinds.ts names which a field
 * type uses), and the frame of every field: its label, help text and any error tied to the
 * control with aria-describedby, and aria-invalid when the server refused it.
 */
import type { ComponentChild } from 'preact';
import { useEffect, useMemo } from 'preact/hooks';
import type { Api, CollectionInfo, FieldInfo, RecordData } from './api.js';
import type { Draft, FileDraft, PointDraft } from './field-drafts.js';
import { holdsList } from './field-drafts.js';
import { html } from './html.js';
import { isImageName } from './record-label.js';
import { RelationPicker } from './relation-picker.js';

/** What the editor hands each field. */
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

/** A control's props: the field's, the control's element id and the ids of what describes it. */
export interface ControlProps extends FieldControlProps {
  id: string;
  describedBy: string | undefined;
}

/** How a field type is edited: its control, and whether the field's name labels it (`<label for>`) or its parts name themselves. */
export interface ControlKind {
  Control: (props: ControlProps) => ComponentChild;
  labelled: boolean;
}

const inputValue = (e: Event) => (e.target as HTMLInputElement).value;

/** The attributes that tie a control to its field: id, description, and the server's refusal. */
function describeControl(props: ControlProps) {
  return { id: props.id, 'aria-describedby': props.describedBy, 'aria-invalid': props.error ? 'true' : undefined };
}

/** A one-line input of a text-like field, whose draft is what the user typed. */
export function makeTextInput(input: { type: string; step?: string; placeholder?: string }): ControlKind['Control'] {
  return function TextInput(props: ControlProps) {
    return html`<input
      ...${describeControl(props)}
      type=${input.type}
      step=${input.step}
      placeholder=${input.placeholder}
      readOnly=${props.readOnly}
      value=${props.draft as string}
      onInput=${(e: Event) => props.onChange(inputValue(e))}
    />`;
  };
}

/** A text area of the given height, for text that runs over lines. */
export function makeTextArea(rows: number): ControlKind['Control'] {
  return function TextArea(props: ControlProps) {
    return html`<textarea ...${describeControl(props)} rows=${rows} readOnly=${props.readOnly} value=${props.draft as string} onInput=${(e: Event) => props.onChange(inputValue(e))} />`;
  };
}

/** A value the server sets: shown, never edited. */
export function ReadOnlyInput(props: ControlProps) {
  return html`<input ...${describeControl(props)} type="text" readOnly value=${props.draft as string} />`;
}

/** A flag as a checkbox. */
export function Checkbox(props: ControlProps) {
  return html`<input ...${describeControl(props)} type="checkbox" disabled=${props.readOnly} checked=${props.draft as boolean} onChange=${(e: Event) => props.onChange((e.target as HTMLInputElement).checked)} />`;
}

/** A select's values: a list box for a multiple select, else a drop-down with "(none)". */
export function SelectControl(props: ControlProps) {
  const { field, draft, readOnly } = props;
  const common = describeControl(props);
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

/** A relation's records, searched in the fields of its target collection that `searchedFields` names. */
export function makeRelationControl(searchedFields: (target: CollectionInfo) => FieldInfo[]): ControlKind['Control'] {
  return function RelationControl(props: ControlProps) {
    const { field } = props;
    const target = props.collections.find((c) => c.name === field.collection);
    return html`<${RelationPicker}
      api=${props.api}
      name=${field.name}
      target=${target}
      searched=${target ? searchedFields(target) : []}
      ids=${props.draft as string[]}
      multiple=${holdsList(field)}
      onChange=${props.onChange}
      describedBy=${props.describedBy}
      invalid=${Boolean(props.error)}
    />`;
  };
}

/** A new upload, by name, with a preview of an image (an object URL, let go when the upload is). */
function AddedFile(props: { file: File; onRemove: () => void }) {
  const { file } = props;
  const preview = useMemo(() => (isImageName(file.name) ? URL.createObjectURL(file) : ''), [file]);
  useEffect(() => () => (preview ? URL.revokeObjectURL(preview) : undefined), [preview]);
  return html`<li>
    ${preview ? html`<img class="thumb" src=${preview} alt="" width="40" height="40" />` : null}
    <span>${file.name} (new)</span>
    <button type="button" class="small" aria-label=${`Remove ${file.name}`} onClick=${props.onRemove}>Remove</button>
  </li>`;
}

/**
 * A file field's kept files (images as thumbnails), its new uploads (images previewed), and a
 * file input to add more. The input itself is out of sight, since the browser would write "No
 * file chosen" beside the list of chosen files; a button-like label opens it, and shows its focus.
 */
export function FileControl(props: ControlProps) {
  const { field, record, api } = props;
  const draft = props.draft as FileDraft;
  const token = field.protected === true ? props.fileToken : '';
  const choose = holdsList(field) ? 'Add files' : draft.kept.length + draft.added.length > 0 ? 'Replace the file' : 'Choose a file';
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
        (file, i) => html`<${AddedFile} key=${`new-${i}`} file=${file} onRemove=${() => props.onChange({ ...draft, added: draft.added.filter((f) => f !== file) })} />`,
      )}
    </ul>
    ${props.readOnly
      ? null
      : html`<input id=${props.id} class="file-input" type="file" multiple=${holdsList(field)} aria-describedby=${props.describedBy} aria-invalid=${props.error ? 'true' : undefined} onChange=${onFiles} />
          <label for=${props.id} class="button">${choose}</label>`}
  </div>`;
}

/** A point as two number inputs, each named by the field and its axis. */
export function PointControl(props: ControlProps) {
  const point = props.draft as PointDraft;
  const axis = (key: keyof PointDraft, label: string) =>
    html`<label class="inline">${label}
      <input type="number" step="any" aria-label=${`${props.field.name} ${label}`} aria-describedby=${props.describedBy} aria-invalid=${props.error ? 'true' : undefined} readOnly=${props.readOnly} value=${point[key]} onInput=${(e: Event) => props.onChange({ ...point, [key]: inputValue(e) })} />
    </label>`;
  return html`<div class="point">${axis('lon', 'longitude')} ${axis('lat', 'latitude')}</div>`;
}

/** A field of the editor: its label, its type's control, help text and error. */
export function FieldControl(props: FieldControlProps & { kind: ControlKind }) {
  const { kind, ...control } = props;
  const { field, error } = control;
  const id = `field-${field.name}`;
  const describedBy = [field.help ? `${id}-help` : '', error ? `${id}-error` : ''].filter(Boolean).join(' ') || undefined;
  return html`<div class=${`field${error ? ' invalid' : ''}`}>
    ${kind.labelled ? html`<label for=${id}>${field.name}</label>` : html`<span class="label">${field.name}</span>`}
    ${field.required ? html`<span class="required" aria-hidden="true"> *</span>` : null}
    <span class="type">${field.type}</span>
    <${kind.Control} ...${control} id=${id} describedBy=${describedBy} />
    ${field.help ? html`<p id=${`${id}-help`} class="help">${field.help}</p>` : null}
    ${error ? html`<p id=${`${id}-error`} class="error">${error}</p>` : null}
  </div>`;
}
