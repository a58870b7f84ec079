import { expect, test } from '@jest/globals';
import { SchemaError } from '../../../../lib/errors.js';
import { buildSchemaRegistry, type CollectionSchema, type DeclaredFieldSchema } from '../../../../lib/schema/collection-schema.js';
import type { FieldDefinition } from '../../../../lib/schema/definitions.js';

/** Builds one collection `c` of `fields` (and a `t` for relations to point at). */
export function declareFields(...fields: object[]): CollectionSchema {
  return buildSchemaRegistry([
    { name: 't', fields: [] },
    { name: 'c', fields: fields as FieldDefinition[] },
  ]).get('c')!;
}

/** The checked field `f` of a one-field collection. */
export function declareField(field: object): DeclaredFieldSchema {
  return declareFields({ name: 'f', ...field }).field('f') as DeclaredFieldSchema;
}

/** The checked field of one declaration, after checking that the user's object was left as written. */
export function declareAsWritten(declaration: { name: string; type: string; [option: string]: unknown }): DeclaredFieldSchema {
  const copy = structuredClone(declaration);
  const field = declareFields(declaration).field(declaration.name) as DeclaredFieldSchema;
  expect(declaration).toEqual(copy);
  return field;
}

/** A declaration of field `f` the router refuses: the case, the declaration, what the message says. */
export type RefusedSetting = [label: string, field: object, message: RegExp];

/** One test per case: declaring `f` so is a SchemaError that names the collection and the field first. */
export function testRefusedSettings(cases: readonly RefusedSetting[]): void {
  test.each<RefusedSetting>([...cases])('%s is a SchemaError naming the field', (_label, field, message) => {
    let error: unknown;
    try {
      declareField(field);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(SchemaError);
    expect((error as Error).message).toMatch(/^collection "c", field "f": /);
    expect((error as Error).message).toMatch(message);
  });
}
