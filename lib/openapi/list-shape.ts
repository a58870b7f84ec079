import type { JsonSchema } from './describe-field-schemas.js';

/**
 * PocketBase's list shape as a schema, `{page, perPage, totalItems, totalPages, items}`, around
 * the `items` of `itemType` (a component schema's name): what a list of records and a page of
 * aggregate groups both answer. `totals` are the descriptions of their two totals.
 */
export function listShapeSchema(itemType: string, totals: { totalItems: string; totalPages?: string }): JsonSchema {
  return {
    type: 'object',
    required: ['page', 'perPage', 'totalItems', 'totalPages', 'items'],
    properties: {
      page: { type: 'integer' },
      perPage: { type: 'integer', description: 'The page size used (perPage capped at maxPerPage).' },
      totalItems: { type: 'integer', description: totals.totalItems },
      totalPages: totals.totalPages === undefined ? { type: 'integer' } : { type: 'integer', description: totals.totalPages },
      items: { type: 'array', items: { $ref: `#/components/schemas/${itemType}` } },
    },
  };
}
