import type { CollectionSchema } from '../schema/collection-schema.js';

/**
 * The body of a multipart update under the interface's rule (4.7): a field that is not sent is
 * cleared. A field counts as sent when `f`, `f+`, `+f` or `f-` is present (DESIGN.md section 10).
 *
 * Hidden fields are cleared only for callers who can see them (superusers): a form built from
 * what a client receives can never resend a hidden field, and wiping it on every upload would
 * lose data the client never knew about.
 */
export function clearUnsentFields(collection: CollectionSchema, data: Record<string, unknown>, options: { includeHidden: boolean }): Record<string, unknown> {
  const out: Record<string, unknown> = { ...data };
  for (const field of collection.fields) {
    if (field.system || (field.hidden && !options.includeHidden)) continue;
    const { name } = field;
    const sent = [name, `${name}+`, `+${name}`, `${name}-`].some((key) => Object.prototype.hasOwnProperty.call(data, key));
    if (!sent) out[name] = null;
  }
  return out;
}
