/** The `url` field type: a string, `""` when empty, an absolute http(s) URL with a host. */
import type { FieldError } from '../../errors.js';
import { emptyUnlessRequired, sameInput } from '../field-schemas.js';
import { defineFieldType, type FieldBase } from '../field-type-spec.js';
import { describeFormattedText } from './formatted-text.js';

/** A url field's declaration. */
export interface UrlFieldDefinition extends FieldBase {
  type: 'url';
}

/** Control characters and whitespace are never part of a URL a client means. */
const URL_FORBIDDEN = /[\s\u0000-\u001f\u007f]/;
const URL_SCHEME = /^https?:\/\//i;
/** URL_SCHEME as a JSON Schema pattern (no flags there). */
const HTTP_URL_PATTERN = '^[Hh][Tt][Tt][Pp][Ss]?://';
const INVALID_URL: FieldError = { code: 'validation_invalid_url', message: 'Must be a valid url.' };

/** The `http-url` format: an absolute http(s) URL with a host. */
function testHttpUrl(value: string): boolean {
  if (!URL_SCHEME.test(value) || URL_FORBIDDEN.test(value)) return false;
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
  } catch {
    return false;
  }
}

/** The url type (docs/collections.md). */
export const urlField = defineFieldType<UrlFieldDefinition>({
  type: 'url',
  ...describeFormattedText<UrlFieldDefinition>({ format: 'http-url', test: testHttpUrl, error: INVALID_URL }),
  describe(field) {
    const record = emptyUnlessRequired(field, { format: 'uri' });
    const input = emptyUnlessRequired(field, { format: 'uri', pattern: HTTP_URL_PATTERN });
    return sameInput(record, { ...input, description: 'An absolute http(s) URL.' });
  },
});
