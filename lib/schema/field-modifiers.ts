/**
 * PocketBase's modifier keys (`tags+`, `+tags`, `tags-`, `views+`, `code:autogenerate`): which
 * operation a body key or a multipart part name asks for, and which fields take which operation.
 * The one parser of them: body keys (lib/records/field-operations.ts) and upload part names
 * (lib/files/stage-uploads.ts) both go through parseModifierKey.
 */
import { fieldTypeOf, type FieldSchema } from './field-types.js';

/**
 * What a key does to its field: the plain key sets it, `+f` prepends, `f+` appends, `f-` removes,
 * `f:autogenerate` sets a text field to the sent prefix and a value generated from its
 * `autogeneratePattern` (PocketBase's text field setter).
 */
export type FieldOperationKind = 'set' | 'prepend' | 'append' | 'remove' | 'autogenerate';

/** The list and number modifiers, in the order they apply after a plain value, whatever order the body lists them in. */
export const MODIFIER_ORDER: readonly Exclude<FieldOperationKind, 'set' | 'autogenerate'>[] = ['prepend', 'append', 'remove'];

/** The suffix of PocketBase's text modifier (`code:autogenerate`). */
const AUTOGENERATE_SUFFIX = ':autogenerate';

/**
 * How a field takes modifiers: lists (multi-valued, or a single select/relation/file treated as a
 * list of at most one) take all three, numbers take `f+` and `f-`, everything else none. A key a
 * field does not take is ignored, so it is neither applied nor visible to rules.
 */
export type ModifierKind = 'list' | 'single-list' | 'number' | 'none';

/** The modifier kind of a field, as its type says (lib/schema/fields/); system fields take none. */
export function classifyModifiers(field: FieldSchema): ModifierKind {
  if (field.system) return 'none';
  const support = fieldTypeOf(field).modifiers;
  if (support === 'list') return field.multiple ? 'list' : 'single-list';
  return support;
}

/**
 * Splits a body key or a multipart part name into the field it names and the operation:
 * `tags+` appends, `+tags` prepends, `tags-` removes, `code:autogenerate` generates, anything
 * else sets. Field names never hold `+`, `-` or `:`, so the split is unambiguous.
 */
export function parseModifierKey(key: string): { name: string; kind: FieldOperationKind } {
  if (key.length > AUTOGENERATE_SUFFIX.length && key.endsWith(AUTOGENERATE_SUFFIX)) {
    return { name: key.slice(0, -AUTOGENERATE_SUFFIX.length), kind: 'autogenerate' };
  }
  if (key.length > 1 && key.endsWith('+')) return { name: key.slice(0, -1), kind: 'append' };
  if (key.length > 1 && key.startsWith('+')) return { name: key.slice(1), kind: 'prepend' };
  if (key.length > 1 && key.endsWith('-')) return { name: key.slice(0, -1), kind: 'remove' };
  return { name: key, kind: 'set' };
}

/**
 * Whether `field` takes operation `kind` from a client: a plain value always, modifiers per
 * ModifierKind; nothing at all for a field only the server writes (autodate), so its keys are
 * ignored as unknown ones are.
 */
export function acceptsOperation(field: FieldSchema, kind: FieldOperationKind): boolean {
  if (!field.system && fieldTypeOf(field).serverOnly) return false;
  if (kind === 'set') return true;
  // As in PocketBase, only the text field has the setter; on any other field the key is ignored.
  if (kind === 'autogenerate') return !field.system && field.type === 'text';
  const modifiers = classifyModifiers(field);
  if (modifiers === 'none') return false;
  return modifiers !== 'number' || kind !== 'prepend';
}
