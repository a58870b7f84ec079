/**
 * The request headers rules read as `@request.headers.<name>` (docs/query-language.md,
 * "`@request.headers`"). PocketBase names each header in snake case: `X-Token` is `x_token`.
 * Header values are whatever the client sent unless a proxy in front or the host's own
 * middleware replaces them, so a rule on a header is only as good as that proxy or middleware.
 */

/**
 * A header name as PocketBase writes it (its `inflector.Snakecase`): split at every character that
 * is not an ASCII letter or digit (`-`, `_`, `.`, ...) and before an upper-case letter that follows
 * a lower-case one, joined with `_`, lower-cased. `X-Token`, `x_token` and `xToken` are `x_token`.
 */
export function normalizeHeaderName(name: string): string {
  const words = name.split(/[^A-Za-z0-9]+/).filter((word) => word !== '');
  return words
    .map((word) => word.replace(/(?<=[^A-Z])([A-Z])/g, '_$1'))
    .join('_')
    .toLowerCase();
}

/**
 * A header name as an HTTP request may carry it to a rule, once lower-cased (Node lower-cases
 * the client's; a host's middleware may not): letters and digits in words joined by single `-`.
 * Its normalised name only replaces `-` by `_`, so no two accepted names meet: a client cannot
 * send `x_token`, `x.token` or `x--token` to stand in for the `X-Token` a proxy sets (nginx
 * drops such names by default, too).
 */
const RULE_HEADER_NAME = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

/** A request's headers as the host's middleware left them (Node's `req.headers`, typed loosely: a host may set anything). */
export type HostHeaders = Readonly<Record<string, unknown>>;

/**
 * A header's value as a rule reads it: Node's string; an array (`set-cookie`, or one a host set)
 * joined as Node joins a repeated header; a number or boolean a host set, as text. Anything else
 * is no value, so the header reads as absent.
 */
function readHeaderValue(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value) && value.every((item) => typeof item === 'string')) return value.join(', ');
  return undefined;
}

/**
 * The headers of an HTTP request as rules read them: every header of `headers` (the request's
 * `req.headers` once the host's middleware has run, so a header the host set, replaced or
 * removed reads as the host left it) whose lower-cased name is RULE_HEADER_NAME, under its
 * normalised name. A repeated header is one value as Node joined it (`a, b`), so a client's
 * copy cannot stand in front of a value a proxy appends. A name that two keys lower-case to
 * (the client's `x-tenant` and a host's `X-Tenant`) is read from neither: which one the host
 * meant cannot be told, and a rule then fails closed.
 */
export function readRuleHeaders(headers: HostHeaders): Record<string, string> {
  const out: Record<string, string> = Object.create(null);
  const ambiguous = new Set<string>();
  for (const [key, raw] of Object.entries(headers)) {
    const name = key.toLowerCase();
    const value = readHeaderValue(raw);
    if (value === undefined || !RULE_HEADER_NAME.test(name)) continue;
    const normal = name.replace(/-/g, '_');
    if (Object.hasOwn(out, normal)) ambiguous.add(normal);
    out[normal] = value;
  }
  for (const normal of ambiguous) delete out[normal];
  return out;
}

/**
 * The rule headers of a request (readRuleHeaders of `read()`), read only when something looks:
 * most requests are checked by rules that never name `@request.headers`. A proxy, so that it
 * reads as the plain object readRuleHeaders returns wherever it is copied or passed (a batch's
 * requests, a rule's request with its body). Read when a rule first looks, in the route's
 * handler: after the host's middleware, which runs before the router.
 */
export function lazyRuleHeaders(read: () => HostHeaders): Readonly<Record<string, string>> {
  let headers: Record<string, string> | undefined;
  const target = (): Record<string, string> => (headers ??= readRuleHeaders(read()));
  return new Proxy(Object.create(null) as Record<string, string>, {
    get: (_, key) => (typeof key === 'string' ? target()[key] : undefined),
    has: (_, key) => key in target(),
    ownKeys: () => Reflect.ownKeys(target()),
    getOwnPropertyDescriptor: (_, key) => {
      const descriptor = Reflect.getOwnPropertyDescriptor(target(), key);
      // A proxy may only report an own property as configurable if its target has it so.
      return descriptor && { ...descriptor, configurable: true };
    },
    set: () => false,
    defineProperty: () => false,
    deleteProperty: () => false,
  });
}
