/** The `url` field type: a string, `""` when empty, an absolute http(s) URL with a host, optionally checked by its domain. */
import type { FieldError } from '../../errors.js';
import { emptyUnlessRequired, sameInput } from '../field-schemas.js';
import { defineFieldType } from '../field-type-spec.js';
import { checkDomainLists, describeDomainLists, describeFormattedText, isDomainAllowed, normalizeDomainLists, type DomainListsDefinition } from './formatted-text.js';

/** A url field's declaration. */
export interface UrlFieldDefinition extends DomainListsDefinition {
  type: 'url';
}

/** Control characters and whitespace are never part of a URL a client means. */
const URL_FORBIDDEN = /[\s\u0000-\u001f\u007f]/;
const URL_SCHEME = /^https?:\/\//i;
/** URL_SCHEME as a JSON Schema pattern (no flags there). */
const HTTP_URL_PATTERN = '^[Hh][Tt][Tt][Pp][Ss]?://';
const INVALID_URL: FieldError = { code: 'validation_invalid_url', message: 'Must be a valid url.' };
const DOMAIN_NOT_ALLOWED: FieldError = { code: 'validation_url_domain_not_allowed', message: 'Url domain is not allowed.' };

/** The host of an absolute http(s) URL with a host, as the WHATWG parser reads it; undefined for anything else. */
function readHttpHost(value: string): string | undefined {
  if (!URL_SCHEME.test(value) || URL_FORBIDDEN.test(value)) return undefined;
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '' ? url.hostname : undefined;
  } catch {
    return undefined;
  }
}

/** The `http-url` format: an absolute http(s) URL with a host. */
function testHttpUrl(value: string): boolean {
  return readHttpHost(value) !== undefined;
}

/** The url type (docs/collections.md). */
export const urlField = defineFieldType<UrlFieldDefinition>({
  type: 'url',
  keys: ['onlyDomains', 'exceptDomains'],
  ...describeFormattedText<UrlFieldDefinition>({ format: 'http-url', test: testHttpUrl, error: INVALID_URL }),
  checkSettings: checkDomainLists,
  normalize: normalizeDomainLists,
  /**
   * The domain is the host as the URL parser reads it (so `http://good.example@evil.example/` is
   * evil.example, and a port is not part of it); a malformed URL is the format's error.
   */
  checkValue({ definition: def }, value) {
    if (typeof value !== 'string' || value === '') return null;
    const host = readHttpHost(value);
    if (host === undefined) return null;
    return isDomainAllowed(def, host) ? null : { ...DOMAIN_NOT_ALLOWED };
  },
  describe(field) {
    const record = emptyUnlessRequired(field, { format: 'uri' });
    const input = emptyUnlessRequired(field, { format: 'uri', pattern: HTTP_URL_PATTERN });
    return sameInput(record, { ...input, description: `An absolute http(s) URL.${describeDomainLists(field.definition)}` });
  },
});
