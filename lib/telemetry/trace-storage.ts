import { endSpan, startSpan } from './start-span.js';

/** The storage methods that get a span: each one call to the adapter (list, an iterator the sweep drains, and localPath, a pure computation, do not). */
const TRACED_METHODS = ['write', 'adopt', 'read', 'stat', 'delete', 'deletePrefix'] as const;
/** The interface's other methods: called on the adapter itself, so an adapter with private fields keeps working. */
const PASSED_METHODS = ['list', 'localPath'] as const;

/**
 * The host's storage adapter (lib/files/storage.ts's Storage, typed by shape: this floor is below
 * files/) seen through spans: every call of a traced method is a CLIENT span `storage <method>`,
 * a child of the active context's span (the request's, when the host's SDK carries context), an
 * error when the call rejects. No key, prefix or file name is recorded: a key holds a record's id
 * and a file's name. The adapter itself is not changed: the result delegates to it, its other
 * properties read through, and every method runs with the adapter as `this`.
 */
export function traceStorage<T extends object>(storage: T): T {
  const traced = Object.create(storage) as T;
  for (const method of TRACED_METHODS) {
    const original = (storage as Record<string, unknown>)[method];
    if (typeof original !== 'function') continue;
    Object.defineProperty(traced, method, {
      enumerable: false,
      value: function tracedCall(...args: unknown[]): Promise<unknown> {
        const span = startSpan(`storage ${method}`, { kind: 'client', attributes: { 'recordbase.storage.operation': method } });
        let result: Promise<unknown>;
        try {
          result = Promise.resolve((original as (...a: unknown[]) => unknown).apply(storage, args));
        } catch (err) {
          endSpan(span, true);
          throw err;
        }
        if (span === undefined) return result;
        return result.then(
          (value) => {
            endSpan(span);
            return value;
          },
          (err: unknown) => {
            endSpan(span, true);
            throw err;
          },
        );
      },
    });
  }
  for (const method of PASSED_METHODS) {
    const original = (storage as Record<string, unknown>)[method];
    if (typeof original === 'function') Object.defineProperty(traced, method, { enumerable: false, value: (...args: unknown[]) => (original as (...a: unknown[]) => unknown).apply(storage, args) });
  }
  return traced;
}
