import { randomBytes } from 'node:crypto';
import type { Route } from './route-table.js';
import { buildOpenApiDocument, renderOpenApiDocument, type OpenApiOptions } from '../openapi/build-openapi-document.js';
import type { SchemaRegistry } from '../schema/collection-schema.js';

/**
 * `GET /api/openapi.json` (option `openapi: true`, docs/openapi.md): the same document as
 * `recordbase openapi`, with `servers` set to where the router is mounted. The text is rendered
 * once, around a placeholder for the server URL; a request only splices in its mount path, so a
 * router mounted under a parameter (`/:tenant`) costs a string join per request, not a rebuild.
 */
export function createOpenApiRoute(options: { registry: SchemaRegistry; document: Omit<OpenApiOptions, 'serverUrl'> }): Route {
  // Random, so that no collection can contain it (select values are free text).
  const placeholder = `recordbase-server-url-${randomBytes(12).toString('hex')}`;
  const text = renderOpenApiDocument(buildOpenApiDocument(options.registry, { ...options.document, serverUrl: placeholder }));
  const [before, after, ...rest] = text.split(JSON.stringify(placeholder));
  if (after === undefined || rest.length > 0) throw new Error('recordbase: the OpenAPI server URL placeholder must appear exactly once');
  return {
    method: 'GET',
    path: '/api/openapi.json',
    handlers: [
      (req, res) => {
        res.type('application/json').send(before + JSON.stringify(req.baseUrl === '' ? '/' : req.baseUrl) + after);
      },
    ],
  };
}
