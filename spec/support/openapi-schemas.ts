import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { validate } from '@readme/openapi-parser';
import type { OpenApiDocument } from '../../lib/openapi/build-openapi-document.js';

/** Validates a document with @readme/openapi-parser (the OpenAPI 3.1 schema plus its semantic rules); throws with every error. */
export async function expectValidOpenApi(document: OpenApiDocument): Promise<void> {
  const result = await validate(structuredClone(document) as never);
  if (!result.valid) throw new Error(`invalid OpenAPI document:\n${result.errors.map((e) => e.message).join('\n')}`);
  if (result.warnings.length > 0) throw new Error(`OpenAPI warnings:\n${result.warnings.map((w) => w.message).join('\n')}`);
}

/**
 * Compiles the document's component schemas with ajv in JSON Schema 2020-12 mode (the dialect of
 * OpenAPI 3.1), strictly, with formats asserted: an invalid keyword fails here, and real
 * requests and responses can be checked against the schemas.
 */
export function compileComponentSchemas(document: OpenApiDocument): (name: string) => ValidateFunction {
  const schemas = (document.components as { schemas: Record<string, unknown> }).schemas;
  const ajv = new Ajv2020({ strict: true, strictTypes: false, allErrors: true });
  (addFormats as unknown as (ajv: Ajv2020) => void)(ajv);
  ajv.addFormat('binary', true);
  ajv.addVocabulary(['x-recordbase-relation', 'x-recordbase-presentable']);
  const id = 'https://recordbase.invalid/openapi.json';
  const rewritten = JSON.parse(JSON.stringify({ $id: id, $defs: schemas }).replaceAll('#/components/schemas/', '#/$defs/')) as object;
  ajv.addSchema(rewritten);
  const cache = new Map<string, ValidateFunction>();
  return (name) => {
    let fn = cache.get(name);
    if (!fn) {
      if (!(name in schemas)) throw new Error(`no component schema ${name}`);
      fn = ajv.compile({ $ref: `${id}#/$defs/${name}` });
      cache.set(name, fn);
    }
    return fn;
  };
}

/** Asserts that value matches the named component schema, with ajv's errors in the failure. */
export function expectMatchesSchema(schemaOf: (name: string) => ValidateFunction, name: string, value: unknown): void {
  const fn = schemaOf(name);
  if (!fn(value)) throw new Error(`${name} does not match ${JSON.stringify(value)}:\n${JSON.stringify(fn.errors, null, 2)}`);
}
