/**
 * The `editor` field type (PocketBase's `core/field_editor.go`): rich text as HTML, kept exactly
 * as sent (recordbase never renders it; whoever displays it sanitises it), `""` when empty, at
 * most `maxSize` bytes. `fields=body:excerpt(200)` gives its text without the tags.
 */
import { SchemaError, type FieldError } from '../../errors.js';
import { coerceText, readSingle } from '../coerce-value.js';
import { sameInput, type JsonSchema } from '../field-schemas.js';
import { defineFieldType, SINGLE_VALUE_ONLY, withoutUnset, type FieldBase } from '../field-type-spec.js';

/** An editor field's declaration. */
export interface EditorFieldDefinition extends FieldBase {
  type: 'editor';
  /** Maximum size of the value in bytes (UTF-8). Default (and 0, as PocketBase writes it) 5 MiB. */
  maxSize?: number;
  /** PocketBase's hint to its dashboard editor (whether it rewrites links); kept, changes nothing here. */
  convertURLs?: boolean;
}

/** PocketBase's default for an editor field's size (5 MiB). */
export const DEFAULT_EDITOR_MAX_SIZE = 5 * 1024 * 1024;

/** The editor type (docs/collections.md). */
export const editorField = defineFieldType<EditorFieldDefinition>({
  type: 'editor',
  keys: ['maxSize', 'convertURLs'],
  storage: 'text',
  checkSettings(def, where) {
    if (def.maxSize !== undefined && def.maxSize !== null && (!Number.isSafeInteger(def.maxSize) || def.maxSize < 0)) {
      throw new SchemaError(`${where}: maxSize must be a positive integer (bytes), or 0 for the default`);
    }
    if (def.convertURLs !== undefined && typeof def.convertURLs !== 'boolean') throw new SchemaError(`${where}: convertURLs must be true or false`);
  },
  normalize: (def) => withoutUnset(def, ['maxSize']),
  coerce: (_field, raw) => readSingle(raw, SINGLE_VALUE_ONLY, coerceText),
  /** Bytes, not characters: the limit is on what is stored and sent, so it is measured in UTF-8. */
  checkValue({ definition: def }, value): FieldError | null {
    if (typeof value !== 'string') return null;
    const maxSize = def.maxSize ?? DEFAULT_EDITOR_MAX_SIZE;
    // A character is at most 3 bytes in UTF-16-to-UTF-8 terms per code unit: most values need no count.
    if (value.length * 3 <= maxSize || Buffer.byteLength(value, 'utf8') <= maxSize) return null;
    return { code: 'validation_content_size_limit', message: `The maximum allowed content size is ${maxSize} bytes.` };
  },
  describe({ definition: def, required }) {
    const schema: JsonSchema = { type: 'string', contentMediaType: 'text/html', description: `HTML, kept as sent; at most ${def.maxSize ?? DEFAULT_EDITOR_MAX_SIZE} bytes (UTF-8).` };
    if (required) schema.minLength = 1;
    return sameInput({ type: 'string', contentMediaType: 'text/html' }, schema);
  },
});
