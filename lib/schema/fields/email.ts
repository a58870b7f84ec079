/** The `email` field type: a string, `""` when empty, checked as an address (ajv-formats' full check). */
import { fullFormats } from 'ajv-formats/dist/formats.js';
import type { FieldError } from '../../errors.js';
import { emptyUnlessRequired, sameInput } from '../field-schemas.js';
import { defineFieldType, type FieldBase } from '../field-type-spec.js';
import { OverflowSafeRegExp } from '../overflow-safe-regexp.js';
import { describeFormattedText } from './formatted-text.js';

/** An email field's declaration. */
export interface EmailFieldDefinition extends FieldBase {
  type: 'email';
}

/** RFC 5321 caps an address at 254 characters; checking that first keeps the regex off huge input. */
const MAX_EMAIL_LENGTH = 254;
const EMAIL_FORMAT = fullFormats.email as RegExp;
const INVALID_EMAIL: FieldError = { code: 'validation_invalid_email', message: 'Must be a valid email address.' };

/** The `email` format: ajv-formats' full check, on values of a possible length only. */
function testEmail(value: string): boolean {
  return value.length <= MAX_EMAIL_LENGTH && OverflowSafeRegExp.prototype.test.call(EMAIL_FORMAT, value);
}

/** The email type (docs/collections.md). */
export const emailField = defineFieldType<EmailFieldDefinition>({
  type: 'email',
  ...describeFormattedText<EmailFieldDefinition>({ format: 'email', test: testEmail, error: INVALID_EMAIL }),
  describe(field) {
    const record = emptyUnlessRequired(field, { format: 'email' });
    return sameInput(record, { ...record, maxLength: MAX_EMAIL_LENGTH });
  },
});
