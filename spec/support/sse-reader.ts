import http from 'node:http';

/** One server-sent event as read off the wire: its fields, or a comment line. */
export interface SseEvent {
  id?: string;
  event?: string;
  data?: string;
  /** The text after `:` of a comment line (a heartbeat is `:` alone, so ''). */
  comment?: string;
}

/** A raw SSE connection: the response head, every event so far, and waits on what comes next. */
export interface SseConnection {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly events: SseEvent[];
  /** The raw text received so far. */
  readonly text: () => string;
  /** True once the server ended the stream (or the socket closed). */
  readonly ended: () => boolean;
  /** Resolves once the stream has ended. */
  readonly endedPromise: Promise<void>;
  /** The first event (from index `from`) matching `test`, waiting up to `timeoutMs`. */
  next(test: (e: SseEvent) => boolean, options?: { timeoutMs?: number; from?: number }): Promise<SseEvent>;
  /** The clientId of PB_CONNECT. */
  clientId(): Promise<string>;
  /** Events (not comments) with `event` equal to `name`, parsed `data`. */
  messages(name?: string): { event: string; id: string; data: { action: string; record: Record<string, unknown> } }[];
  close(): void;
  /** Stops reading from the socket (a slow consumer). */
  pause(): void;
}

/**
 * Opens `url` with a plain http.get and parses the SSE framing itself (no EventSource), so tests
 * see exactly what the server wrote: `id:`, `event:`, `data:` fields and `:` comments.
 */
export function openSse(url: string, headers: Record<string, string> = {}): Promise<SseConnection> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { Accept: 'text/event-stream', ...headers } }, (res) => {
      const events: SseEvent[] = [];
      let raw = '';
      let buffer = '';
      let current: SseEvent = {};
      let ended = false;
      const waiters = new Set<() => void>();
      const wake = () => {
        for (const w of [...waiters]) w();
      };
      let endResolve!: () => void;
      const endedPromise = new Promise<void>((r) => (endResolve = r));
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        raw += chunk;
        buffer += chunk;
        let nl: number;
        while ((nl = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          if (line === '') {
            if (Object.keys(current).length > 0) events.push(current);
            current = {};
            continue;
          }
          if (line.startsWith(':')) {
            events.push({ comment: line.slice(1) });
            continue;
          }
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? '' : line.slice(colon + 1);
          if (field === 'id' || field === 'event' || field === 'data') current[field] = field === 'data' && current.data !== undefined ? `${current.data}\n${value}` : value;
        }
        wake();
      });
      const finish = () => {
        ended = true;
        endResolve();
        wake();
      };
      res.on('end', finish);
      res.on('close', finish);
      res.on('error', finish);
      const connection: SseConnection = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        events,
        text: () => raw,
        ended: () => ended,
        endedPromise,
        next(test, options = {}) {
          const timeoutMs = options.timeoutMs ?? 5000;
          const from = options.from ?? 0;
          return new Promise((resolveNext, rejectNext) => {
            const check = () => {
              const found = events.slice(from).find(test);
              if (found) {
                waiters.delete(check);
                clearTimeout(timer);
                resolveNext(found);
              } else if (ended) {
                waiters.delete(check);
                clearTimeout(timer);
                rejectNext(new Error(`stream ended without the awaited event; got: ${raw.slice(0, 2000)}`));
              }
            };
            const timer = setTimeout(() => {
              waiters.delete(check);
              rejectNext(new Error(`no awaited event within ${timeoutMs} ms; got: ${raw.slice(-2000)}`));
            }, timeoutMs);
            waiters.add(check);
            check();
          });
        },
        async clientId() {
          const e = await connection.next((x) => x.event === 'PB_CONNECT');
          return e.id!;
        },
        messages(name) {
          return events
            .filter((e) => e.event !== undefined && e.event !== 'PB_CONNECT' && (name === undefined || e.event === name))
            .map((e) => ({ event: e.event!, id: e.id!, data: JSON.parse(e.data!) }));
        },
        close() {
          req.destroy();
        },
        pause() {
          res.pause();
        },
      };
      resolve(connection);
    });
    req.on('error', reject);
  });
}
