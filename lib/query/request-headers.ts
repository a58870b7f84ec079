/**
 * The request headers rules read as `@request.headers.<name>` (docs/query-language.md,
 * "`@request.headers`"). PocketBase names each header in snake case: `X-Token` is `x_token`.
 * Header values are whatever the client sent unless a proxy in front replaces them, so a rule on
 * a header is only as good as that proxy.
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
 * A header name as an HTTP request may carry it to a rule: lower-case letters and digits in
 * words joined by single `-` (Node lower-cases names). Its normalised name only replaces `-` by
 * `_`, so no two accepted names meet: a client cannot send `x_token`, `x.token` or `x--token`
 * to stand in for the `X-Token` a proxy sets (nginx drops such names by default, too).
 */
const RULE_HEADER_NAME = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

/**
 * The headers of an HTTP request as rules read them: every header whose name is RULE_HEADER_NAME,
 * under its normalised name, with its first value (as PocketBase). `distinct` is Node's
 * `req.headersDistinct`, already bounded by Node's own limits on a request's headers
 * (`maxHeaderSize`, 16 KiB by default, and `maxHeadersCount`); the values are Node's own strings,
 * not copies.
 */
export function readRuleHeaders(distinct: Readonly<Record<string, readonly string[] | undefined>>): Record<string, string> {
  const headers: Record<string, string> = Object.create(null);
  for (const [name, values] of Object.entries(distinct)) {
    const first = values?.[0];
    if (first === undefined || !RULE_HEADER_NAME.test(name)) continue;
    headers[name.replace(/-/g, '_')] = first;
  }
  return headers;
}

/**
 * The rule headers of a request (readRuleHeaders of `read()`), read only when something looks:
 * most requests are checked by rules that never name `@request.headers`, and reading them costs
 * about 4 µs a request (Node builds `headersDistinct` for every header, then each name is
 * tested). A proxy, so that it reads as the plain object readRuleHeaders returns wherever it is
 * copied or passed (a batch's requests, a rule's request with its body); made with the
 * request, so the headers are those it arrived with.
 */
export function lazyRuleHeaders(read: () => Readonly<Record<string, readonly string[] | undefined>>): Readonly<Record<string, string>> {
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
