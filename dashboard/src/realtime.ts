/**
 * Live updates through PocketBase's realtime protocol (docs/realtime.md): an EventSource on
 * `<base>/api/realtime` gives a client id (PB_CONNECT); the subscription is POSTed with the
 * caller's token in the Authorization header, never in the stream's URL. A reconnect brings a
 * new client id, and the subscription is sent again.
 */
import type { Api, RecordData } from './api.js';

/** A change to a record, as the server sends it. */
export interface RecordEvent {
  action: 'create' | 'update' | 'delete';
  record: RecordData;
}

/** Subscribes to every record of `collection`; returns the function that stops it. */
export function watchCollection(api: Api, collection: string, onEvent: (event: RecordEvent) => void): () => void {
  const topic = `${collection}/*`;
  const source = new EventSource(`${api.base}/api/realtime`);
  source.addEventListener('PB_CONNECT', (message) => {
    const { clientId } = JSON.parse((message as MessageEvent<string>).data) as { clientId: string };
    api.request('/api/realtime', { method: 'POST', body: { clientId, subscriptions: [topic] } }).catch(() => undefined);
  });
  source.addEventListener(topic, (message) => onEvent(JSON.parse((message as MessageEvent<string>).data) as RecordEvent));
  return () => source.close();
}
