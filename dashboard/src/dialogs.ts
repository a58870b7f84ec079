/** A modal dialog (the native `<dialog>`: focus kept inside, Escape closes) and a yes/no confirmation built on it. */
import type { ComponentChildren } from 'preact';
import { useEffect, useId, useRef } from 'preact/hooks';
import { html } from './html.js';

/** A modal dialog named by its title; `onClose` runs on Escape too. */
export function Modal(props: { title: string; onClose: () => void; children: ComponentChildren; wide?: boolean }) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  useEffect(() => {
    const dialog = ref.current!;
    if (!dialog.open) dialog.showModal();
    return () => dialog.close();
  }, []);
  const cancel = (event: Event) => {
    event.preventDefault();
    props.onClose();
  };
  return html`<dialog ref=${ref} class=${props.wide ? 'wide' : ''} aria-labelledby=${titleId} onCancel=${cancel}>
    <h2 id=${titleId}>${props.title}</h2>
    ${props.children}
  </dialog>`;
}

/** Asks before something that cannot be undone: "Delete" confirms, "Cancel" (or Escape) does not. */
export function ConfirmDialog(props: { question: string; busy?: boolean; onConfirm: () => void; onCancel: () => void }) {
  return html`<${Modal} title=${props.question} onClose=${props.onCancel}>
    <p>This cannot be undone.</p>
    <div class="actions">
      <button type="button" class="danger" disabled=${props.busy} onClick=${props.onConfirm}>Delete</button>
      <button type="button" onClick=${props.onCancel}>Cancel</button>
    </div>
  <//>`;
}
