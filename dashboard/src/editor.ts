/**
 * The record editor: a dialog with a control per field. A new record is sent whole; an update
 * sends only the fields that changed, as JSON, or, when files are uploaded, every field as
 * multipart (`@jsonPayload` plus the uploads) so that nothing is cleared by accident. The API's
 * 422 errors are shown at their fields.
 */
import { useState } from 'preact/hooks';
import { ApiError, type Api, type CollectionInfo, type RecordData } from './api.js';
import { ConfirmDialog, Modal } from './dialogs.js';
import { FieldControl } from './field-controls.js';
import { DraftError, editableFields, type Draft, type FileDraft } from './field-drafts.js';
import { draftsOf, fieldKind, fromDraft } from './field-kinds.js';
import { html } from './html.js';

export interface EditorProps {
  api: Api;
  collection: CollectionInfo;
  collections: CollectionInfo[];
  /** The record to edit; absent: a new one. */
  record?: RecordData;
  fileToken: string;
  onClose: () => void;
  /** After a save or a delete: the list reloads. */
  onDone: (message: string) => void;
}

/** The request body of a save, or the errors that keep it from being sent. */
function buildBody(props: EditorProps, drafts: Record<string, Draft>): { body?: object | FormData; errors: Record<string, string> } {
  const fields = editableFields(props.collection.fields).filter((f) => fieldKind(f).sent);
  const errors: Record<string, string> = {};
  const values: Record<string, unknown> = {};
  for (const field of fields) {
    try {
      values[field.name] = fromDraft(field, drafts[field.name]!);
    } catch (err) {
      if (!(err instanceof DraftError)) throw err;
      errors[field.name] = err.message;
    }
  }
  if (Object.keys(errors).length > 0) return { errors };
  const uploads = fields.filter((f) => f.type === 'file').flatMap((f) => (drafts[f.name] as FileDraft).added.map((file) => [f.name, file] as const));
  if (uploads.length > 0) {
    const form = new FormData();
    // A field with an upload and no kept file is sent by its upload part alone.
    for (const [name] of uploads) if ((drafts[name] as FileDraft).kept.length === 0) delete values[name];
    form.set('@jsonPayload', JSON.stringify(values));
    for (const [name, file] of uploads) form.append(name, file);
    return { body: form, errors };
  }
  if (!props.record) return { body: values, errors };
  const before = draftsOf(fields, props.record);
  const changed = fields.filter((f) => JSON.stringify(fromDraft(f, before[f.name]!)) !== JSON.stringify(values[f.name]));
  return { body: Object.fromEntries(changed.map((f) => [f.name, values[f.name]])), errors };
}

export function Editor(props: EditorProps) {
  const { api, collection, record } = props;
  const fields = editableFields(collection.fields);
  const readOnly = collection.type === 'view';
  const [drafts, setDrafts] = useState(() => draftsOf(fields, record));
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [failure, setFailure] = useState('');
  const [busy, setBusy] = useState(false);
  const [confirming, setConfirming] = useState(false);

  const run = async (work: () => Promise<string>) => {
    setBusy(true);
    try {
      props.onDone(await work());
    } catch (err) {
      const fieldErrors = err instanceof ApiError ? Object.fromEntries(Object.entries(err.data).map(([name, e]) => [name, e.message])) : {};
      setErrors(fieldErrors);
      setFailure((err as Error).message);
      setConfirming(false);
    } finally {
      setBusy(false);
    }
  };
  const save = (event: Event) => {
    event.preventDefault();
    const { body, errors: local } = buildBody(props, drafts);
    setErrors(local);
    if (!body) {
      setFailure('Some fields need a look.');
      return;
    }
    void run(async () => {
      if (record) await api.update(collection.name, record.id, body);
      else await api.create(collection.name, body);
      return record ? 'Record saved.' : 'Record created.';
    });
  };
  const remove = () =>
    run(async () => {
      await api.remove(collection.name, record!.id);
      return 'Record deleted.';
    });

  const title = `${record ? 'Edit' : 'New'} ${collection.name} record`;
  return html`<${Modal} title=${title} onClose=${props.onClose} wide>
    <form class="editor" novalidate onSubmit=${save}>
      ${record ? html`<p class="record-id">id <code>${record.id}</code></p>` : null}
      ${fields.map(
        (field) => html`<${FieldControl}
          key=${field.name}
          kind=${fieldKind(field)}
          api=${api}
          collections=${props.collections}
          field=${field}
          record=${record}
          draft=${drafts[field.name]}
          error=${errors[field.name] ?? ''}
          readOnly=${readOnly}
          fileToken=${props.fileToken}
          onChange=${(draft: Draft) => setDrafts((all) => ({ ...all, [field.name]: draft }))}
        />`,
      )}
      ${failure ? html`<p role="alert" class="error">${failure}</p>` : null}
      <div class="actions">
        ${readOnly ? null : html`<button type="submit" class="primary" disabled=${busy}>Save</button>`}
        <button type="button" onClick=${props.onClose}>Cancel</button>
        ${record && !readOnly ? html`<button type="button" class="danger" disabled=${busy} onClick=${() => setConfirming(true)}>Delete</button>` : null}
      </div>
    </form>
    ${confirming ? html`<${ConfirmDialog} question="Delete this record?" busy=${busy} onConfirm=${remove} onCancel=${() => setConfirming(false)} />` : null}
  <//>`;
}
