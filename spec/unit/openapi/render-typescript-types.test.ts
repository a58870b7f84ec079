import { describe, expect, test } from '@jest/globals';
import { buildOpenApiDocument, type OpenApiOptions } from '../../../lib/openapi/build-openapi-document.js';
import { renderTypeScriptTypes } from '../../../lib/openapi/render-typescript-types.js';
import { resolveOptions } from '../../../lib/options.js';
import { buildSchemaRegistry } from '../../../lib/schema/collection-schema.js';
import { blogCollections } from '../../support/demo-collections.js';

/** The schema version the header of rendered types names. */
function versionOf(types: string): string | undefined {
  return /\(schema version ([0-9a-f]+)\)/.exec(types)?.[1];
}

describe('the TypeScript types', () => {
  const registry = buildSchemaRegistry(blogCollections());

  test.each<[string, Partial<Pick<OpenApiOptions, 'multipartUpdate'>> & { maxPerPage?: number }]>([
    ['a default router', {}],
    ["a router with multipartUpdate: 'merge'", { multipartUpdate: 'merge' }],
    ['a router with another maxPerPage', { maxPerPage: 50 }],
  ])('name the schema version of the document built with the same options: %s', (_label, change) => {
    const resolved = resolveOptions({ collections: blogCollections(), multipartUpdate: change.multipartUpdate, limits: { maxPerPage: change.maxPerPage } }, {});
    const options = { limits: resolved.limits, multipartUpdate: resolved.multipartUpdate };
    const version = (buildOpenApiDocument(registry, options).info as { version: string }).version;
    expect(versionOf(renderTypeScriptTypes(registry, options))).toBe(version);
  });
});
