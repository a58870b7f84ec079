/**
 * The dashboard's client of the public API: every call carries the caller's token in the
 * Authorization header, and a failure becomes an ApiError with the server's message and field
 * errors (docs/errors.md).
 */

/** A field as `GET {base}/_/api/collections` describes it. */
export interface FieldInfo {
  name: string;
  type: string;
  system: boolean;
  required: boolean;
  hidden: boolean;
  multiple: boolean;
  presentable: boolean;
  help: string;
  /** The field's own rules as declared (view, create, update), when it has any. */
  rules?: { [action: string]: string | null };
  [setting: string]: unknown;
}

/** An index of a collection's table. */
export interface IndexInfo {
  name: string;
  unique: boolean;
  columns: { column: string; descending: boolean }[];
}

/** A collection's schema as the dashboard endpoint describes it. */
export interface CollectionInfo {
  id: string;
  name: string;
  type: 'base' | 'view';
  fields: FieldInfo[];
  /** The indexes declared in code. */
  indexes: IndexInfo[];
  /** The indexes made without asking: `(created, id)`, each single relation, a GIN index on each multi-valued field. */
  automaticIndexes: (IndexInfo & { method: 'btree' | 'gin' })[];
  rules: Record<'list' | 'view' | 'create' | 'update' | 'delete', string | null>;
  viewQuery?: string;
  /** The search index, when one is declared: its GIN index, the searched fields (most important first) and its language. */
  search?: { index: string; fields: string[]; language: string };
}

/** A record as the API returns it. */
export interface RecordData {
  id: string;
  collectionId: string;
  expand?: Record<string, RecordData | RecordData[]>;
  [field: string]: unknown;
}

/** A page of records. */
export interface RecordPage {
  page: number;
  perPage: number;
  totalItems: number;
  totalPages: number;
  items: RecordData[];
}

/** The API's error body: status, message, and per-field errors of a 422. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly data: Record<string, { code: string; message: string }> = {},
  ) {
    super(message);
  }
}

/** The mount point of the router: the page is served at `<base>/_/`. */
export function findApiBase(pathname: string = location.pathname): string {
  const at = pathname.lastIndexOf('/_/');
  return at === -1 ? '' : pathname.slice(0, at);
}

/** A list query's parameters. */
export interface ListQuery {
  page?: number;
  perPage?: number;
  sort?: string;
  filter?: string;
  /** Words for the collection's search index (docs/search.md); only where it has one. */
  search?: string;
  expand?: string;
  fields?: string;
}

/** The API client for one token. */
export class Api {
  constructor(
    readonly base: string,
    readonly token: string,
  ) {}

  /** Sends a request to `<base><path>`; JSON in and out, FormData as multipart. */
  async request<T>(path: string, init: { method?: string; body?: unknown } = {}): Promise<T> {
    const headers: Record<string, string> = { Authorization: this.token };
    let body: BodyInit | undefined;
    if (init.body instanceof FormData) body = init.body;
    else if (init.body !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(init.body);
    }
    const res = await fetch(this.base + path, { method: init.method ?? 'GET', headers, body, credentials: 'same-origin', cache: 'no-store' });
    if (res.status === 204) return undefined as T;
    const answer = (await res.json().catch(() => ({}))) as { message?: string; data?: ApiError['data'] };
    if (!res.ok) throw new ApiError(res.status, answer.message ?? `The server answered ${res.status}.`, answer.data ?? {});
    return answer as T;
  }

  whoami(): Promise<{ superuser: boolean; id: string }> {
    return this.request('/_/api/whoami');
  }

  collections(): Promise<CollectionInfo[]> {
    return this.request('/_/api/collections');
  }

  list(collection: string, query: ListQuery): Promise<RecordPage> {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query)) if (value !== undefined && value !== '') params.set(key, String(value));
    return this.request(`${recordsPath(collection)}?${params}`);
  }

  /** How many records match a filter (the whole collection without one). */
  async count(collection: string, filter = ''): Promise<number> {
    return (await this.list(collection, { perPage: 1, fields: 'id', filter })).totalItems;
  }

  create(collection: string, body: object | FormData): Promise<RecordData> {
    return this.request(recordsPath(collection), { method: 'POST', body });
  }

  update(collection: string, id: string, body: object | FormData): Promise<RecordData> {
    return this.request(`${recordsPath(collection)}/${encodeURIComponent(id)}`, { method: 'PATCH', body });
  }

  remove(collection: string, id: string): Promise<void> {
    return this.request(`${recordsPath(collection)}/${encodeURIComponent(id)}`, { method: 'DELETE' });
  }

  /** Bulk delete: every record matching `filter` (docs/records-api.md, "Bulk delete"). */
  removeMatching(collection: string, filter: string): Promise<{ deleted: number }> {
    return this.request(`${recordsPath(collection)}?${new URLSearchParams({ filter })}`, { method: 'DELETE' });
  }

  /**
   * A short-lived file token for protected files: the one token that may travel in a URL. Of
   * scope `files`: it sits in `<img src>` (history, logs), so it must open no backup.
   */
  async fileToken(): Promise<string> {
    return (await this.request<{ token: string }>('/api/files/token', { method: 'POST', body: { scope: 'files' } })).token;
  }

  /** A file's URL, a thumbnail with `thumb`, readable with a file token where the field is protected. */
  fileUrl(record: RecordData, name: string, options: { thumb?: string; fileToken?: string } = {}): string {
    const params = new URLSearchParams();
    if (options.thumb) params.set('thumb', options.thumb);
    if (options.fileToken) params.set('token', options.fileToken);
    const query = params.size > 0 ? `?${params}` : '';
    return `${this.base}/api/files/${encodeURIComponent(record.collectionId)}/${encodeURIComponent(record.id)}/${encodeURIComponent(name)}${query}`;
  }
}

function recordsPath(collection: string): string {
  return `/api/collections/${encodeURIComponent(collection)}/records`;
}

/** A filter literal: text in single quotes, its quotes and backslashes escaped (docs/query-language.md). */
export function quoteFilterText(text: string): string {
  return `'${text.replace(/[\\']/g, (c) => `\\${c}`)}'`;
}
