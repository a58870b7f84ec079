import express, { type Router } from 'express';
import { buildOpenApiDocument, renderOpenApiDocument, type OpenApiOptions } from '../openapi/build-openapi-document.js';
import type { SchemaRegistry } from '../schema/collection-schema.js';

/**
 * `GET /api/openapi.json` (option `openapi: true`, docs/openapi.md): the same document as
 * `recordbase openapi`, with `servers` set to where the router is mounted. Built once per mount
 * path; a router mounted at one path (the usual case) serialises it once.
 */
export function createOpenApiRoute(options: { registry: SchemaRegistry; document: Omit<OpenApiOptions, 'serverUrl'> }): Router {
  const router = express.Router();
  let cached: { serverUrl: string; body: string } | undefined;
  router.get('/api/openapi.json', (req, res) => {
    const serverUrl = req.baseUrl === '' ? '/' : req.baseUrl;
    if (cached?.serverUrl !== serverUrl) {
      cached = { serverUrl, body: renderOpenApiDocument(buildOpenApiDocument(options.registry, { ...options.document, serverUrl })) };
    }
    res.type('application/json').send(cached.body);
  });
  return router;
}
