import { describe, expect, test } from '@jest/globals';
import { declareAsWritten, testRefusedSettings } from './declare-field.js';

describe('the url field type', () => {
  testRefusedSettings([
    ['a domain list that is not an array', { type: 'url', onlyDomains: 'a.example' }, /onlyDomains must be an array of strings/],
    ['a domain with a port', { type: 'url', exceptDomains: ['evil.example:443'] }, /"evil.example:443" is not a domain name/],
    ['a domain with a user part', { type: 'url', onlyDomains: ['good.example@evil.example'] }, /is not a domain name/],
    ['an empty domain', { type: 'url', onlyDomains: [''] }, /"" is not a domain name/],
  ]);

  test("PocketBase's spellings of an unset option are accepted and read as unset; the user's object is left as written", () => {
    expect(declareAsWritten({ name: 'site', type: 'url', onlyDomains: [], exceptDomains: [] }).definition).toEqual({ name: 'site', type: 'url' });
  });
});
