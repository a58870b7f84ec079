import { describe, expect, test } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { demoCollections } from '../../../examples/demo/collections.js';
import { buildOpenApiDocument, renderOpenApiDocument } from '../../../lib/openapi/build-openapi-document.js';
import { renderTypeScriptTypes } from '../../../lib/openapi/render-typescript-types.js';
import { resolveOptions } from '../../../lib/options.js';
import { buildSchemaRegistry } from '../../../lib/schema/collection-schema.js';

const read = (name: string) => readFileSync(new URL(`../../../docs/examples/${name}`, import.meta.url), 'utf8');

/** docs/openapi.md shows the demo's outputs; these files are them, byte for byte. */
describe('the example outputs in docs/examples', () => {
  const registry = buildSchemaRegistry(demoCollections);

  const { limits, multipartUpdate } = resolveOptions({ collections: demoCollections }, {});

  test('demo-openapi.json is `recordbase openapi --server http://127.0.0.1:8090/backend` for the demo', () => {
    const document = buildOpenApiDocument(registry, { serverUrl: 'http://127.0.0.1:8090/backend', limits, multipartUpdate });
    expect(read('demo-openapi.json')).toBe(renderOpenApiDocument(document));
  });

  test('demo-types.ts is `recordbase types` for the demo', () => {
    expect(read('demo-types.ts')).toBe(renderTypeScriptTypes(registry, { limits, multipartUpdate }));
  });
});
