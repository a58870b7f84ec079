/** The `email` field type: a string, `""` when empty, checked as an address (ajv-formats' full check) and, optionally, by its domain. */
import { fullFormats } from 'ajv-formats/dist/formats.js';
import type { FieldError } from '../../errors.js';
import { emptyUnlessRequired, sameInput } from '../field-schemas.js';
import { defineFieldType } from '../field-type-spec.js';
import { OverflowSafeRegExp } from '../overflow-safe-regexp.js';
import { checkDomainLists, describeDomainLists, describeFormattedText, isDomainAllowed, normalizeDomainLists, type DomainListsDefinition } from './formatted-text.js';

/** An email field's declaration. */
export interface EmailFieldDefinition extends DomainListsDefinition {
  type: 'email';
}

/** RFC 5321 caps an address at 254 characters; checking that first keeps the regex off huge input. */
const MAX_EMAIL_LENGTH = 254;
const EMAIL_FORMAT = fullFormats.email as RegExp;
const INVALID_EMAIL: FieldError = { code: 'validation_invalid_email', message: 'Must be a valid email address.' };
const DOMAIN_NOT_ALLOWED: FieldError = { code: 'validation_email_domain_not_allowed', message: 'Email domain is not allowed.' };

/** The `email` format: ajv-formats' full check, on values of a possible length only. */
function testEmail(value: string): boolean {
  return value.length <= MAX_EMAIL_LENGTH && OverflowSafeRegExp.prototype.test.call(EMAIL_FORMAT, value);
}

/** The email type (docs/collections.md). */
export const emailField = defineFieldType<EmailFieldDefinition>({
  type: 'email',
  keys: ['onlyDomains', 'exceptDomains'],
  ...describeFormattedText<EmailFieldDefinition>({ format: 'email', test: testEmail, error: INVALID_EMAIL }),
  checkSettings: checkDomainLists,
  normalize: normalizeDomainLists,
  /** The domain is what follows the `@` (the format allows one); a malformed address is the format's error, not this one. */
  checkValue({ definition: def }, value) {
    if (typeof value !== 'string' || value === '' || !testEmail(value)) return null;
    return isDomainAllowed(def, value.slice(value.lastIndexOf('@') + 1)) ? null : { ...DOMAIN_NOT_ALLOWED };
  },
  describe(field) {
    const record = emptyUnlessRequired(field, { format: 'email' });
    const domains = describeDomainLists(field.definition);
    return sameInput(record, domains === '' ? { ...record, maxLength: MAX_EMAIL_LENGTH } : { ...record, maxLength: MAX_EMAIL_LENGTH, description: `An email address.${domains}` });
  },
});
