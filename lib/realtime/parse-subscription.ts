import { BadRequestError, RecordbaseError } from '../errors.js';
import { parseResponseShape, type ResponseShape } from '../records/present-records.js';
import type { CollectionSchema, SchemaRegistry } from '../schema/collection-schema.js';
import { normalizeHeaderName } from '../query/request-headers.js';

/**
 * One subscription string as a client sent it (docs/realtime.md): `{collection}/*`,
 * `{collection}/{id}` or the legacy `{collection}`, the collection by name or id, optionally
 * followed by `?options=<url-encoded JSON {"query": {...}, "headers": {...}}>`.
 */
export interface Subscription {
  /** Exactly as sent: the `event:` of every message for it. */
  readonly raw: string;
  /** Undefined for a topic that names no collection (`PB_CONNECT`, a typo): accepted, never delivered. */
  readonly collection?: CollectionSchema;
  /** The record of a `{collection}/{id}` topic (view rule); undefined for `*` (list rule). */
  readonly recordId?: string;
  /** `options.query`, every value as a string: `@request.query.*` in rules, and filter/expand/fields. */
  readonly query: Record<string, string>;
  /**
   * `options.headers`, names normalised as PocketBase does (`X-Token` is `x_token`), every value as
   * a string: `@request.headers.*` in rules. The client writes them, as it writes any header;
   * the hub leaves them out when `realtime.subscriptionHeaders` is off.
   */
  readonly headers: Record<string, string>;
  /** `options.query.filter`, one more condition. */
  readonly filter?: string;
  /** `options.query.expand` and `options.query.fields`. */
  readonly shape: ResponseShape;
  /** `options.query.expand` and `options.query.fields` as sent: messages are shaped once per distinct pair. */
  readonly shapeKey: string;
}

/** Bounds on a subscription set (docs/limits.md). */
export const MAX_SUBSCRIPTIONS = 1000;
export const MAX_SUBSCRIPTION_LENGTH = 2500;

/** PocketBase casts every query and header value to a string (Go's cast.ToString): numbers and booleans as written, objects as JSON. */
function optionValue(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return JSON.stringify(value);
}

/** The 400 `invalid_subscription` for `raw`, naming it (cut at 200 characters) and the reason. */
export function subscriptionError(raw: string, reason: string, cause?: unknown): BadRequestError {
  return new BadRequestError(`Invalid subscription ${JSON.stringify(raw.length > 200 ? `${raw.slice(0, 200)}...` : raw)}: ${reason}`, 'invalid_subscription', cause);
}

function refuse(raw: string, reason: string, cause?: unknown): never {
  throw subscriptionError(raw, reason, cause);
}

/** `options.query` or `options.headers`: an object (or nothing), its keys named by `name`, its values cast to strings. */
function readOptionObject(raw: string, options: { given: unknown; what: string; name: (key: string) => string }): Record<string, string> {
  const out: Record<string, string> = Object.create(null);
  const { given } = options;
  if (given === undefined || given === null) return out;
  if (typeof given !== 'object' || Array.isArray(given)) refuse(raw, `options.${options.what} must be an object`);
  for (const [key, value] of Object.entries(given)) {
    const name = options.name(key);
    if (name !== '') out[name] = optionValue(value);
  }
  return out;
}

function readOptions(raw: string, search: string): { query: Record<string, string>; headers: Record<string, string> } {
  let text: string | null;
  try {
    text = new URLSearchParams(search).get('options');
  } catch (err) {
    refuse(raw, 'the options are not url-encoded', err);
  }
  if (text === null || text === '') return { query: Object.create(null), headers: Object.create(null) };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    refuse(raw, 'options is not valid JSON');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) refuse(raw, 'options must be a JSON object');
  const { query, headers } = parsed as { query?: unknown; headers?: unknown };
  return {
    query: readOptionObject(raw, { given: query, what: 'query', name: (key) => key }),
    headers: readOptionObject(raw, { given: headers, what: 'headers', name: normalizeHeaderName }),
  };
}

/**
 * What a subscription string names before its first `?` and then its first `/`: a collection's
 * name or id (as parseSubscription reads it). The registry's generated column computes the same
 * from the stored strings (lib/db/realtime/realtime-schema.ts), and the capture gate reads it.
 */
export function topicKey(raw: string): string {
  const question = raw.indexOf('?');
  const topic = question < 0 ? raw : raw.slice(0, question);
  const slash = topic.indexOf('/');
  return slash < 0 ? topic : topic.slice(0, slash);
}

/**
 * Parses one subscription string; throws a 400 `invalid_subscription` naming it when it cannot
 * be served (control characters, which would break the event framing; malformed options; a bad
 * `expand` or `fields`). The filter is checked by the caller, who knows the identity.
 */
export function parseSubscription(raw: string, registry: SchemaRegistry): Subscription {
  if (/[\r\n\0]/.test(raw)) refuse(raw, 'it contains a line break or NUL character');
  const question = raw.indexOf('?');
  const topic = question < 0 ? raw : raw.slice(0, question);
  const { query, headers } = readOptions(raw, question < 0 ? '' : raw.slice(question + 1));
  // A change is matched row by row as it happens; a search (a list's relevance) is not matched there in this version.
  if (query.search !== undefined) refuse(raw, 'options.query.search is not supported on realtime subscriptions (docs/search.md)');
  let shape: ResponseShape;
  try {
    shape = parseResponseShape({ fields: query.fields, expand: query.expand });
  } catch (err) {
    if (err instanceof RecordbaseError) refuse(raw, err.message, err);
    throw err;
  }
  const shapeKey = JSON.stringify([query.expand ?? '', query.fields ?? '']);
  // `""` is no filter; one of only whitespace or comments is the parser's 400, as on a list.
  const filter = query.filter !== undefined && query.filter !== '' ? query.filter : undefined;
  const slash = topic.indexOf('/');
  const collection = registry.get(topicKey(raw));
  const rest = slash < 0 ? '*' : topic.slice(slash + 1);
  return { raw, collection, recordId: rest === '*' ? undefined : rest, query, headers, filter, shape, shapeKey };
}
