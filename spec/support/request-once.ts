import http, { type IncomingHttpHeaders } from 'node:http';

/** What a client saw of one request: the status, every header (hop-by-hop ones too, such as `connection`) and the body. */
export interface OnceAnswer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  readonly json: unknown;
}

/**
 * Sends one request on a connection of its own (no agent, no keep-alive), as a load balancer's
 * probe or a fresh client does, and reads the whole answer. `fetch` hides `Connection: close`,
 * which the drain's 503 is about; this does not.
 */
export function requestOnce(url: string, options: { method?: string; json?: unknown; headers?: Record<string, string>; timeoutMs?: number } = {}): Promise<OnceAnswer> {
  const body = options.json === undefined ? undefined : Buffer.from(JSON.stringify(options.json));
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: options.method ?? 'GET', agent: false, headers: { ...(body ? { 'content-type': 'application/json', 'content-length': String(body.length) } : {}), ...options.headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
    });
    req.setTimeout(options.timeoutMs ?? 10_000, () => req.destroy(new Error(`no answer from ${url} within ${options.timeoutMs ?? 10_000} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}
