import { randomInt } from 'node:crypto';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
const ID_PATTERN = /^[a-z0-9]{15}$/;

/** A new record id: 15 characters of [a-z0-9] from a CSPRNG (about 77 bits). */
export function generateRecordId(): string {
  let id = '';
  for (let i = 0; i < 15; i++) id += ALPHABET[randomInt(ALPHABET.length)];
  return id;
}

/** True for a well-formed record id (what a client may send on create). */
export function isRecordId(value: unknown): value is string {
  return typeof value === 'string' && ID_PATTERN.test(value);
}
