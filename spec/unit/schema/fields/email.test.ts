import { describe, expect, test } from '@jest/globals';
import { declareAsWritten, declareField, testRefusedSettings } from './declare-field.js';

describe('the email field type', () => {
  testRefusedSettings([
    ['both domain lists', { type: 'email', onlyDomains: ['a.example'], exceptDomains: ['b.example'] }, /set onlyDomains or exceptDomains, not both/],
    ['a domain with a path', { type: 'email', onlyDomains: ['a.example/x'] }, /is not a domain name/],
  ]);

  test("PocketBase's spellings of an unset option are accepted and read as unset; the user's object is left as written", () => {
    expect(declareAsWritten({ name: 'mail', type: 'email', onlyDomains: null, exceptDomains: null }).definition).toEqual({ name: 'mail', type: 'email' });
  });

  test('domains are kept in one form: lower case, ASCII, without a final dot', () => {
    expect(declareField({ type: 'email', onlyDomains: ['Example.COM.', 'bücher.example'] }).definition).toMatchObject({ onlyDomains: ['example.com', 'xn--bcher-kva.example'] });
  });
});
