import { describe, expect, test } from '@jest/globals';
import { SchemaError } from '../../../lib/errors.js';
import { compileCollections } from '../../../lib/records/compile-collections.js';
import { declareField, testRefusedSettings } from './fields/declare-field.js';

/** A field's own rules (issue 46, DESIGN 24) as the schema checks them, and as the router's start compiles them. */
describe('field rules, declared', () => {
  test('only the actions that restrict someone are kept: "" and absent ones let everyone', () => {
    expect(declareField({ type: 'text', rules: { view: 'id = @request.auth.id', create: null, update: '' } }).rules).toEqual({ view: 'id = @request.auth.id', create: null });
    expect(declareField({ type: 'text', rules: { view: '' } }).rules).toBeUndefined();
    expect(declareField({ type: 'text' }).rules).toBeUndefined();
  });

  testRefusedSettings([
    ['rules that are not an object', { type: 'text', rules: 'id = @request.auth.id' }, /rules must be an object/],
    ['rules as a list', { type: 'text', rules: [] }, /rules must be an object/],
    ['a rule for an action fields do not have', { type: 'text', rules: { list: '' } }, /rules has an unknown key "list" \(a field's rules are view, create and update\)/],
    ['a rule that is not a string', { type: 'text', rules: { view: true } }, /rule "view" must be null, "" or a filter expression/],
  ]);

  test('a view rule on a hidden field is refused; hidden with write rules is not', () => {
    expect(() => declareField({ type: 'text', hidden: true, rules: { view: 'id = @request.auth.id' } })).toThrow(
      new SchemaError('collection "c", field "f": a hidden field is already kept from everyone but superusers; give it a view rule or hidden, not both'),
    );
    expect(declareField({ type: 'text', hidden: true, rules: { update: null } }).rules).toEqual({ update: null });
  });
});

describe('field rules, compiled when the router is created', () => {
  const withRule = (rule: string) => [{ name: 'c', fields: [{ name: 'n', type: 'text' as const }, { name: 'f', type: 'text' as const, rules: { update: rule } }] }];

  test('a rule that does not compile stops the start, naming the collection, the field and the rule', () => {
    expect(() => compileCollections(withRule('nope = 1'))).toThrow(new SchemaError('collection "c", field "f": rule "update" is invalid: unknown field "nope" at position 0.'));
    expect(() => compileCollections(withRule('  // nothing'))).toThrow(/collection "c", field "f": rule "update" holds only whitespace or comments/);
  });

  test('a rule reads every field of its collection and the request, as a collection rule does', () => {
    expect(() => compileCollections(withRule("n != '' && @request.body.f:changed = false && @request.auth.id != ''"))).not.toThrow();
  });
});
