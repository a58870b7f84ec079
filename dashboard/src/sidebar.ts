/** The collections, each a link named by its name and record count ("posts 3"). */
import { useEffect, useState } from 'preact/hooks';
import type { Api, CollectionInfo } from './api.js';
import { html } from './html.js';

/** A count the server could not give (busy, say) is asked once more after this long. */
const RETRY_MS = 1000;

export function Sidebar(props: { api: Api; collections: CollectionInfo[]; current: string; refresh: number }) {
  const [counts, setCounts] = useState<Record<string, number | string>>({});
  useEffect(() => {
    const timers: ReturnType<typeof setTimeout>[] = [];
    const count = (name: string, retry: boolean) =>
      props.api.count(name).then(
        (n) => setCounts((all) => ({ ...all, [name]: n })),
        () => {
          setCounts((all) => ({ ...all, [name]: '?' }));
          if (retry) timers.push(setTimeout(() => void count(name, false), RETRY_MS));
        },
      );
    for (const collection of props.collections) void count(collection.name, true);
    return () => timers.forEach(clearTimeout);
  }, [props.collections, props.refresh]);
  return html`<nav aria-label="Collections" class="sidebar">
    <ul>
      ${props.collections.map(
        (c) => html`<li key=${c.name}>
          <a href=${`#/${encodeURIComponent(c.name)}`} aria-current=${c.name === props.current ? 'page' : undefined}>
            <span class="name">${c.name}</span>${' '}<span class="count">${counts[c.name] ?? '…'}</span>
          </a>
        </li>`,
      )}
    </ul>
  </nav>`;
}
